"""The collection without the checkout, on the lab: the built tarball installed into an empty
collections path, run from empty directories with no ansible.cfg and no ANSIBLE_ setting but
that path, by ansible-playbook (converge, verify, reports under ./reports), by
ansible-navigator --ee false (the same recap and verdicts) and by a pip-installed `infertune`
command (the installed collection's verify playbook, by FQCN).

The tests run in file order on the lab as they find it (its healthy hosts); the first one
converges it.
"""
import json
import os
import shutil
import subprocess
import sys

import pytest

from helpers import BIN, ROOT, recap

pytestmark = pytest.mark.lab

INVENTORY = ROOT / "inventory" / "lab"


@pytest.fixture(scope="module")
def installed(lab, tmp_path_factory):
    """(collections path, environment, host limit): the tarball installed there; an environment
    with no ansible.cfg to find and no ANSIBLE_ setting but that path."""
    base = tmp_path_factory.mktemp("collection")
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env.update(ANSIBLE_COLLECTIONS_PATH=str(base / "collections"), ANSIBLE_NOCOLOR="1", HOME=str(base),
               PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}")
    galaxy = [str(BIN / "ansible-galaxy"), "collection"]
    subprocess.run([*galaxy, "build", "--output-path", str(base / "dist")], cwd=ROOT, check=True, capture_output=True)
    (tarball,) = (base / "dist").glob("*.tar.gz")
    subprocess.run([*galaxy, "install", str(tarball), "-p", str(base / "collections")], cwd=base, env=env, check=True,
                   capture_output=True)
    return base / "collections" / "ansible_collections" / "infertune" / "fleet", env, ",".join(lab.healthy_hosts())


def run(argv, cwd, env):
    cwd.mkdir(exist_ok=True)
    proc = subprocess.run([str(a) for a in argv], cwd=cwd, env=env, capture_output=True, text=True, check=False)
    return proc.returncode, proc.stdout + proc.stderr


def verdicts(directory):
    return {h: r["result"] for h, r in json.loads((directory / "reports" / "fleet.json").read_text())["hosts"].items()}


@pytest.fixture(scope="module")
def noop(installed, tmp_path_factory):
    """ansible-playbook infertune.fleet.site from an empty directory, twice: the converge, then
    the run on the converged lab; (recap, verdicts) of the second."""
    _, env, limit = installed
    work = tmp_path_factory.mktemp("empty")
    site = [BIN / "ansible-playbook", "infertune.fleet.site", "-i", INVENTORY, "--limit", limit]
    rc, out = run(site, work, env)
    assert rc == 0, out[-6000:]
    hosts = limit.split(",")
    assert all(r["failed"] == r["unreachable"] == 0 for r in recap(out).values()) and sorted(recap(out)) == hosts
    # No ansible.cfg enables the report callback: the run says so and is correct without it.
    assert "infertune.fleet.infertune_report is not enabled" in " ".join(out.split())
    assert verdicts(work) == {h: "pass" for h in hosts}, out[-4000:]
    assert sorted(p.name for p in work.iterdir()) == ["reports"]
    rc, out = run(site, work, env)
    assert rc == 0 and all(r["changed"] == 0 for r in recap(out).values()), out[-4000:]
    return recap(out), verdicts(work)


def test_the_installed_collection_converges_verifies_and_reports_in_the_current_directory(noop):
    assert set(noop[1].values()) == {"pass"}


def test_ansible_navigator_without_an_ee_gives_the_same_recap_and_verdicts(installed, noop, tmp_path):
    _, env, limit = installed
    shutil.copy(ROOT / "ansible-navigator.yml", tmp_path)  # the project's settings, as a user copies them
    rc, out = run([BIN / "ansible-navigator", "run", "infertune.fleet.site", "--ee", "false", "--mode", "stdout",
                   "-i", INVENTORY, "--limit", limit], tmp_path, env)
    assert rc == 0, out[-6000:]
    assert (recap(out), verdicts(tmp_path)) == noop
    assert list((tmp_path / "reports" / "navigator").glob("site-artifact-*.json"))


def test_a_pip_installed_infertune_command_runs_the_installed_collection(installed, tmp_path):
    collection, env, limit = installed
    # `pip install .` of the package alone into a fresh venv; its dependencies from ours.
    source = tmp_path / "src"
    shutil.copytree(ROOT / "infertune", source / "infertune", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", source)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    (site_packages,) = venv.glob("lib/python*/site-packages")
    (ours,) = BIN.parent.glob("lib/python*/site-packages")
    (site_packages / "dependencies.pth").write_text(f"{ours}\n")
    subprocess.run([str(BIN / "pip"), "--python", str(venv / "bin" / "python"), "install", "-q", "--no-deps", str(source)],
                   check=True, capture_output=True)
    rc, out = run([venv / "bin" / "python", "-c", "import infertune; print(infertune.__file__, infertune.COLLECTION)"],
                  tmp_path / "empty", env)
    assert out.split() == [str(site_packages / "infertune" / "__init__.py"), str(collection)], out

    rc, out = run([venv / "bin" / "infertune", "verify", "-i", INVENTORY, "--limit", limit, "--json", "summary.json"],
                  tmp_path / "empty", env)
    assert rc == 0, out[-4000:]
    summary = json.loads((tmp_path / "empty" / "summary.json").read_text())
    assert (summary["playbook"], summary["totals"]["failed"]) == ("infertune.fleet.verify", 0)
    assert set(verdicts(tmp_path / "empty").values()) == {"pass"}
