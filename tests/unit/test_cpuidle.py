from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node.cpuidle import apply_states
from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node.gate import Gate
from fakehost import read, snapshot, write


def disabled(root, cpu, state_id):
    return read(root, "/sys/devices/system/cpu/cpu%d/cpuidle/state%d/disable" % (cpu, state_id))


def test_matches_states_by_latency_not_id(cpu4):
    result = apply_states(cpu4, 1, True, Gate())
    assert result["changed"] and result["cpus"] == 4
    assert result["after"] == {"POLL": {"enabled": 4, "disabled": 0}, "C1": {"enabled": 3, "disabled": 0},
                               "C2": {"enabled": 0, "disabled": 4}, "C3": {"enabled": 0, "disabled": 4}}
    # cpu2 has no C1: its state1 is C2 and must be disabled, while cpu0's state1 (C1) stays on.
    assert disabled(cpu4, 2, 1) == "1" and disabled(cpu4, 0, 1) == "0"
    assert not apply_states(cpu4, 1, True, Gate())["changed"]


def test_reenables_states_at_or_below_the_bound(cpu4):
    write(cpu4, "/sys/devices/system/cpu/cpu3/cpuidle/state1/disable", "1\n")
    apply_states(cpu4, 1, True, Gate())
    assert disabled(cpu4, 3, 1) == "0"


def test_poll_is_kept_unless_asked(cpu4):
    apply_states(cpu4, -1, True, Gate())
    assert disabled(cpu4, 0, 0) == "0" and disabled(cpu4, 0, 1) == "1"
    apply_states(cpu4, -1, False, Gate())
    assert disabled(cpu4, 0, 0) == "1"


def test_check_mode_changes_nothing(amd128, check_gate):
    before = snapshot(amd128)
    result = apply_states(amd128, 1, True, check_gate)
    assert result["changed"] and result["after"]["C2"] == {"enabled": 0, "disabled": 128}
    assert snapshot(amd128) == before


def test_no_cpuidle_driver_is_ok(cpu4, gate):
    write(cpu4, "/sys/devices/system/cpu/cpuidle/current_driver", "none\n")
    result = apply_states(cpu4, 1, True, gate)
    assert not result["changed"] and "current_driver: none" in result["msg"] and gate.actions == []
