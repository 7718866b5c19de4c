"""An inventory without a host in gpu_nodes fails every playbook with the reason (it exited 0 with
Ansible's pattern warning alone, having planned, verified and reported nothing), and
ansible-navigator names each playbook's artifact after the playbook (site, verify and drift were
all infertune.fleet-artifact-*.json): its first play is its own."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from fakehost import REPO

BIN = Path(sys.executable).parent
# Every playbook the collection ships: a new one is checked without being listed here.
PLAYBOOKS = sorted(p.stem for p in (REPO / "playbooks").glob("*.yml"))
INVENTORIES = {"no group": {"all": {"hosts": {"gpu-01": {"ansible_connection": "local"}}}},
               "empty group": {"all": {"children": {"gpu_nodes": {"hosts": {}}}}}}


def env(tmp_path):
    values = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_") or k == "ANSIBLE_COLLECTIONS_PATH"}
    return dict(values, ANSIBLE_NOCOLOR="1", HOME=str(tmp_path), PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}")


@pytest.mark.parametrize("inventory", sorted(INVENTORIES))
@pytest.mark.parametrize("playbook", PLAYBOOKS)
def test_a_playbook_on_an_inventory_without_gpu_nodes_fails_with_the_reason(tmp_path, playbook, inventory):
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump(INVENTORIES[inventory]))
    proc = subprocess.run([str(BIN / "ansible-playbook"), f"infertune.fleet.{playbook}", "-i", "hosts.yml"],
                          cwd=tmp_path, env=env(tmp_path), capture_output=True, text=True, timeout=120)
    out = " ".join((proc.stdout + proc.stderr).split())
    assert proc.returncode != 0, out
    assert f"the inventory ({tmp_path / 'hosts.yml'}) has no host in the group gpu_nodes" in out, out


@pytest.mark.parametrize("playbook", ["site", "verify", "drift"])
def test_ansible_navigator_names_the_artifact_after_the_playbook(tmp_path, playbook):
    shutil.copy(REPO / "ansible-navigator.yml", tmp_path)
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump(INVENTORIES["no group"]))
    subprocess.run([str(BIN / "ansible-navigator"), "run", f"infertune.fleet.{playbook}", "--ee", "false",
                    "--mode", "stdout", "-i", "hosts.yml"], cwd=tmp_path, env=env(tmp_path), capture_output=True,
                   text=True, timeout=120)
    artifacts = [p.name for p in (tmp_path / "reports" / "navigator").glob("*-artifact-*.json")]
    assert len(artifacts) == 1 and artifacts[0].startswith(f"{playbook}-artifact-"), artifacts
