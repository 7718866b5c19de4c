"""Revert of the CPU kinds: the amd_pstate mode, governor and EPP per CPU, the C-states' disable
bits, back to what original() recorded; without a record the kernel's default where it is known,
else the value left and said."""
import pytest

from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node import amd_pstate, cpufreq, cpuidle
from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node.gate import Gate, TuningError
from fakehost import read, snapshot, write

CPU = "/sys/devices/system/cpu/cpu%d/"
STATUS = "/sys/devices/system/cpu/amd_pstate/status"


def governors(root, count):
    return {read(root, CPU % n + "cpufreq/scaling_governor") for n in range(count)}


def test_amd_pstate_goes_back_to_the_recorded_mode(amd128):
    write(amd128, STATUS, "passive\n")
    saved = amd_pstate.original(amd128, {"mode": "active"})
    amd_pstate.apply_mode(amd128, "active", Gate())
    result = amd_pstate.KIND.revert(amd128, {"mode": "active"}, saved, Gate())
    assert result["changed"] and result["before"] == "active" and result["after"] == "passive"
    assert read(amd128, STATUS) == "passive"
    assert not amd_pstate.KIND.revert(amd128, {"mode": "active"}, saved, Gate())["changed"]


def test_amd_pstate_without_a_record_or_a_driver_is_left_and_said(amd128, tmp_path):
    result = amd_pstate.KIND.revert(amd128, {"mode": "active"}, None, Gate())
    assert not result["changed"] and "left active: no record" in result["msg"]
    # Recorded while the driver was not loaded: the mode the next boot gives is the kernel's.
    result = amd_pstate.KIND.revert(amd128, {"mode": "active"}, {"status": None}, Gate())
    assert not result["changed"] and "was not loaded before infertune" in result["msg"]
    write(amd128, STATUS, "active\n")
    (tmp_path / STATUS.lstrip("/")).unlink()
    assert "not loaded" in amd_pstate.KIND.revert(amd128, {"mode": "active"}, {"status": "passive"}, Gate())["msg"]


def test_amd_pstate_on_intel_is_skipped(tmp_path):
    from fakehost import cpu_tree
    root = cpu_tree(str(tmp_path), 2, vendor="GenuineIntel")
    result = amd_pstate.KIND.revert(root, {"mode": "active"}, {"status": "passive"}, Gate())
    assert not result["changed"] and "GenuineIntel" in result["skipped_reason"]


def test_cpufreq_goes_back_per_cpu_governor_first_then_epp(amd128):
    write(amd128, CPU % 7 + "cpufreq/scaling_governor", "performance\n")  # the host's own odd one
    saved = cpufreq.original(amd128, {})
    cpufreq.apply_policy(amd128, "performance", "performance", Gate())
    gate = Gate()
    result = cpufreq.revert_policy(amd128, saved, gate)
    assert result["changed"] and result["runtime_pending"]
    assert result["after"] == {"governor": {"powersave": 127, "performance": 1}, "epp": {"balance_performance": 127,
                                                                                          "performance": 1}}
    assert read(amd128, CPU % 7 + "cpufreq/scaling_governor") == "performance"
    assert read(amd128, CPU % 8 + "cpufreq/energy_performance_preference") == "balance_performance"
    assert result["differs"] == ("cpu0-6,8-127 governor performance -> powersave; cpu0-6,8-127 epp performance"
                                 " -> balance_performance (1 other ok)")
    # Governor before EPP on each CPU: under performance the kernel refuses another EPP.
    writes = [a for a in gate.actions if "/cpu8/" in a]
    assert writes[0].endswith("scaling_governor = powersave") and writes[1].endswith("preference = balance_performance")
    assert not cpufreq.revert_policy(amd128, saved, Gate())["changed"]


def test_cpufreq_check_mode_predicts_and_writes_nothing(amd128):
    saved = cpufreq.original(amd128, {})
    cpufreq.apply_policy(amd128, "performance", "performance", Gate())
    before = snapshot(amd128)
    result = cpufreq.revert_policy(amd128, saved, Gate(check_mode=True))
    assert result["changed"] and result["after"] == {"governor": {"powersave": 128}, "epp": {"balance_performance": 128}}
    assert snapshot(amd128) == before


def test_cpufreq_recorded_under_another_driver_is_left(amd128):
    """The command line's amd_pstate= went back and the host booted: acpi-cpufreq now, the kernel's own policy."""
    saved = cpufreq.original(amd128, {})
    for n in range(128):
        write(amd128, CPU % n + "cpufreq/scaling_driver", "acpi-cpufreq\n")
        write(amd128, CPU % n + "cpufreq/scaling_governor", "schedutil\n")
    result = cpufreq.revert_policy(amd128, saved, Gate())
    assert not result["changed"] and governors(amd128, 128) == {"schedutil"}
    assert "cpu0-127 left: recorded under another cpufreq driver than acpi-cpufreq runs" in result["msg"]


def test_cpufreq_without_a_record_is_left_and_said(amd128):
    result = cpufreq.revert_policy(amd128, None, Gate())
    assert not result["changed"] and "no record of them before infertune" in result["msg"]
    assert "governor powersave on 128 CPUs" in result["msg"]


def test_cpufreq_a_recorded_governor_no_longer_offered_fails_before_writing_it(amd128):
    saved = {"cpu0": {"driver": "amd-pstate-epp", "governor": "ondemand", "epp": None}}
    with pytest.raises(TuningError, match="cpu0: the governor before infertune, 'ondemand', is not available"):
        cpufreq.revert_policy(amd128, saved, Gate())
    assert read(amd128, CPU % 0 + "cpufreq/scaling_governor") == "powersave"


def test_cpuidle_disable_bits_go_back_by_state_and_name(cpu4):
    write(cpu4, CPU % 1 + "cpuidle/state3/disable", "1\n")  # the host's own: kept disabled
    saved = cpuidle.original(cpu4, {})
    cpuidle.apply_states(cpu4, 1, True, Gate())
    assert read(cpu4, CPU % 0 + "cpuidle/state2/disable") == "1"
    result = cpuidle.KIND.revert(cpu4, {"max_latency": 1, "keep_poll": True}, saved, Gate())
    assert result["changed"] and result["runtime_pending"]
    assert read(cpu4, CPU % 0 + "cpuidle/state2/disable") == "0"
    assert read(cpu4, CPU % 1 + "cpuidle/state3/disable") == "1"
    assert read(cpu4, CPU % 2 + "cpuidle/state1/disable") == "0"  # cpu2's ids are shifted: its C2
    assert not cpuidle.KIND.revert(cpu4, {"max_latency": 1, "keep_poll": True}, saved, Gate())["changed"]


def test_cpuidle_a_state_renamed_since_the_record_is_left(cpu4):
    saved = cpuidle.original(cpu4, {})
    cpuidle.apply_states(cpu4, 1, True, Gate())
    write(cpu4, CPU % 0 + "cpuidle/state2/name", "C2X\n")
    cpuidle.KIND.revert(cpu4, {"max_latency": 1, "keep_poll": True}, saved, Gate())
    assert read(cpu4, CPU % 0 + "cpuidle/state2/disable") == "1" and read(cpu4, CPU % 0 + "cpuidle/state3/disable") == "0"


def test_cpuidle_without_a_record_goes_to_the_kernels_default_status_where_it_says_one(cpu4):
    cpuidle.apply_states(cpu4, 1, True, Gate())
    for n in range(4):
        for k in range(4):
            if k < 3 or n != 2:
                write(cpu4, CPU % n + "cpuidle/state%d/default_status" % k, "enabled\n")
    write(cpu4, CPU % 3 + "cpuidle/state3/default_status", "disabled\n")  # flagged off by its driver
    result = cpuidle.KIND.revert(cpu4, {"max_latency": 1, "keep_poll": True}, None, Gate())
    assert result["changed"] and "back to the kernel's default (default_status)" in result["msg"]
    assert read(cpu4, CPU % 0 + "cpuidle/state3/disable") == "0"
    assert read(cpu4, CPU % 3 + "cpuidle/state3/disable") == "1"
    assert not cpuidle.KIND.revert(cpu4, {"max_latency": 1, "keep_poll": True}, None, Gate())["changed"]


def test_cpuidle_without_a_record_or_a_default_status_is_left(cpu4):
    cpuidle.apply_states(cpu4, 1, True, Gate())
    before = snapshot(cpu4)
    result = cpuidle.KIND.revert(cpu4, {"max_latency": 1, "keep_poll": True}, None, Gate())
    assert not result["changed"] and "left as they are" in result["msg"] and snapshot(cpu4) == before


def test_cpuidle_check_mode_writes_nothing(cpu4):
    saved = cpuidle.original(cpu4, {})
    cpuidle.apply_states(cpu4, 1, True, Gate())
    before = snapshot(cpu4)
    assert cpuidle.KIND.revert(cpu4, {"max_latency": 1, "keep_poll": True}, saved, Gate(check_mode=True))["changed"]
    assert snapshot(cpu4) == before
