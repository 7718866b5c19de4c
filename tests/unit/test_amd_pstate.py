import pytest
from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node.amd_pstate import apply_mode
from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node.gate import Gate, TuningError
from fakehost import cpuinfo, read, snapshot, write

STATUS = "/sys/devices/system/cpu/amd_pstate/status"


def test_switches_mode_then_is_idempotent(amd128):
    write(amd128, STATUS, "passive\n")
    result = apply_mode(amd128, "active", Gate())
    assert result["changed"] and result["before"] == "passive" and result["after"] == "active"
    assert read(amd128, STATUS) == "active"
    again = apply_mode(amd128, "active", Gate())
    assert not again["changed"] and not again["amd_pstate_reboot_required"]


def test_check_mode_changes_nothing(amd128, check_gate):
    before = snapshot(amd128)
    result = apply_mode(amd128, "guided", check_gate)
    assert result["changed"] and result["after"] == "guided"
    assert snapshot(amd128) == before


def test_driver_not_loaded_needs_the_command_line(cpu4, gate):
    result = apply_mode(cpu4, "active", gate)
    assert not result["changed"] and result["amd_pstate_reboot_required"]
    assert "not loaded" in result["msg"] and "amd_pstate=active" in result["msg"]
    assert gate.actions == []


def test_intel_cpu_is_skipped(cpu4, gate):
    write(cpu4, "/proc/cpuinfo", cpuinfo(4, "GenuineIntel", 1))
    result = apply_mode(cpu4, "active", gate)
    assert not result["changed"] and "GenuineIntel" in result["skipped_reason"]


def test_unknown_mode_fails(amd128, gate):
    with pytest.raises(TuningError, match="mode="):
        apply_mode(amd128, "disable", gate)
