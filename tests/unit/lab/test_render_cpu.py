"""CPU frequency driver, C-states, topology: from profile + kernel command line."""
from labhw import load_profile


def read(hw, rel):
    return (hw / rel).read_text().strip()


CPU = "sys/devices/system/cpu"


def test_firmware_default_is_acpi_cpufreq_without_amd_pstate(render_host, seed):
    hw = render_host(seed)
    assert read(hw, f"{CPU}/cpu127/cpufreq/scaling_driver") == "acpi-cpufreq"
    assert "schedutil" in read(hw, f"{CPU}/cpu0/cpufreq/scaling_available_governors").split()
    assert not (hw / CPU / "amd_pstate").exists()
    assert not (hw / CPU / "cpu0/cpufreq/energy_performance_preference").exists()


def test_amd_pstate_active_gives_epp_driver(render_host, seed):
    hw = render_host(seed, cmdline="BOOT_IMAGE=/boot/vmlinuz-6.14 ro amd_pstate=active")
    assert read(hw, f"{CPU}/amd_pstate/status") == "active"
    assert read(hw, f"{CPU}/cpu5/cpufreq/scaling_driver") == "amd-pstate-epp"
    assert read(hw, f"{CPU}/cpu5/cpufreq/scaling_available_governors") == "performance powersave"
    assert read(hw, f"{CPU}/cpu5/cpufreq/scaling_governor") == "powersave"
    assert read(hw, f"{CPU}/cpu5/cpufreq/energy_performance_preference") == "balance_performance"
    assert read(hw, f"{CPU}/cpu5/cpufreq/energy_performance_available_preferences") == (
        "default performance balance_performance balance_power power")


def test_amd_pstate_guided_gives_amd_pstate_with_status(render_host, seed):
    hw = render_host(seed, cmdline="ro amd_pstate=guided")
    assert read(hw, f"{CPU}/amd_pstate/status") == "guided"
    assert read(hw, f"{CPU}/cpu0/cpufreq/scaling_driver") == "amd-pstate"


def idle_names(hw, cpu=0):
    states = sorted((hw / CPU / f"cpu{cpu}/cpuidle").iterdir(), key=lambda p: int(p.name[5:]))
    return [(s / "name").read_text().strip() for s in states]


def test_processor_max_cstate_limits_acpi_idle(render_host, seed):
    assert idle_names(render_host(seed)) == ["POLL", "C1", "C2"]
    hw = render_host(seed, cmdline="ro processor.max_cstate=1")
    assert idle_names(hw, 100) == ["POLL", "C1"]
    assert read(hw, f"{CPU}/cpu100/cpuidle/state1/latency") == "1"
    assert read(hw, f"{CPU}/cpu100/cpuidle/state1/disable") == "0"
    assert read(hw, f"{CPU}/cpuidle/current_driver") == "acpi_idle"


def test_intel_idle_ignores_processor_max_cstate(render_host, xeon):
    assert idle_names(render_host(xeon, cmdline="ro processor.max_cstate=1")) == ["POLL", "C1", "C1E", "C6"]
    assert idle_names(render_host(xeon, cmdline="ro intel_idle.max_cstate=2")) == ["POLL", "C1", "C1E"]


def test_intel_pstate_default_and_passive(render_host, xeon):
    hw = render_host(xeon)
    assert read(hw, f"{CPU}/intel_pstate/status") == "active"
    assert read(hw, f"{CPU}/cpu0/cpufreq/scaling_driver") == "intel_pstate"
    hw = render_host(xeon, cmdline="ro intel_pstate=passive")
    assert read(hw, f"{CPU}/cpu0/cpufreq/scaling_driver") == "intel_cpufreq"


def test_topology_cpuinfo_and_nodes(render_host, seed):
    hw = render_host(seed)
    assert read(hw, f"{CPU}/present") == "0-127"
    assert read(hw, "sys/devices/system/node/node1/cpulist") == "64-127"
    cpuinfo = read(hw, "proc/cpuinfo")
    assert cpuinfo.count("vendor_id\t: AuthenticAMD") == 128
    assert cpuinfo.count("cpu family\t: 25\n") == 128
    assert cpuinfo.count("physical id\t: 1\n") == 64


def test_small_profile_has_four_cpus_one_node_one_gpu(render_host):
    hw = render_host(load_profile("small-epyc-rtxpro6000"))
    assert read(hw, f"{CPU}/present") == "0-3"
    assert read(hw, "sys/devices/system/node/online") == "0"
    # root port, switch up + down port, GPU, audio
    assert sorted(p.name for p in (hw / "sys/bus/pci/devices").iterdir()) == [
        "0000:15:01.1", "0000:16:00.0", "0000:17:00.0", "0000:18:00.0", "0000:18:00.1"]
