"""The controller-side plugins import their own collection's `infertune` package, even with
another copy first on the Python path (a pip install of another release, a checkout's
editable install): the installed collection's roles, catalog and tests/verify belong to it.
They import it by its collection name, as Ansible's collection loader resolves it."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PLUGINS = ["callback.infertune_report", "action.infertune_report_start", "action.infertune_verify",
           "action.infertune_validate", "action.infertune_rollout", "action.infertune_drift"]
# As ansible-playbook loads a collection's plugin: its collection finder on the collections path.
LOAD = """import importlib, sys
from ansible.utils.collection_loader._collection_finder import _AnsibleCollectionFinder
_AnsibleCollectionFinder(paths=[sys.argv[1]])._install()
importlib.import_module("ansible_collections.infertune.fleet.plugins." + sys.argv[2])
print(sys.modules["ansible_collections.infertune.fleet.infertune"].__file__)
print(getattr(sys.modules.get("infertune"), "__file__", "-"))
"""


@pytest.mark.parametrize("plugin", PLUGINS)
def test_a_plugin_imports_the_package_of_its_collection(tmp_path, plugin):
    decoy = tmp_path / "decoy"
    shutil.copytree(REPO / "infertune", decoy / "infertune", ignore=shutil.ignore_patterns("__pycache__"))
    collections = tmp_path / "collections"
    (collections / "ansible_collections" / "infertune").mkdir(parents=True)
    (collections / "ansible_collections" / "infertune" / "fleet").symlink_to(REPO)
    proc = subprocess.run([sys.executable, "-c", LOAD, str(collections), plugin], cwd=tmp_path,
                          env=dict(os.environ, PYTHONPATH=str(decoy)), capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    own, top = proc.stdout.split()
    assert Path(own).resolve().parent == REPO / "infertune"
    # The copy first on the path is never read.
    assert not top.startswith(str(decoy))
