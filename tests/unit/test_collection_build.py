"""The collection's tarball (ansible-galaxy collection build) holds what runs without the checkout
and nothing of the lab, and the execution environment's build context (ansible-builder create)
installs the collection from that tarball, never from a Galaxy server."""
import configparser
import json
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
GALAXY = yaml.safe_load((REPO / "galaxy.yml").read_text())
TARBALL = f"{GALAXY['namespace']}-{GALAXY['name']}-{GALAXY['version']}.tar.gz"
# Everything the collection runs: the controller package, the verification, roles, playbooks, plugins.
RUNTIME = ("infertune", "tests/verify", "roles", "playbooks", "plugins", "meta")
NOT_SHIPPED = ("lab/", "bench/", "reports/", ".venv/", "tests/lab/", "tests/unit/", "build/", "collections/", ".git/")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The tarball, built where execution-environment.yml looks for it, beside a copy of that file."""
    tree = tmp_path_factory.mktemp("ee")
    shutil.copy(REPO / "execution-environment.yml", tree)
    (tree / "docs").mkdir()
    shutil.copy(REPO / "docs" / "collection-ansible.cfg", tree / "docs")
    subprocess.run([str(BIN / "ansible-galaxy"), "collection", "build", "--output-path", str(tree / "build" / "collection")],
                   cwd=REPO, check=True, capture_output=True)
    return tree


@pytest.fixture(scope="module")
def members(built):
    with tarfile.open(built / "build" / "collection" / TARBALL) as tar:
        return {m.name for m in tar.getmembers() if m.isfile()}


def test_the_tarball_holds_what_runs_without_the_checkout(members):
    wanted = {str(p.relative_to(REPO)) for top in RUNTIME for p in (REPO / top).rglob("*")
              if p.is_file() and "__pycache__" not in p.parts}
    assert wanted - members == set()
    assert {"pytest.ini", "docs/collection-ansible.cfg", "MANIFEST.json", "LICENSE"} <= members
    # The control node's Python needs per use, where a collection user looks; not the checkout's tooling.
    assert {"requirements.txt", "requirements-benchmark.txt"} <= members and "requirements-dev.txt" not in members


def test_the_tarball_holds_nothing_of_the_lab_the_benchmarks_or_the_checkouts_config(members):
    assert not [m for m in members if m.startswith(NOT_SHIPPED) or "__pycache__" in m or m.endswith(".pyc")]
    # The checkout's ansible.cfg names the lab's inventory; testinfra would read it in the collection.
    assert "ansible.cfg" not in members


@pytest.fixture(scope="module")
def context(built):
    subprocess.run([str(BIN / "ansible-builder"), "create", "--file", str(built / "execution-environment.yml"),
                    "--context", str(built / "context")], check=True, capture_output=True)
    return built / "context"


def test_the_execution_environment_installs_the_built_tarball_and_downloads_no_collection(built, context):
    requirements = yaml.safe_load((context / "_build" / "requirements.yml").read_text())
    assert [c["type"] for c in requirements["collections"]] == ["file"]
    shipped = context / "_build" / requirements["collections"][0]["name"]
    assert shipped.name == TARBALL and shipped.read_bytes() == (built / "build" / "collection" / TARBALL).read_bytes()
    with tarfile.open(shipped) as tar:
        info = json.load(tar.extractfile("MANIFEST.json"))["collection_info"]
    assert (info["namespace"], info["name"], info["version"]) == (GALAXY["namespace"], GALAXY["name"], GALAXY["version"])
    containerfile = (context / "Containerfile").read_text()
    installs = [line for line in containerfile.splitlines() if "ansible-galaxy collection" in line]
    assert len(installs) == 1 and "install" in installs[0] and "-r requirements.yml" in installs[0]
    assert "--server" not in containerfile and "download" not in containerfile
    # Its Python comes compiled: the image's user cannot write bytecode into the collection.
    assert "RUN $PYCMD -m compileall -q /usr/share/ansible/collections/ansible_collections/infertune/fleet" in containerfile


def pins(lines):
    return dict(line.split("==") for line in lines if "==" in line and not line.startswith("#"))


def test_the_execution_environment_pins_what_the_control_node_pins():
    ee = yaml.safe_load((REPO / "execution-environment.yml").read_text())["dependencies"]
    control_node = pins(" ".join((REPO / name).read_text() for name in (
        "requirements-dev.txt", "requirements-benchmark.txt", "requirements.txt")).split())
    ee_pins = pins([ee["ansible_core"]["package_pip"], ee["ansible_runner"]["package_pip"], *ee["python"]])
    assert ee_pins == {name: control_node[name] for name in ee_pins}
    # Every Python package the collection asks of an execution environment is pinned here
    # (PyYAML comes with ansible-core).
    needed = [line for line in (REPO / "meta" / "ee-requirements.txt").read_text().splitlines()
              if line and not line.startswith("#")]
    assert set(needed) - set(ee_pins) == {"PyYAML"}


def test_collection_users_get_the_checkouts_settings_less_the_labs():
    def read(path):
        parser = configparser.RawConfigParser()
        parser.read(path)
        return {(section, key): value for section in parser.sections() for key, value in parser.items(section)}

    checkout, collection = read(REPO / "ansible.cfg"), read(REPO / "docs" / "collection-ansible.cfg")
    assert collection == {key: checkout[key] for key in collection}
    assert ("defaults", "callbacks_enabled") in collection and ("ssh_connection", "pipelining") in collection
