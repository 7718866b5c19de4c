"""site.yml on the 8-host lab: check mode, bad input, converge, idempotence, reboot.

The tests run in file order on one fresh lab: each step starts from the state the
previous one left, like an engineer would run them.
"""
import pytest

from helpers import fresh_lab, on_host, playbook, recap, state_digest

pytestmark = pytest.mark.lab

GPU_BDF_CMD = ("for d in /sys/bus/pci/devices/*; do echo \"$(basename $d) $(cat $d/vendor) $(cat $d/class)\"; done")


@pytest.fixture(scope="module")
def hosts(lab):
    fresh_lab()
    return sorted(lab.hosts())


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


def test_check_mode_reports_changes_and_alters_nothing(hosts):
    before = {h: state_digest(h) for h in hosts}
    rc, out = playbook("site.yml", "--check", "--diff")
    assert rc == 0, out[-6000:]
    assert all(r["changed"] > 0 for r in recap(out).values()), out[-3000:]
    assert "MaxReadReq" in out or "max_read_request" in out
    for h in hosts:
        assert state_digest(h) == before[h], f"{h}: --check changed files"


@pytest.mark.parametrize("extra, variable", [
    ("pcie_max_read_request=3000", "pcie_max_read_request"),
    ("cpu_power_governor=turbo", "cpu_power_governor"),
    ("cpu_power_epp=max_speed", "cpu_power_epp"),
    ("kernel_reboot_strategy=sometimes", "kernel_reboot_strategy"),
])
def test_bad_input_is_refused_before_any_change(hosts, extra, variable):
    host = hosts[0]
    before = state_digest(host)
    rc, out = playbook("site.yml", "-e", extra)
    assert rc != 0
    assert variable in out, out[-3000:]
    assert all(r["changed"] == 0 for r in recap(out).values()), out[-3000:]
    assert state_digest(host) == before


def test_converge(hosts):
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
    tuned = knobs(host)
    boot_id = on_host(host, "cat /proc/sys/kernel/random/boot_id")
    rc, out = playbook("playbooks/reboot.yml", "--limit", host)
    assert rc == 0, out[-4000:]
    assert on_host(host, "cat /proc/sys/kernel/random/boot_id") != boot_id
    assert knobs(host) == tuned
    assert "MaxReadReq 4096" in tuned and "performance" in tuned
