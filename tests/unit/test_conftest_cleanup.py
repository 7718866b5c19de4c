"""The unit suite leaves no temporary collections path behind (conftest links the checkout into one)."""
import os
import subprocess
import sys

from fakehost import REPO


def test_the_temporary_collections_path_is_removed(tmp_path):
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--collect-only",
         str(REPO / "tests" / "unit" / "test_roofline.py")],
        cwd=REPO, env=dict(os.environ, TMPDIR=str(scratch)), capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert sorted(os.listdir(scratch)) == []
    # The checkout it linked in is intact.
    assert (REPO / "tests" / "unit" / "conftest.py").is_file()
