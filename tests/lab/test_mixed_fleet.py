"""One fleet of three OSes: Debian 12 (bookworm), Debian 13 (trixie) and an Ubuntu-flavoured host
(trixie's userland with Ubuntu's os-release, cloud-image GRUB file and static nvidia-persistenced
unit started with --no-persistence-mode; lab/README.md "Hosts by OS"). The rollout converges all
three, a second run changes nothing, and the Ubuntu host has persistence mode on after a reboot
and its kernel metapackage held.
sglang's package files are left out (the lab's wheels are bookworm's Python 3.11): --skip-tags
sglang, and playbooks/rollout.yml without site.yml's verification, which expects sglang.service."""
import json

import pytest

from helpers import ROOT, labctl, on_host, playbook, recap

pytestmark = pytest.mark.lab

HOSTS = {"lab-gpu-01": "small-epyc-rtxpro6000", "lab-gpu-02": "small-epyc-rtxpro6000-trixie",
         "lab-gpu-03": "small-epyc-rtxpro6000-ubuntu"}
OS = {"lab-gpu-01": ("debian", "bookworm"), "lab-gpu-02": ("debian", "trixie"), "lab-gpu-03": ("ubuntu", "noble")}
UBUNTU = "lab-gpu-03"
PERSISTENCE = "nvidia-smi --query-gpu=persistence_mode --format=csv,noheader"
UNIT = "systemctl show nvidia-persistenced.service -p UnitFileState -p ActiveState -p ExecStart"


def unit():
    """(UnitFileState, ActiveState, ExecStart) of the Ubuntu host's persistenced."""
    state = dict(line.split("=", 1) for line in on_host(UBUNTU, UNIT).splitlines() if "=" in line)
    return state["UnitFileState"], state["ActiveState"], state["ExecStart"]


@pytest.fixture(scope="module")
def mixed(lab, tmp_path_factory):
    """The mixed lab for this module; afterwards the lab's earlier shape again (hosts whose profile
    changed recreated from the image, sglang's files with them)."""
    shape = json.loads((ROOT / "lab/.state/lab.json").read_text())
    labctl("up", "--fresh", "--hosts", "3", "--profile", "small-epyc-rtxpro6000", "--profile-map",
           ",".join(f"{h}={p}" for h, p in HOSTS.items() if p != "small-epyc-rtxpro6000"))
    expectations = tmp_path_factory.mktemp("mixed") / "small.yml"
    expectations.write_text("gpu_nodes:\n  vars:\n    gpu_gate_expected_count: 1\n    sglang_tp: 1\n")
    yield ("playbooks/rollout.yml", "-i", "inventory/lab", "-i", str(expectations), "--skip-tags", "sglang",
           "--limit", ",".join(HOSTS))
    labctl("up", "--hosts", str(shape["count"]), "--profile", shape["profile"], "--profile-map",
           ",".join(f"{h}={p}" for h, p in shape["profile_map"].items()))


def test_each_host_runs_its_os(mixed):
    for host, (ident, codename) in OS.items():
        release = dict(line.split("=", 1) for line in on_host(host, "cat /etc/os-release").splitlines() if "=" in line)
        assert (release["ID"], release["VERSION_CODENAME"]) == (ident, codename), (host, release)


def test_ubuntus_daemon_runs_without_persistence_mode_before_the_tuning(mixed):
    enabled, active, exec_start = unit()
    assert (enabled, active) == ("static", "active") and "--no-persistence-mode" in exec_start
    assert on_host(UBUNTU, PERSISTENCE).split() == ["Disabled"]


def test_the_mixed_fleet_converges_then_stays_put(mixed):
    rc, out = playbook(*mixed)
    assert rc == 0, out[-8000:]
    assert all(recap(out)[h]["failed"] == 0 for h in HOSTS), out[-4000:]
    rc, out = playbook(*mixed)
    assert rc == 0 and all(recap(out)[h]["changed"] == 0 for h in HOSTS), out[-6000:]


def test_ubuntu_has_persistence_mode_after_a_reboot(mixed, lab):
    rc, result = lab.ansible(UBUNTU, "ansible.builtin.reboot")
    assert rc == 0, result
    enabled, active, exec_start = unit()
    assert (enabled, active) == ("enabled", "active") and "--no-persistence-mode" not in exec_start
    assert on_host(UBUNTU, PERSISTENCE).split() == ["Enabled"]
    # The kernel metapackage stays held: apt upgrade cannot move the host to another kernel.
    assert "linux-image-amd64" in on_host(UBUNTU, "apt-mark showhold").split()
    # The cloud image's consoles stay on the command line beside the tuning's parameters.
    cmdline = on_host(UBUNTU, "cat /proc/cmdline").split()
    assert {"console=tty1", "console=ttyS0", "processor.max_cstate=1"} <= set(cmdline), cmdline
