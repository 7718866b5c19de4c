"""Install a set of files in one pass: content and mode, atomically, through the Gate.

One module call for all the files of a component keeps a no-op run to a single
round trip, where copy/template would cost two per file.
"""
import hashlib
import os
import stat
import subprocess

from . import sysfs
from .gate import TuningError


def _current(path):
    """(content, mode) of an existing file, or (None, None)."""
    try:
        with open(path) as handle:
            content = handle.read()
        return content, stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        return None, None
    except (OSError, UnicodeDecodeError) as exc:
        raise TuningError("cannot read %s: %s" % (path, exc)) from exc


def _validate(command, content):
    """Run e.g. `bash -n %s` on the new content before it replaces anything.

    %s names /dev/stdin, where the content is fed: no file is written for it, neither
    next to the target (where a stray one could be picked up, e.g. from a .d directory)
    nor in a temp directory (a secret's content would land there), so check mode
    validates too and still creates nothing on the host.
    """
    argv = [word.replace("%s", "/dev/stdin") for word in command.split()]
    try:
        proc = subprocess.run(argv, input=content, capture_output=True, text=True, check=False)
    except OSError as exc:
        raise TuningError("validation `%s` cannot run: %s" % (command, exc)) from exc
    if proc.returncode != 0:
        raise TuningError("validation `%s` failed: %s" % (command, (proc.stderr or proc.stdout).strip()))


def install(root, files, gate):
    """files: [{path, content, mode (octal string), validate (optional, with %s), diff (false: sizes only)}]."""
    changed, diffs = [], []
    for spec in files:
        path = sysfs.path(root, spec["path"])
        mode = int(str(spec.get("mode", "0644")), 8)
        before, before_mode = _current(path)
        if before == spec["content"] and before_mode == mode:
            continue
        if spec.get("validate"):
            _validate(spec["validate"], spec["content"])
        if before == spec["content"]:
            gate.actions.append("chmod %o %s" % (mode, path))
            if not gate.check_mode:
                os.chmod(path, mode)
        else:
            gate.write_file(path, spec["content"], mode)
        changed.append(spec["path"])
        if spec.get("diff", True):
            diffs.append({"before_header": spec["path"], "after_header": spec["path"],
                          "before": before if before is not None else "", "after": spec["content"]})
        else:
            # Shipped code, not configuration: its size says enough.
            diffs.append({"before_header": spec["path"], "after_header": spec["path"],
                          "before": "(%d bytes)\n" % len(before) if before is not None else "",
                          "after": "(%d bytes)\n" % len(spec["content"])})
    return {"changed": bool(changed), "files": changed, "diff": diffs}


def fingerprints(root, paths):
    """{path: {sha1, mode} or None}: enough to tell whether rendered files would change them."""
    found = {}
    for rel in paths:
        try:
            with open(sysfs.path(root, rel), "rb") as handle:
                digest = hashlib.sha1(handle.read()).hexdigest()
            found[rel] = {"sha1": digest, "mode": "%04o" % stat.S_IMODE(os.stat(sysfs.path(root, rel)).st_mode)}
        except OSError:
            found[rel] = None
    return found
