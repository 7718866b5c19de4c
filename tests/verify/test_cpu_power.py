"""CPU frequency driver, governor, EPP and idle states on every CPU (role cpu_power)."""
import pytest

from infertune_node.cpuidle import wanted_disable
from outcome import mismatch, not_applicable
from probes import probe
from readings import cpu_ranges, grep_files, per_cpu, per_value, sections

CPU = "cd /sys/devices/system/cpu && "
NO_CPUFREQ = "no cpufreq policy on any CPU (no cpuN/cpufreq directory: frequency is owned by the hypervisor or firmware)"
# cpufreq driver names per amd_pstate mode (amd_pstate_epp: kernels before 6.5).
# Everything the tests below read, in one command: each section is one `echo @@` apart.
READ = {
    "cpus": "ls -d cpu[0-9]*",
    "drivers": "grep -H . cpu[0-9]*/cpufreq/scaling_driver 2>/dev/null",
    "status": "cat amd_pstate/status 2>/dev/null",
    "governors": "grep -H . cpu[0-9]*/cpufreq/scaling_governor 2>/dev/null",
    "epp": "grep -H . cpu[0-9]*/cpufreq/energy_performance_preference 2>/dev/null",
    "idle_driver": "cat cpuidle/current_driver 2>/dev/null",
    "idle_states": "grep -H . cpu[0-9]*/cpuidle/state[0-9]*/name cpu[0-9]*/cpuidle/state[0-9]*/latency"
                   " cpu[0-9]*/cpuidle/state[0-9]*/disable 2>/dev/null",
}
AMD_PSTATE_DRIVERS = {
    "active": ("amd-pstate-epp", "amd_pstate_epp"),
    "passive": ("amd-pstate", "amd_pstate"),
    "guided": ("amd-pstate", "amd_pstate"),
    "disable": ("acpi-cpufreq",),
}


CPU_READ = CPU + "; echo @@; ".join(READ.values())
probe("cpu")(lambda want: CPU_READ)


@pytest.fixture(scope="module")
def cpu(sh):
    return dict(zip(READ, sections(sh(CPU_READ), len(READ))))


def test_cpufreq_driver(name, cpu, want, cpu_vendor):
    cpus, status = cpu["cpus"], cpu["status"]
    drivers = per_cpu(grep_files(cpu["drivers"]))
    if not drivers:
        not_applicable(name, "cpufreq driver", NO_CPUFREQ)
    mode = want["cpu_power_amd_pstate_mode"]
    if cpu_vendor != "AuthenticAMD" or not mode:
        not_applicable(name, "cpufreq driver", f"amd_pstate is for AMD CPUs (vendor {cpu_vendor}, mode {mode!r}); "
                                               f"driver {per_value(drivers)}")
    allowed = AMD_PSTATE_DRIVERS[mode]
    without = sorted(set(cpus.split()) - set(drivers))
    wrong = {cpu: d for cpu, d in drivers.items() if d not in allowed}
    status = status.strip() or "absent"
    status_ok = status == mode or (mode == "disable" and status == "absent")
    if without or wrong or not status_ok:
        found = per_value(drivers) + (f"; no cpufreq on {cpu_ranges(without)}" if without else "")
        mismatch(name, "cpufreq driver", f"{allowed[0]} on every CPU, amd_pstate/status {mode}",
                 f"{found}, amd_pstate/status {status}")


def test_cpufreq_governor(name, cpu, want):
    governors = per_cpu(grep_files(cpu["governors"]))
    if not governors:
        not_applicable(name, "cpufreq governor", NO_CPUFREQ)
    if any(g != want["cpu_power_governor"] for g in governors.values()):
        mismatch(name, "cpufreq governor", f"{want['cpu_power_governor']} on every CPU", per_value(governors))


def test_cpufreq_epp(name, cpu, want, cpu_vendor):
    epp = per_cpu(grep_files(cpu["epp"]))
    driver = per_value(per_cpu(grep_files(cpu["drivers"])))
    expected = f"{want['cpu_power_epp']} on every CPU"
    if not driver:
        not_applicable(name, "EPP", NO_CPUFREQ)
    if not epp:
        # amd_pstate=active is what offers EPP on AMD: its absence there is the knob being off.
        if cpu_vendor == "AuthenticAMD" and want["cpu_power_amd_pstate_mode"] == "active":
            mismatch(name, "EPP", expected, f"no energy_performance_preference (cpufreq driver {driver})")
        not_applicable(name, "EPP", f"cpufreq driver {driver} offers no energy_performance_preference")
    if any(v != want["cpu_power_epp"] for v in epp.values()):
        mismatch(name, "EPP", expected, per_value(epp))


def idle_states(output):
    """{(cpu, state): {'name': .., 'latency': .., 'disable': ..}} from grep -H output."""
    states = {}
    for path, value in grep_files(output).items():
        cpu, cpuidle, state, field = path.split("/")
        states.setdefault((cpu, state), {})[field] = value
    return states


def cstate_offenders(states, limit):
    """{'C1 (exit latency 1 us) disabled': [cpus]}: states not as the cpuidle knob leaves them,
    judged by its own rule (a shallow state left disabled is as wrong as a deep one enabled)."""
    offenders = {}
    for (cpu, name), state in states.items():
        latency = int(state["latency"]) if state.get("latency", "").isdigit() else None
        want = wanted_disable({"name": state["name"], "latency": latency}, limit)
        if state.get("disable") != str(want):
            what = f"{state['name']} (exit latency {state.get('latency', '?')} us) " + ("enabled" if want else "disabled")
            offenders.setdefault("POLL disabled" if state["name"] == "POLL" else what, []).append(cpu)
    return offenders


def test_no_deep_cstates(name, cpu, want):
    driver, states = cpu["idle_driver"].strip() or "absent", idle_states(cpu["idle_states"])
    if driver in ("absent", "none") or not states:
        not_applicable(name, "C-states", f"cpuidle driver is {driver}: no idle states to disable")
    limit = int(want["cpu_power_cstate_max_latency"])
    offenders = cstate_offenders(states, limit)
    if offenders:
        found = "; ".join(f"{what} on {cpu_ranges(cpus)}" for what, cpus in sorted(offenders.items()))
        mismatch(name, "C-states", f"every idle state above {limit} us disabled and the others (POLL included)"
                                   " enabled on every CPU", found)
