"""The collection as a consumer gets it, on the lab, nothing of the checkout but its built tarball:
a fresh virtual environment with ansible-core alone, the tarball built from outside the checkout
and installed by a requirements.yml into an empty collections path, the collection's declared
Python needs installed with one pip command, then site and verify run from an empty directory
under a foreign ansible.cfg (forks 5, no pipelining, the minimal callback); ansible-navigator
--ee false gives the same verdicts, and a pip-installed `infertune` command runs the installed
collection.

The tests run in file order on the lab as they find it (its healthy hosts); the first one
converges it.
"""
import json
import os
import shutil
import subprocess
import sys

import pytest
import yaml

from helpers import BIN, ROOT, recap

pytestmark = pytest.mark.lab

INVENTORY = ROOT / "inventory" / "lab"
GALAXY = yaml.safe_load((ROOT / "galaxy.yml").read_text())
# The tested ansible-core (requirements-dev.txt's pin): the consumer brings their own.
ANSIBLE_CORE = next(line for line in (ROOT / "requirements-dev.txt").read_text().splitlines()
                    if line.startswith("ansible-core=="))
# A control node's own settings, none of ours: Ansible's default forks, no pipelining, the callback
# closest to how AWX keeps job events.
FOREIGN_CFG = """[defaults]
forks = 5
stdout_callback = ansible.builtin.minimal
collections_path = {collections}
retry_files_enabled = False

[ssh_connection]
pipelining = False
"""


def run(argv, cwd, env):
    cwd.mkdir(exist_ok=True)
    proc = subprocess.run([str(a) for a in argv], cwd=cwd, env=env, capture_output=True, text=True, check=False)
    return proc.returncode, proc.stdout + proc.stderr


@pytest.fixture(scope="module")
def consumer(lab, tmp_path_factory):
    """(collection dir, environment, host limit, venv bin): ansible-core alone in a fresh venv, the
    tarball built and installed from outside the checkout into an empty collections path, the
    collection's requirements.txt pip-installed in one command. The environment has no ANSIBLE_
    setting and a HOME of its own."""
    base = tmp_path_factory.mktemp("consumer")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANSIBLE_", "PYTHON", "VIRTUAL_ENV"))}
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    bin_ = venv / "bin"
    env.update(HOME=str(base / "home"), ANSIBLE_NOCOLOR="1", PATH=f"{bin_}{os.pathsep}{os.environ['PATH']}")
    rc, out = run([bin_ / "pip", "install", "-q", ANSIBLE_CORE], base, env)
    assert rc == 0, out[-4000:]
    # The README's commands, each from a directory of the consumer's.
    rc, out = run([bin_ / "ansible-galaxy", "collection", "build", ROOT, "--output-path", base / "dist"], base / "home", env)
    assert rc == 0, out[-4000:]
    tarball = base / "dist" / f"{GALAXY['namespace']}-{GALAXY['name']}-{GALAXY['version']}.tar.gz"
    project = base / "project"
    project.mkdir()
    # docs/requirements.yml, with the tarball (its commented alternative) instead of the git URL.
    (project / "requirements.yml").write_text(yaml.safe_dump({"collections": [{"name": str(tarball), "type": "file"}]}))
    collections = base / "collections"
    rc, out = run([bin_ / "ansible-galaxy", "collection", "install", "-r", "requirements.yml", "-p", collections],
                  project, env)
    assert rc == 0, out[-4000:]
    collection = collections / "ansible_collections" / GALAXY["namespace"] / GALAXY["name"]
    rc, out = run([bin_ / "python", "-m", "pip", "install", "-q", "-r", collection / "requirements.txt"], base / "home", env)
    assert rc == 0, out[-4000:]
    # The control node's needs, not the checkout's tooling.
    rc, out = run([bin_ / "python", "-m", "pip", "list", "--format", "json"], base / "home", env)
    installed = {d["name"].lower(): d["version"] for d in json.loads(out.split("\n", 1)[0] if out.startswith("[") else out)}
    assert {"pytest", "pytest-testinfra"} <= set(installed) and installed["cryptography"] == "50.0.2", installed
    assert not {"ansible", "ansible-lint", "ansible-navigator", "ansible-builder"} & set(installed), installed
    # Two hosts: the consumer's path (install, ansible.cfg, the reports' directory) is the same for
    # any number; a canary and a batch are the rollout's shape.
    return collection, env, ",".join(lab.healthy_hosts()[:2]), bin_


def minimal_changes(out):
    """Tasks the minimal callback reports changed (it prints no recap)."""
    return [line for line in out.splitlines() if " | CHANGED" in line]


def verdicts(directory):
    return {h: r["result"] for h, r in json.loads((directory / "reports" / "fleet.json").read_text())["hosts"].items()}


@pytest.fixture(scope="module")
def noop(consumer, tmp_path_factory):
    """ansible-playbook infertune.fleet.site from an empty directory with the foreign ansible.cfg,
    twice: the converge, then the run on the converged lab; (verdicts, output) of the second."""
    collection, env, limit, bin_ = consumer
    work = tmp_path_factory.mktemp("empty")
    (work / "ansible.cfg").write_text(FOREIGN_CFG.format(collections=collection.parents[2]))
    site = [bin_ / "ansible-playbook", "infertune.fleet.site", "-i", INVENTORY, "--limit", limit]
    rc, out = run(site, work, env)
    assert rc == 0, out[-6000:]
    # No callbacks_enabled names the report callback: the run says so and is correct without it.
    assert "infertune.fleet.infertune_report is not enabled" in " ".join(out.split())
    hosts = limit.split(",")
    assert verdicts(work) == {h: "pass" for h in hosts}, out[-4000:]
    assert sorted(p.name for p in work.iterdir()) == ["ansible.cfg", "reports"]
    rc, out = run(site, work, env)
    # The foreign ansible.cfg's callback printed it.
    assert rc == 0 and " | SUCCESS => " in out and minimal_changes(out) == [], out[-4000:]
    return verdicts(work), out


def test_the_consumers_control_node_converges_verifies_and_reports_in_the_current_directory(noop, consumer):
    assert set(noop[0].values()) == {"pass"}
    # The consumer's install pins cryptography below 51: no DSA warning in any command's output.
    assert "CryptographyDeprecationWarning" not in noop[1]


def test_the_verify_playbook_runs_there_too(consumer, noop, tmp_path):
    collection, env, limit, bin_ = consumer
    (tmp_path / "ansible.cfg").write_text(FOREIGN_CFG.format(collections=collection.parents[2]))
    rc, out = run([bin_ / "ansible-playbook", "infertune.fleet.verify", "-i", INVENTORY, "--limit", limit], tmp_path, env)
    assert rc == 0 and minimal_changes(out) == [], out[-4000:]
    assert verdicts(tmp_path) == noop[0]


def test_ansible_navigator_without_an_ee_gives_the_same_verdicts(consumer, noop, tmp_path):
    collection, env, limit, _ = consumer
    # The checkout's navigator (the consumer's venv has ansible-core alone), on the installed collection.
    env = dict(env, ANSIBLE_COLLECTIONS_PATH=str(collection.parents[2]), PATH=f"{BIN}{os.pathsep}{env['PATH']}")
    shutil.copy(ROOT / "ansible-navigator.yml", tmp_path)  # the project's settings, as a user copies them
    rc, out = run([BIN / "ansible-navigator", "run", "infertune.fleet.site", "--ee", "false", "--mode", "stdout",
                   "-i", INVENTORY, "--limit", limit], tmp_path, env)
    assert rc == 0, out[-6000:]
    assert verdicts(tmp_path) == noop[0] and all(r["changed"] == 0 for r in recap(out).values()), out[-4000:]
    assert list((tmp_path / "reports" / "navigator").glob("site-artifact-*.json"))


def test_a_pip_installed_infertune_command_runs_the_installed_collection(consumer, tmp_path):
    collection, env, limit, _ = consumer
    env = dict(env, ANSIBLE_COLLECTIONS_PATH=str(collection.parents[2]))
    # `pip install` of the installed collection's directory (a copy: the build writes beside it)
    # into a fresh venv; its dependencies from ours.
    source = tmp_path / "src"
    shutil.copytree(collection, source, ignore=shutil.ignore_patterns("__pycache__"))
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
