"""Idle states (C-states): disable those whose exit latency exceeds a bound, on every CPU."""
from . import cpu, differs, sysfs, words
from .kind import REQUIRED, Kind

DRIVER = cpu.CPU_DIR + "/cpuidle/current_driver"


def read_states(root, name):
    """States of one CPU; ids differ between CPUs, so callers use name and latency only."""
    states = []
    for state_id in sysfs.entries(root, "%s/%s/cpuidle/state[0-9]*" % (cpu.CPU_DIR, name)):
        base = "%s/%s/cpuidle/%s" % (cpu.CPU_DIR, name, state_id)
        states.append({
            "path": base + "/disable",
            "name": sysfs.read(root, base + "/name"),
            "latency": sysfs.read_int(root, base + "/latency"),
            "disable": sysfs.read_int(root, base + "/disable"),
        })
    return states


def wanted_disable(state, max_latency, keep_poll=True):
    """The one rule for "C-states as wanted", which the knob applies and tests/verify checks:
    disabled (1) above max_latency (or latency unknown), enabled (0) at or below it, POLL kept."""
    if keep_poll and state["name"] == "POLL":
        return 0
    return 1 if state["latency"] is None or state["latency"] > max_latency else 0


def _word(disable):
    return {0: "enabled", 1: "disabled"}.get(disable, "unreadable")


def _aggregate(pairs):
    """{state name: {"enabled": n, "disabled": m}} over (name, disable) pairs of all CPUs."""
    result = {}
    for name, disable in pairs:
        entry = result.setdefault(name, {"enabled": 0, "disabled": 0})
        entry["disabled" if disable else "enabled"] += 1
    return result


def apply_states(root, max_latency, keep_poll, gate):
    driver = sysfs.read(root, DRIVER)
    per_cpu = {name: read_states(root, name) for name in cpu.cpu_names(root)}
    if driver in (None, "none") or not any(per_cpu.values()):
        return {"changed": False, "before": {}, "after": {}, "driver": driver, "cpus": 0,
                "msg": "no cpuidle states on this host (current_driver: %s)" % driver}
    writes_before = len(gate.actions)
    before, after, changes = [], [], []
    for name, states in per_cpu.items():
        for state in states:
            want = wanted_disable(state, max_latency, keep_poll)
            before.append((state["name"], state["disable"]))
            after.append((state["name"], want))
            if state["disable"] != want:
                changes.append((name, state["name"], _word(state["disable"]), _word(want)))
                gate.write_sysfs(sysfs.path(root, state["path"]), str(want))
    if not gate.check_mode:
        after = [(s["name"], s["disable"]) for name in per_cpu for s in read_states(root, name)]
    cpus = sum(1 for states in per_cpu.values() if states)
    return {"changed": len(gate.actions) > writes_before, "before": _aggregate(before),
            "after": _aggregate(after), "driver": driver, "cpus": cpus,
            "differs": differs.elements(changes, cpus),
            "msg": "idle states with exit latency above %d us disabled on %d CPUs" % (max_latency, cpus)}


def original(root, args):
    """The driver and, per CPU, each state's name and disable bit, by its directory (state0, ...)."""
    return {"driver": sysfs.read(root, DRIVER),
            "cpus": {name: {state["path"].split("/")[-2]: {"name": state["name"], "disable": state["disable"]}
                            for state in read_states(root, name)} for name in cpu.cpu_names(root)}}


def _default(root, state):
    """The kernel's own disable bit of a state (its default_status, Linux 5.7 and later), or None."""
    return {"enabled": 0, "disabled": 1}.get(sysfs.read(root, state["path"].rsplit("/", 1)[0] + "/default_status"))


def revert_states(root, max_latency, keep_poll, saved, gate):
    """Each state's disable bit back to the recorded one, where the state has the name it had then
    (under the same driver). Without a record, a state that is as this knob sets it goes back to the
    kernel's own default (default_status) where the kernel says it; any other is left."""
    driver = sysfs.read(root, DRIVER)
    per_cpu = {name: read_states(root, name) for name in cpu.cpu_names(root)}
    if driver in (None, "none") or not any(per_cpu.values()):
        return {"changed": False, "before": {}, "after": {}, "runtime_pending": False,
                "msg": "no cpuidle states on this host (current_driver: %s)" % driver}
    recorded = (saved or {}).get("cpus", {}) if (saved or {}).get("driver") == driver else {}
    writes_before = len(gate.actions)
    before, after, changes, left = [], [], [], 0
    for name, states in per_cpu.items():
        for state in states:
            was = recorded.get(name, {}).get(state["path"].split("/")[-2])
            if was and was.get("name") == state["name"]:
                want = was["disable"]
            elif saved is None and state["disable"] == wanted_disable(state, max_latency, keep_poll):
                want = _default(root, state)
            else:
                want = None
            want = state["disable"] if want is None else want
            left += want == state["disable"] and not was
            before.append((state["name"], state["disable"]))
            after.append((state["name"], want))
            if state["disable"] != want:
                changes.append((name, state["name"], _word(state["disable"]), _word(want)))
                gate.write_sysfs(sysfs.path(root, state["path"]), str(want))
    if not gate.check_mode:
        after = [(s["name"], s["disable"]) for name in per_cpu for s in read_states(root, name)]
    cpus = sum(1 for states in per_cpu.values() if states)
    changed = len(gate.actions) > writes_before
    if saved is None:
        msg = "no record of the idle states before infertune: " + (
            "those as this knob sets them back to the kernel's default (default_status)" if changed
            else "left as they are (none as this knob sets them differs from a default_status the kernel gives)")
    else:
        msg = "idle states as before infertune on %d CPUs" % cpus + (
            "" if not left else "; %d state(s) not recorded under driver %s left as they are" % (left, driver))
    return {"changed": changed, "before": _aggregate(before), "after": _aggregate(after), "driver": driver,
            "cpus": cpus, "differs": differs.elements(changes, cpus), "runtime_pending": changed, "msg": msg}


KIND = Kind("cpuidle_states", lambda root, a, gate: apply_states(root, a["max_latency"], a["keep_poll"], gate),
            {"max_latency": (int, REQUIRED), "keep_poll": (bool, True)}, say=words.mapping(words.cstates),
            original=original,
            revert=lambda root, a, saved, gate: revert_states(root, a["max_latency"], a["keep_poll"], saved, gate))
