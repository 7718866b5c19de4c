"""python -m infertune.verify hands tests/verify the run's own connection variables, so
testinfra does not start ansible-inventory (about a second per verification); a host with
a password in its variables leaves it to ansible-inventory, so no secret lands in a file."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def spy(tmp_path):
    """An ansible-inventory first on PATH that records its call and lists one local host."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    marker = tmp_path / "ansible-inventory-called"
    listing = {"_meta": {"hostvars": {"gpu-x": {"ansible_connection": "local"}}}, "all": {"hosts": ["gpu-x"]}}
    script = bin_dir / "ansible-inventory"
    script.write_text(f"#!/bin/sh\ntouch {marker}\necho '{json.dumps(listing)}'\n")
    script.chmod(0o755)
    return bin_dir, marker


def verify(tmp_path, bin_dir, connection):
    run = {"gpu-x": {"verify": True, "expected": {"sysctl_settings": [{"name": "kernel.numa_balancing", "value": "0"}]}, "results": None, "check_mode": False,
                     "address": "127.0.0.1", "connection": connection}}
    env = dict(os.environ, PATH=f"{bin_dir}:{Path(sys.executable).parent}:{os.environ['PATH']}")
    proc = subprocess.run([sys.executable, "-m", "infertune.verify", "--dir", str(tmp_path / "reports"),
                           "--tests", "sysctl"], input=json.dumps(run), cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return (tmp_path / "reports" / "verify" / "fleet.xml").read_text()


def test_the_run_s_connection_variables_replace_ansible_inventory(tmp_path, spy):
    bin_dir, marker = spy
    junit = verify(tmp_path, bin_dir, {"ansible_connection": "local"})
    assert "gpu-x" in junit and not marker.exists()
    listed = json.loads((tmp_path / "reports" / "verify" / "inventory.json").read_text())
    assert listed["_meta"]["hostvars"] == {"gpu-x": {"ansible_connection": "local"}}


def test_without_them_testinfra_asks_ansible_inventory(tmp_path, spy):
    bin_dir, marker = spy
    junit = verify(tmp_path, bin_dir, None)
    assert "gpu-x" in junit and marker.exists()
    assert not (tmp_path / "reports" / "verify" / "inventory.json").exists()
