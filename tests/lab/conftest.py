"""Lab tests run against the simulated fleet (root, podman); the session starts it if hosts don't answer."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
LABCTL = REPO / "lab" / "labctl"
INVENTORY = REPO / "inventory" / "lab"
BIN = Path(sys.executable).parent


def pytest_configure(config):
    config.addinivalue_line("markers", "lab: needs the simulated lab (lab/labctl up, as root)")


class Lab:
    """The running lab as the tests see it: its inventory, ad-hoc ansible and labctl."""

    def hosts(self):
        data = yaml.safe_load((INVENTORY / "hosts.yml").read_text())
        return data["all"]["children"]["gpu_nodes"]["hosts"]

    def faults(self, host):
        """Faults set on a host with `labctl fault` (other tests may set them)."""
        fault_dir = REPO / "lab" / ".state" / "hosts" / host / "faults"
        return sorted(p.name for p in fault_dir.iterdir()) if fault_dir.is_dir() else []

    def healthy_hosts(self):
        return sorted(h for h in self.hosts() if not self.faults(h))

    def ansible(self, pattern, module, args=None):
        """Run one ad-hoc module; return (rc, {host: result}) from the json callback."""
        argv = [str(BIN / "ansible"), "-i", str(INVENTORY), pattern, "-m", module]
        if args:
            argv += ["-a", args]
        env = dict(os.environ, ANSIBLE_LOAD_CALLBACK_PLUGINS="1", ANSIBLE_STDOUT_CALLBACK="ansible.posix.json")
        proc = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True)
        plays = json.loads(proc.stdout)["plays"]
        return proc.returncode, plays[0]["tasks"][0]["hosts"] if plays else {}

    def labctl(self, *args):
        return subprocess.run([str(LABCTL), *args], capture_output=True, text=True)


@pytest.fixture(scope="session")
def lab():
    if os.geteuid() != 0:
        pytest.skip("the lab needs root (rootful podman)")
    lab = Lab()
    if not (INVENTORY / "hosts.yml").exists() or lab.ansible("gpu_nodes", "ping")[0] != 0:
        subprocess.run([str(LABCTL), "up"], check=True)
    return lab
