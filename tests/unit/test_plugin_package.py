"""The controller-side plugins import their own collection's `infertune` package, even with
another copy first on the Python path (a pip install of another release, a checkout's
editable install): the installed collection's roles, catalog and tests/verify belong to it."""
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PLUGINS = ["callback/infertune_report.py", "action/infertune_report_start.py", "action/infertune_verify.py",
           "action/infertune_validate.py"]
LOAD = """import importlib.util, sys
spec = importlib.util.spec_from_file_location("plugin_under_test", sys.argv[1])
spec.loader.exec_module(importlib.util.module_from_spec(spec))
print(sys.modules["infertune"].__file__)
"""


@pytest.mark.parametrize("plugin", PLUGINS)
def test_a_plugin_imports_the_package_beside_it(tmp_path, plugin):
    decoy = tmp_path / "decoy"
    shutil.copytree(REPO / "infertune", decoy / "infertune", ignore=shutil.ignore_patterns("__pycache__"))
    proc = subprocess.run([sys.executable, "-c", LOAD, str(REPO / "plugins" / plugin)], cwd=tmp_path,
                          env={"PYTHONPATH": str(decoy)}, capture_output=True, text=True, check=True)
    assert Path(proc.stdout.strip()).parent == REPO / "infertune"
