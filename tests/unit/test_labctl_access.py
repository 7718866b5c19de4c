"""How the lab is reached: checked host keys, root by default, the unprivileged user on request."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "lab"))
from infra import hosts, inventory, network, paths, podman, ssh, users  # noqa: E402

LAB = [hosts.Host(1, "seed-epyc-rtxpro6000"), hosts.Host(2, "xeon-h100")]


@pytest.fixture(autouse=True)
def default_subnet(tmp_path, monkeypatch):
    """Addresses from the first candidate subnet, whatever a running lab on this machine chose."""
    monkeypatch.setattr(network, "STATE", tmp_path / "no-network.json")


IMAGE = {"kernel_package": "linux-image-6.12.95+deb12-amd64", "kernel_release": "6.12.95+deb12-amd64"}


def test_known_hosts_holds_the_keys_read_inside_each_container(tmp_path, monkeypatch):
    monkeypatch.setattr(paths, "SSH_DIR", tmp_path)
    monkeypatch.setattr(paths, "KNOWN_HOSTS", tmp_path / "known_hosts")
    asked = []

    def fake_podman(*args, **_):
        asked.append(args[1])
        return "ssh-ed25519 AAAAC3Nz root@build\necdsa-sha2-nistp256 AAAAE2Vj root@build\n"

    monkeypatch.setattr(podman, "run", fake_podman)
    ssh.record_host_keys(LAB)
    assert sorted(asked) == ["infertune-lab-lab-gpu-01", "infertune-lab-lab-gpu-02"]
    assert (tmp_path / "known_hosts").read_text().splitlines() == [
        "10.77.213.11 ssh-ed25519 AAAAC3Nz", "10.77.213.11 ecdsa-sha2-nistp256 AAAAE2Vj",
        "10.77.213.12 ssh-ed25519 AAAAC3Nz", "10.77.213.12 ecdsa-sha2-nistp256 AAAAE2Vj"]
    assert " ".join(ssh.OPTIONS) == f"-o UserKnownHostsFile={paths.STATE / 'ssh/known_hosts'} -o StrictHostKeyChecking=yes"


def host_vars(sources, host="lab-gpu-01"):
    argv = [str(REPO / ".venv/bin/ansible-inventory"), "--host", host]
    for source in sources:
        argv += ["-i", str(source)]
    return json.loads(subprocess.run(argv, check=True, capture_output=True, text=True, cwd=REPO).stdout)


def test_lab_inventory_logs_in_as_root_and_the_overlay_as_the_sudo_user(tmp_path, monkeypatch):
    generated = tmp_path / "lab" / "hosts.yml"
    monkeypatch.setattr(paths, "INVENTORY", generated)
    inventory.write(LAB, {h.name: IMAGE for h in LAB})
    as_root = host_vars([generated.parent])
    assert as_root["ansible_user"] == "root" and "ansible_become" not in as_root
    assert "StrictHostKeyChecking=yes" in as_root["ansible_ssh_common_args"]
    as_user = host_vars([generated.parent, REPO / "inventory/lab-unprivileged.yml"])
    assert (as_user["ansible_user"], as_user["ansible_become"]) == (users.USER, True)
    assert as_user["ansible_ssh_common_args"] == as_root["ansible_ssh_common_args"]


def test_user_setup_script_parses_and_grants_sudo_without_password():
    subprocess.run(["sh", "-n", "-c", users.SETUP], check=True)
    assert f"echo '{users.USER} ALL=(ALL:ALL) NOPASSWD: ALL' >/etc/sudoers.d/{users.USER}" in users.SETUP
