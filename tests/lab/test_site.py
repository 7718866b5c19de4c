"""site.yml on the 8-host lab: check mode, bad input and fabric faults stopped before any
change, converge (MaxReadReq and ACS redirect on the GPU paths and nothing else), P2P,
idempotence, reboot.

The tests run in file order on one fresh lab: each step starts from the state the
previous one left, like an engineer would run them.
"""
import json

import pytest

from helpers import fresh_lab, labctl, on_host, playbook, recap, state_digest
from pcispace import REDIRECT, acs_control, acs_offset, gpu_ports, is_gpu, pci

pytestmark = pytest.mark.lab

GPU_BDF_CMD = ("for d in /sys/bus/pci/devices/*; do echo \"$(basename $d) $(cat $d/vendor) $(cat $d/class)\"; done")


PORT_X4 = "0000:10:01.1"  # root port above GPU 0's switch in the seed profile
NVME = "0000:01:00.0"


@pytest.fixture(scope="module")
def hosts(lab):
    fresh_lab()
    return sorted(lab.hosts())


@pytest.fixture(scope="module")
def power_on(hosts):
    """Config space of the first host as firmware left it."""
    return pci(hosts[0])


def reboot(host):
    playbook("playbooks/reboot.yml", "--limit", host, check=True)


def devctl(host):
    """Device Control (PCIe cap + 8) of every PCI function: {bdf: (vendor, class, value)}."""
    out = on_host(host, GPU_BDF_CMD + "; for d in /sys/bus/pci/devices/*; do"
                        " echo \"$(basename $d) $(setpci -s $(basename $d) CAP_EXP+8.w)\"; done")
    info, ctl = {}, {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3:
            info[parts[0]] = (parts[1], parts[2])
        elif len(parts) == 2:
            ctl[parts[0]] = int(parts[1], 16)
    return {bdf: (*info[bdf], ctl[bdf]) for bdf in ctl}


def test_check_mode_reports_changes_and_alters_nothing(hosts, power_on):
    before = {h: state_digest(h) for h in hosts}
    rc, out = playbook("site.yml", "--check", "--diff")
    assert rc == 0, out[-6000:]
    assert all(r["changed"] > 0 for r in recap(out).values()), out[-3000:]
    assert "MaxReadReq" in out or "max_read_request" in out
    assert "pcie_acs" in out, out[-4000:]
    for h in hosts:
        assert state_digest(h) == before[h], f"{h}: --check changed files"
    assert pci(hosts[0]) == power_on


@pytest.mark.parametrize("extra, variable", [
    ("pcie_max_read_request=3000", "pcie_max_read_request"),
    ("cpu_power_governor=turbo", "cpu_power_governor"),
    ("cpu_power_epp=max_speed", "cpu_power_epp"),
    ("kernel_reboot_strategy=sometimes", "kernel_reboot_strategy"),
    # The rollout shape: a canary of none, or one batch draining and rebooting every host at once.
    ("rollout_canary_count=0", "rollout_canary_count"),
    ("rollout_canary_count=-1", "rollout_canary_count"),
    ("rollout_canary_count=abc", "rollout_canary_count"),
    ('{"rollout_batches": ["100%"]}', "rollout_allow_single_batch"),
])
def test_bad_input_is_refused_before_any_change(hosts, extra, variable):
    host = hosts[0]
    before = state_digest(host)
    rc, out = playbook("site.yml", "-e", extra)
    assert rc != 0
    assert variable in out, out[-3000:]
    assert all(r["changed"] == 0 for r in recap(out).values()), out[-3000:]
    assert state_digest(host) == before


def test_a_port_trained_at_x4_fails_the_gate_before_any_change(hosts):
    victim = hosts[-1]
    labctl("fault", victim, "link-degraded", "0")
    try:
        reboot(victim)
        before = state_digest(victim)
        rc, out = playbook("site.yml", "--limit", victim)
        assert rc != 0
        assert f"{victim}: PCIe fabric (role pcie): width: link {PORT_X4} -> " in out, out[-4000:]
        assert f"{PORT_X4} is configured for x4" in out and "BIOS" in out, out[-4000:]
        assert "Drain sglang" not in out
        assert state_digest(victim) == before
    finally:
        labctl("fault", victim, "link-degraded", "--clear")
    reboot(victim)


def test_a_host_with_a_gpu_bound_to_vfio_pci_is_refused_for_acs(hosts):
    victim = hosts[-2]
    # Only a device below a port whose redirect would be cleared stops the change (not the NVMe drive).
    gpu = min(b for b, (vendor, cls, _) in devctl(victim).items() if vendor == "0x10de" and cls[:6] in ("0x0300", "0x0302"))
    labctl("fault", victim, "vfio-bound", gpu)
    try:
        reboot(victim)
        before = state_digest(victim)
        rc, out = playbook("site.yml", "--limit", victim)
        assert rc != 0
        assert f"{victim}: pcie_acs (role pcie): ACS redirect left on at" in out, out[-4000:]
        assert f"{gpu} (below " in out and "bound to vfio-pci" in out and "isolation" in out and "pcie_acs_force" in out, out[-4000:]
        assert state_digest(victim) == before
        # Forced, the plan accepts it (under --check: nothing is written).
        rc, out = playbook("site.yml", "--check", "--limit", victim, "--tags", "pcie", "-e", "pcie_acs_force=true")
        assert rc == 0, out[-4000:]
        assert state_digest(victim) == before
    finally:
        labctl("fault", victim, "vfio-bound", "--clear")
    reboot(victim)


def test_converge(hosts, power_on):
    start = devctl(hosts[0])
    rc, out = playbook("site.yml")
    assert rc == 0, out[-8000:]
    result = recap(out)
    assert set(result) >= set(hosts)
    assert all(r["failed"] == 0 and r["unreachable"] == 0 for r in result.values())
    after = devctl(hosts[0])
    gpus = [b for b, (vendor, cls, _) in start.items() if vendor == "0x10de" and cls[:6] in ("0x0300", "0x0302")]
    assert gpus
    for bdf, (vendor, cls, value) in start.items():
        if bdf in gpus:
            # Only bits 14:12 (MaxReadReq) move; FLR, payload, error bits stay.
            assert after[bdf][2] == (value & ~0x7000) | 0x5000, bdf
        else:
            assert after[bdf][2] == value, f"{bdf} ({cls}) was touched"
    # ACS: on every port of a GPU path only the redirect bits were cleared; every other
    # function's config space (audio, the NVMe drive and its root port) is byte-identical.
    tuned, ports = pci(hosts[0]), gpu_ports(power_on)
    assert NVME in power_on and "0000:00:01.1" not in ports
    judged = 0
    for bdf, function in power_on.items():
        old, new = function["config"], tuned[bdf]["config"]
        if is_gpu(function):
            continue  # MaxReadReq, above
        if bdf in ports and acs_offset(old) is not None:
            control = acs_offset(old) + 6
            assert acs_control(old) & REDIRECT == REDIRECT, f"{bdf}: redirect was off at power-on"
            assert acs_control(new) == acs_control(old) & ~REDIRECT, bdf
            assert old[:control] + old[control + 2:] == new[:control] + new[control + 2:], f"{bdf}: other bytes changed"
            judged += 1
        else:
            assert new == old, f"{bdf} ({function['class']}) was touched"
    assert judged == 4 + 8  # 4 root ports, 8 switch downstream ports


def test_p2p_matrix_reads_ok(hosts):
    for mode in ("r", "w"):
        out = on_host(hosts[0], f"nvidia-smi topo -p2p {mode}")
        cells = {c for line in out.splitlines() if line.startswith(" GPU") for c in line.split()[1:]} - {"X"}
        assert cells == {"OK"}, out


def test_second_run_changes_nothing(hosts):
    rc, out = playbook("site.yml")
    assert rc == 0, out[-6000:]
    changed = {h: r["changed"] for h, r in recap(out).items() if r["changed"]}
    assert not changed, out[-6000:]


def knobs(host):
    return on_host(host, "cat /proc/sys/kernel/osrelease /proc/cmdline /proc/sys/kernel/numa_balancing;"
                         " sort -u /sys/devices/system/cpu/cpu*/cpufreq/scaling_governor;"
                         " sort -u /sys/devices/system/cpu/cpu*/cpufreq/energy_performance_preference;"
                         " cat /sys/module/nvidia_uvm/parameters/uvm_disable_hmm;"
                         " for d in /sys/bus/pci/devices/*; do"
                         " [ $(cat $d/vendor) = 0x10de ] && lspci -vvv -s $(basename $d) | grep -o 'MaxReadReq [0-9]*'; done;"
                         " grep -l 1 /sys/devices/system/cpu/cpu*/cpuidle/state*/disable | wc -l")


def test_every_knob_holds_after_reboot(hosts):
    host = hosts[0]
    tuned, config = knobs(host), pci(host)
    boot_id = on_host(host, "cat /proc/sys/kernel/random/boot_id")
    rc, out = playbook("playbooks/reboot.yml", "--limit", host)
    assert rc == 0, out[-4000:]
    assert on_host(host, "cat /proc/sys/kernel/random/boot_id") != boot_id
    assert knobs(host) == tuned
    assert "MaxReadReq 4096" in tuned and "performance" in tuned
    # Power-on set ACS redirect again (config space is re-rendered at boot); the oneshot cleared it.
    assert pci(host) == config
    results = json.loads(on_host(host, "cat /run/infertune/apply.json"))
    assert results["pcie_acs"]["ok"] and results["pcie_acs"]["changed"], results["pcie_acs"]
    assert "OK" in on_host(host, "nvidia-smi topo -p2p r")
