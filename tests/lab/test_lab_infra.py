"""The lab's infrastructure: hosts reachable through the generated inventory, reboots that really
boot again, hosts that can be taken away and brought back, and a `down` that leaves nothing behind."""
import json
import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.lab

STATE = REPO / "lab" / ".state" / "podman"
PODMAN_ENV = dict(os.environ, CONTAINERS_CONF=str(STATE / "containers.conf"),
                  CONTAINERS_STORAGE_CONF=str(STATE / "storage.conf"))


def podman(*args):
    return subprocess.run(["podman", *args], env=PODMAN_ENV, capture_output=True, text=True)


def boot_id(lab, host):
    rc, results = lab.ansible(host, "ansible.builtin.command", "cat /proc/sys/kernel/random/boot_id")
    assert rc == 0, results
    return results[host]["stdout"].strip()


def test_every_booting_host_answers_ansible_ping(lab):
    rc, results = lab.ansible("gpu_nodes", "ansible.builtin.ping")
    booting = sorted(h for h in lab.hosts() if "no-boot" not in lab.faults(h))
    assert booting, "no lab host boots"
    assert sorted(h for h, r in results.items() if r.get("ping") == "pong") == booting
    assert rc == (0 if booting == sorted(lab.hosts()) else 4)  # 4: some host unreachable


def test_inventory_carries_the_lab_upgrade_target(lab):
    rc, results = lab.ansible("gpu_nodes[0]", "ansible.builtin.debug", "var=kernel_package")
    assert rc == 0
    (result,) = results.values()
    assert result["kernel_package"].startswith("linux-image-")


def test_reboot_returns_with_a_new_boot_id(lab):
    host = lab.healthy_hosts()[0]
    before = boot_id(lab, host)
    rc, results = lab.ansible(host, "ansible.builtin.reboot")
    assert rc == 0, results
    assert results[host]["rebooted"] is True
    assert boot_id(lab, host) != before


def test_stopped_host_is_unreachable_until_started(lab):
    host = lab.healthy_hosts()[-1]
    assert lab.labctl("stop", host).returncode == 0
    try:
        rc, results = lab.ansible(host, "ansible.builtin.ping")
        assert rc != 0 and results[host].get("unreachable") is True
    finally:
        assert lab.labctl("start", host).returncode == 0
    assert lab.ansible(host, "ansible.builtin.ping")[0] == 0


def test_down_leaves_no_containers_network_or_firewall_rules(lab):
    try:
        down = lab.labctl("down")
        assert down.returncode == 0, down.stderr
        assert podman("ps", "-a", "-q", "--filter", "label=infertune-lab.host").stdout.strip() == ""
        assert podman("network", "exists", "infertune-lab").returncode != 0
        prefix = json.loads((REPO / "lab" / ".state" / "network.json").read_text())["prefix"]
        rules = subprocess.run(["iptables-save"], capture_output=True, text=True).stdout
        assert prefix + "." not in rules
        image = json.loads((REPO / "lab" / ".state" / "image.json").read_text())["tag"]
        assert podman("image", "exists", image).returncode == 0, "down must keep the image cache"
    finally:
        # Later lab tests in this session expect the lab: bring it back in its last shape.
        subprocess.run([str(REPO / "lab" / "labctl"), "up"], check=True)
