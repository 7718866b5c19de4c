"""cpufreq governor and energy-performance preference (EPP) on every CPU."""
from . import cpu, differs, sysfs, words
from .gate import TuningError
from .kind import REQUIRED, Kind


def _policy_dir(name):
    return "%s/%s/cpufreq" % (cpu.CPU_DIR, name)


def read_cpu(root, name):
    base = _policy_dir(name)
    return {
        "cpu": name,
        "driver": sysfs.read(root, base + "/scaling_driver"),
        "governor": sysfs.read(root, base + "/scaling_governor"),
        "governors_available": sysfs.read_words(root, base + "/scaling_available_governors"),
        "epp": sysfs.read(root, base + "/energy_performance_preference"),
        "epp_available": sysfs.read_words(root, base + "/energy_performance_available_preferences"),
    }


def read_all(root):
    """Per-CPU policy of every CPU that has a cpufreq directory."""
    states = [read_cpu(root, name) for name in cpu.cpu_names(root)]
    return [state for state in states if state["governor"] is not None]


def _aggregate(states):
    result = {"governor": sysfs.count(s["governor"] for s in states)}
    with_epp = [s["epp"] for s in states if s["epp"] is not None]
    if with_epp:
        result["epp"] = sysfs.count(with_epp)
    return result


def _validate(states, governor, epp):
    for state in states:
        if governor not in state["governors_available"]:
            raise TuningError("governor=%r is not available on %s (scaling_available_governors: %s)"
                              % (governor, state["cpu"], " ".join(state["governors_available"])))
        if epp is None or state["epp"] is None:
            continue
        if epp not in state["epp_available"]:
            raise TuningError("epp=%r is not available on %s (energy_performance_available_preferences: %s)"
                              % (epp, state["cpu"], " ".join(state["epp_available"])))
        if governor == "performance" and epp != "performance":
            # The kernel pins EPP to performance under this governor and refuses others (EBUSY).
            raise TuningError("epp=%r cannot be combined with governor='performance': the kernel fixes "
                              "EPP to 'performance' under that governor" % epp)


def apply_policy(root, governor, epp, gate):
    states = read_all(root)
    if not states:
        return {"changed": False, "cpufreq_applicable": False, "epp_applicable": False,
                "before": {}, "after": {}, "cpus": 0,
                "msg": "no cpufreq policy on this host (no %s/cpu*/cpufreq)" % cpu.CPU_DIR}
    _validate(states, governor, epp)
    writes_before = len(gate.actions)
    before = _aggregate(states)
    for state in states:
        if state["governor"] != governor:
            gate.write_sysfs(sysfs.path(root, _policy_dir(state["cpu"]) + "/scaling_governor"), governor)
    epp_cpus = [s for s in states if s["epp"] is not None]
    if epp is not None:
        for state in epp_cpus:
            # Switching governors moves EPP in the kernel, so look again before deciding.
            if gate.check_mode:
                current = "performance" if governor == "performance" and state["governor"] != governor else state["epp"]
            else:
                current = sysfs.read(root, _policy_dir(state["cpu"]) + "/energy_performance_preference")
            if current != epp:
                gate.write_sysfs(sysfs.path(root, _policy_dir(state["cpu"]) + "/energy_performance_preference"), epp)
    if gate.check_mode:
        after = {"governor": {governor: len(states)}}
        if epp_cpus:
            after["epp"] = {epp: len(epp_cpus)} if epp is not None else before["epp"]
    else:
        after = _aggregate(read_all(root))
        if after["governor"] != {governor: len(states)}:
            raise TuningError("governor did not stick: %s after writing %r" % (after["governor"], governor))
        if epp is not None and epp_cpus and after.get("epp") != {epp: len(epp_cpus)}:
            raise TuningError("EPP did not stick: %s after writing %r" % (after.get("epp"), epp))
    # Per CPU, as the plan shows it: the aggregates above would not say which CPU drifted.
    changes = [(s["cpu"], "governor", s["governor"], governor) for s in states if s["governor"] != governor]
    changes += [(s["cpu"], "epp", s["epp"], epp) for s in epp_cpus if epp is not None and s["epp"] != epp]
    result = {"changed": len(gate.actions) > writes_before, "cpufreq_applicable": True,
              "differs": differs.elements(changes, len(states)),
              "epp_applicable": bool(epp_cpus), "before": before, "after": after, "cpus": len(states),
              "driver": sysfs.count(s["driver"] for s in states)}
    result["msg"] = "governor %s on %d CPUs" % (governor, len(states))
    if epp is not None and not epp_cpus:
        result["msg"] += "; EPP not applicable with driver %s" % ", ".join(sorted(result["driver"]))
    return result


def original(root, args):
    """{cpu: {driver, governor, epp}} of every CPU with a cpufreq policy."""
    return {s["cpu"]: {"driver": s["driver"], "governor": s["governor"], "epp": s["epp"]} for s in read_all(root)}


def revert_policy(root, saved, gate):
    """Each CPU's governor, then its EPP, back to the recorded ones. A CPU recorded under another
    cpufreq driver than it runs now (the command line's amd_pstate= went back and the host booted)
    is left: that boot gave it the kernel's own policy. Without a record the policy is left: the
    kernel's default governor depends on its build."""
    states = read_all(root)
    result = {"changed": False, "before": _aggregate(states) if states else {}, "cpus": len(states)}
    if not states:
        return dict(result, after={}, runtime_pending=False, msg="no cpufreq policy on this host")
    if saved is None:
        return dict(result, after=result["before"], runtime_pending=False, msg="governor and EPP left as they are (%s):"
                    " no record of them before infertune" % words.cpu_counts(result["before"], {"epp": "EPP"}))
    writes_before, changes, stale, after = len(gate.actions), [], [], []
    for state in states:
        recorded = saved.get(state["cpu"])
        if not recorded or recorded.get("driver") != state["driver"]:
            stale.append(state["cpu"])
            after.append(dict(state))
            continue
        base = _policy_dir(state["cpu"])
        governor, epp = recorded.get("governor"), recorded.get("epp")
        if governor and state["governor"] != governor:
            if governor not in state["governors_available"]:
                raise TuningError("%s: the governor before infertune, %r, is not available now (%s)"
                                  % (state["cpu"], governor, " ".join(state["governors_available"])))
            gate.write_sysfs(sysfs.path(root, base + "/scaling_governor"), governor)
            changes.append((state["cpu"], "governor", state["governor"], governor))
        current = state["epp"] if gate.check_mode else sysfs.read(root, base + "/energy_performance_preference")
        # The kernel fixes EPP under the performance governor (it refuses a write: EBUSY).
        if epp and current is not None and current != epp and governor != "performance":
            gate.write_sysfs(sysfs.path(root, base + "/energy_performance_preference"), epp)
            changes.append((state["cpu"], "epp", current, epp))
        after.append(dict(state, governor=governor or state["governor"],
                          epp=epp if epp and current is not None and governor != "performance" else current))
    if not gate.check_mode:
        after = read_all(root)
        wrong = ["%s %s" % (s["cpu"], s["governor"]) for s in after if s["cpu"] in saved and s["cpu"] not in stale
                 and saved[s["cpu"]].get("governor") not in (None, s["governor"])]
        if wrong:
            raise TuningError("governor did not go back on %s" % ", ".join(wrong))
    msg = "governor and EPP as before infertune on %d CPUs" % (len(states) - len(stale))
    if stale:
        msg += "; %s left: recorded under another cpufreq driver than %s runs (this boot gave the kernel's own)" % (
            differs.names(stale), ", ".join(sorted({s["driver"] for s in states if s["cpu"] in stale})))
    return dict(result, changed=len(gate.actions) > writes_before, after=_aggregate(after),
                differs=differs.elements(changes, len(states)), runtime_pending=len(gate.actions) > writes_before, msg=msg)


KIND = Kind("cpufreq_policy", lambda root, a, gate: apply_policy(root, a["governor"], a["epp"], gate),
            {"governor": (str, REQUIRED), "epp": (str, None)},
            say=words.mapping(lambda value: words.cpu_counts(value, {"epp": "EPP"})),
            original=original, revert=lambda root, a, saved, gate: revert_policy(root, saved, gate))
