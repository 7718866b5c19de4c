"""make ee-context checks what ansible-builder does not: the build context holds the tarball
galaxy.yml builds (ansible-builder says "Complete!" and exits 0 when a file execution-environment.yml
names is missing, such as the tarball of another version)."""
import subprocess

import yaml

from cleanclone import clean_clone
from fakehost import REPO

VERSION = yaml.safe_load((REPO / "galaxy.yml").read_text())["version"]
def test_make_ee_context_fails_when_the_context_lacks_galaxys_tarball(tmp_path):
    """In a clean clone, with this checkout's tools."""
    clone = clean_clone(tmp_path / "clone")
    venv = REPO / ".venv"
    make = ["make", "-o", "setup", f"VENV={venv}", "ee-context"]
    done = subprocess.run(make, cwd=clone, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    ee = clone / "execution-environment.yml"
    ee.write_text(ee.read_text().replace(f"infertune-fleet-{VERSION}", "infertune-fleet-0.0.1"))
    done = subprocess.run(make, cwd=clone, capture_output=True, text=True)
    assert done.returncode != 0 and f"build/ee lacks the collection's tarball infertune-fleet-{VERSION}.tar.gz" in (
        done.stderr), done.stdout + done.stderr
