"""The C-state verification and the cpuidle knob judge a host by the same rule: the
verification's own shell reads run over a fake host, the plan predicts on the same tree."""
import subprocess
import sys

from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node.cpuidle import apply_states
from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node.gate import Gate
from fakehost import write
from verifycheck import load, outcome

CPU_POWER = load("test_cpu_power")


def read_host(root):
    """What the verification's one command prints, run on the fake tree instead of /sys."""
    command = CPU_POWER.CPU.replace("cd /", "cd %s/" % root, 1) + "; echo @@; ".join(CPU_POWER.READ.values())
    output = subprocess.run(["sh", "-c", command], capture_output=True, text=True, check=False).stdout
    return dict(zip(CPU_POWER.READ, CPU_POWER.sections(output, len(CPU_POWER.READ))))


def judged(root, limit=1):
    """(plan has the knob pending, the verification's outcome)."""
    pending = apply_states(root, limit, True, Gate(check_mode=True))["changed"]
    return pending, outcome(CPU_POWER.test_no_deep_cstates, "gpu-07", read_host(root),
                            {"cpu_power_cstate_max_latency": limit})


def test_a_tuned_host_is_as_wanted_for_both(cpu4):
    apply_states(cpu4, 1, True, Gate())
    assert judged(cpu4) == (False, "pass")


def test_a_disabled_shallow_state_is_not_as_wanted_for_both(cpu4):
    apply_states(cpu4, 1, True, Gate())
    write(cpu4, "/sys/devices/system/cpu/cpu3/cpuidle/state1/disable", "1\n")  # C1 on cpu3
    pending, verdict = judged(cpu4)
    assert pending
    assert verdict.startswith("gpu-07: C-states: expected every idle state above 1 us disabled")
    assert verdict.endswith("found C1 (exit latency 1 us) disabled on cpu3")


def test_deep_states_enabled_and_poll_disabled_are_not_as_wanted_for_both(cpu4):
    apply_states(cpu4, 1, True, Gate())
    write(cpu4, "/sys/devices/system/cpu/cpu0/cpuidle/state0/disable", "1\n")  # POLL
    write(cpu4, "/sys/devices/system/cpu/cpu2/cpuidle/state1/disable", "0\n")  # C2: cpu2 has no C1
    pending, verdict = judged(cpu4)
    assert pending and verdict.endswith("found C2 (exit latency 400 us) enabled on cpu2; POLL disabled on cpu0")
