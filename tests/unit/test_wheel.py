"""The controller package as a wheel, installed alone into a Python without matplotlib and with no
collection on Ansible's collections path: every entry point runs, or says in one line what it
needs (the collection's files, or the pip command of the extra), and exits non-zero."""
import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import barepython
from fakehost import REPO
from tests.checkpoint import write_checkpoint

BIN = Path(sys.executable).parent
PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]


@pytest.fixture(scope="module")
def wheel_python(tmp_path_factory):
    base = tmp_path_factory.mktemp("wheel")
    subprocess.run([str(BIN / "pip"), "wheel", "-q", "--no-deps", "-w", str(base / "dist"), str(REPO)], check=True,
                   capture_output=True)
    (wheel,) = (base / "dist").glob("infertune-*.whl")
    python = barepython.python_without(base / "venv", "matplotlib", "mpl_toolkits")
    subprocess.run([str(BIN / "pip"), "--python", str(python), "install", "-q", "--no-deps", str(wheel)], check=True,
                   capture_output=True)
    (base / "home").mkdir()
    (base / "collections").mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANSIBLE_", "PYTHON"))}
    env.update(HOME=str(base / "home"), ANSIBLE_COLLECTIONS_PATH=str(base / "collections"))
    return python, env, base


def run(wheel_python, *argv, stdin=""):
    python, env, base = wheel_python
    proc = subprocess.run([str(python), *argv], cwd=base, env=env, input=stdin, capture_output=True, text=True)
    return proc.returncode, proc.stdout, proc.stderr


def test_the_package_comes_from_the_wheel_with_the_host_side_readers(wheel_python):
    rc, out, err = run(wheel_python, "-c", "import infertune, infertune_node.safetensors as s; print(infertune.__file__,"
                                           " s.__file__)")
    assert rc == 0 and all("site-packages" in path and str(REPO) not in path for path in out.split()), out + err


def test_the_roofline_runs_from_the_wheel(wheel_python, tmp_path):
    model = write_checkpoint(tmp_path)
    rc, out, err = run(wheel_python, "-m", "infertune.roofline", str(model), "--gpu", "h200", "--tp", "2", "--json")
    assert rc == 0, err
    assert json.loads(out)["floor_ms_per_token"] > 0


@pytest.mark.parametrize("module", ["roofline", "bench_client", "interconnect", "control_node", "plot", "backend_ab",
                                    "verify", "report", "docs_knobs", "docs_vars", "registry", "role_defaults"])
def test_every_entry_point_answers_help(wheel_python, module):
    rc, out, err = run(wheel_python, "-m", f"infertune.{module}", "--help")
    assert rc == 0 and out.startswith("usage:") and err == "", err


@pytest.mark.parametrize("argv, needs", [
    (["-m", "infertune.plot", "a.json", "--out", "a.png"], "infertune[plot]"),
    (["-m", "infertune.backend_ab", "results"], "infertune[plot]"),
    (["-m", "infertune.verify", "--dir", "reports"], "needs the collection infertune.fleet"),
    (["-m", "infertune.report", "--dir", "reports"], "needs the collection infertune.fleet"),
    (["-m", "infertune.docs_knobs", "--check"], "needs the collection infertune.fleet"),
    (["-m", "infertune.docs_vars", "--check"], "needs the collection infertune.fleet"),
    (["-m", "infertune.registry", "--check"], "needs the collection infertune.fleet"),
    (["-m", "infertune.role_defaults", "--check"], "needs the collection infertune.fleet"),
    (["-m", "infertune", "verify", "-i", "hosts"], "nor a collection infertune.fleet"),
], ids=lambda v: v[1] if isinstance(v, list) else None)
def test_an_entry_point_that_cannot_run_says_what_it_needs_in_one_line(wheel_python, argv, needs):
    rc, out, err = run(wheel_python, *argv, stdin="{}")
    assert rc != 0 and out == "" and len(err.strip().splitlines()) == 1 and needs in err, err


def test_the_extras_declare_what_the_use_needs():
    from infertune import needs

    assert set(PROJECT["optional-dependencies"]) == {extra.partition("[")[2].rstrip("]") for extra in needs.EXTRAS.values()
                                                     if "[" in extra}
    declared = {spec.split(">=")[0]: spec.partition(">=")[2] for specs in [PROJECT["dependencies"],
                *PROJECT["optional-dependencies"].values()] for spec in specs}
    for use, wanted in needs.NEEDS.items():
        for distribution, _module, oldest in wanted:
            assert declared[distribution] == oldest, (use, distribution)
