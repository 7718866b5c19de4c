"""A unit's files, boot-time enablement and running state, through systemctl."""
from .files import install
from .gate import Gate, TuningError

# What is-enabled says of a unit no file defines: "not-found", or on older systemd nothing
# on stdout and a non-zero status ("unknown" here; the error goes to stderr).
MISSING = ("not-found", "unknown")
# States `systemctl enable` cannot change: no [Install] section of the unit's own (Ubuntu's
# nvidia-persistenced.service is static), made by a generator, or runtime-only.
NOT_ENABLEABLE = ("static", "indirect", "generated", "transient")
# is-active of a unit that runs or will run again: waiting to restart after a crash
# (Restart=on-failure) reads "activating".
RUNNING = ("active", "activating", "reloading")


def _state(gate, verb, unit):
    # Read-only queries run in check mode too; an unknown unit answers non-zero with a word.
    rc, out, _ = gate.runner(["systemctl", verb, unit])
    return out.strip() or ("unknown" if rc else "")


def unit_states(units, runner):
    """{unit: {enabled, active}}, read-only, as is-enabled and is-active say them: one
    `systemctl show` for every unit (its blocks come in the order asked), else one query each."""
    units = list(units)
    if not units:
        return {}
    gate = Gate(check_mode=True, runner=runner)
    rc, out, _ = gate.runner(["systemctl", "show", "--property=LoadState,UnitFileState,ActiveState", "--"] + units)
    blocks = [dict(line.split("=", 1) for line in block.splitlines() if "=" in line)
              for block in out.strip().split("\n\n")] if rc == 0 else []
    if len(blocks) != len(units):
        return {unit: {"enabled": _state(gate, "is-enabled", unit), "active": _state(gate, "is-active", unit)}
                for unit in units}
    return {unit: {"enabled": MISSING[0] if block.get("LoadState") == "not-found"
                   else block.get("UnitFileState") or MISSING[1],
                   "active": block.get("ActiveState") or MISSING[1]}
            for unit, block in zip(units, blocks)}


def apply_unit(root, unit, files, enabled, started, gate):
    """Install the unit's files, reload systemd when any changed, enable or disable it, restart
    it when started is asked and a file changed or it is not active, stop it when started is
    not asked and it runs (or waits to restart)."""
    if root not in ("/", ""):
        raise TuningError("unit %s: systemctl manages the running system only" % unit)
    installed = install(root, files, gate)
    before = {"enabled": _state(gate, "is-enabled", unit), "active": _state(gate, "is-active", unit)}
    # A unit a package ships (no files of ours to write) must be there and enableable: else
    # systemctl fails after the plan (never under --check), or the enable never sticks.
    if not installed["changed"] and before["enabled"] in MISSING:
        raise TuningError("%s: no such unit on this host (systemctl is-enabled: %s)" % (unit, before["enabled"]))
    if not installed["changed"] and enabled and before["enabled"] in NOT_ENABLEABLE:
        raise TuningError("%s: systemctl cannot enable it to start at boot (is-enabled: %s)"
                          % (unit, before["enabled"]))
    after = dict(before)
    if installed["changed"]:
        gate.run_or_fail(["systemctl", "daemon-reload"])
    wanted = "enabled" if enabled else "disabled"
    if before["enabled"] != wanted and (enabled or before["enabled"] == "enabled"):
        gate.run_or_fail(["systemctl", "enable" if enabled else "disable", unit])
        after["enabled"] = wanted
    if started and (installed["changed"] or before["active"] != "active"):
        gate.run_or_fail(["systemctl", "restart", unit])
        after["active"] = "active"
    elif not started and before["active"] in RUNNING:
        gate.run_or_fail(["systemctl", "stop", unit])
        after["active"] = "inactive"
    changed = installed["changed"] or after != before
    return {"changed": changed, "before": before, "after": after, "files": installed["files"],
            "diff": installed["diff"],
            "msg": "%s: %s" % (unit, ", ".join(installed["files"]) + " written" if installed["files"]
                               else "files in place" if files else "%(enabled)s, %(active)s" % after)}
