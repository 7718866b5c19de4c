"""The checkout's tracked files alone, as `git clone` gives them (symbolic links as links): what a
newcomer or CI starts from, with nothing installed or generated."""
import os
import shutil
import subprocess

from fakehost import REPO


def clean_clone(target):
    files = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout.split(b"\0")
    for name in filter(None, (f.decode() for f in files)):
        source, copy = REPO / name, target / name
        if not source.is_symlink() and not source.is_file():
            continue  # deleted in the work tree
        copy.parent.mkdir(parents=True, exist_ok=True)
        if source.is_symlink():
            copy.symlink_to(os.readlink(source))
        else:
            shutil.copy2(source, copy)
    return target
