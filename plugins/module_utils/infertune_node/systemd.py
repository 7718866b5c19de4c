"""A unit's files, boot-time enablement and running state, through systemctl."""
import os

from . import sysfs, words
from .files import install
from .gate import Gate, TuningError
from .kind import REQUIRED, Kind

# What is-enabled says of a unit no file defines: "not-found", or on older systemd nothing
# on stdout and a non-zero status ("unknown" here; the error goes to stderr).
MISSING = ("not-found", "unknown")
# States `systemctl enable` cannot change: no [Install] section of the unit's own (Ubuntu's
# nvidia-persistenced.service is static), made by a generator, or runtime-only.
NOT_ENABLEABLE = ("static", "indirect", "generated", "transient")
# is-active of a unit that runs or will run again: waiting to restart after a crash
# (Restart=on-failure) reads "activating".
RUNNING = ("active", "activating", "reloading")
# Where our drop-in for a packaged unit and its .wants link go.
SYSTEM_DIR = "/etc/systemd/system"
TRUE = ("1", "yes", "true", "on")
# What a host without systemd answers every unit question with.
NO_SYSTEMCTL = "systemctl not found (this host does not run systemd)"


def _fragment(root, unit, gate):
    """[(key, value)] of the unit file the package ships (drop-ins left out), [] when none."""
    rc, out, err = gate.runner(["systemctl", "show", "--property=FragmentPath", "--value", "--", unit])
    path = out.strip() if rc == 0 else ""
    if not path:
        return []
    try:
        with open(sysfs.path(root, path)) as handle:
            text = handle.read().replace("\\\n", " ")  # continuation lines joined, as systemd reads them
    except OSError as exc:
        raise TuningError("%s: cannot read its unit file %s: %s" % (unit, path, exc.strerror)) from exc
    return [tuple(part.strip() for part in line.split("=", 1)) for line in text.splitlines()
            if "=" in line and not line.lstrip().startswith(("#", ";"))]


def vendor_dropin(root, unit, drop_exec_args, gate):
    """Content of the drop-in that makes a packaged unit run as asked, or None when it needs none:
    its ExecStart again without drop_exec_args (Ubuntu's nvidia-persistenced carries
    --no-persistence-mode), and StopWhenUnneeded=no (Ubuntu's stops it once no device wants it,
    even when started by hand or by a target's .wants link)."""
    fragment = _fragment(root, unit, gate)
    starts = [value for key, value in fragment if key == "ExecStart"]
    kept = [" ".join(word for word in value.split() if word not in drop_exec_args) for value in starts]
    stop_when_unneeded = any(k == "StopWhenUnneeded" and v.lower() in TRUE for k, v in fragment)
    if kept == starts and not stop_when_unneeded:
        return None
    reasons = (("kept running", stop_when_unneeded), ("without " + " ".join(drop_exec_args), kept != starts))
    lines = ["# managed by infertune: %s as its package ships it, but %s"
             % (unit, " and ".join(why for why, cond in reasons if cond))]
    if stop_when_unneeded:
        lines += ["[Unit]", "StopWhenUnneeded=no"]
    if kept != starts:
        lines += ["[Service]", "ExecStart="] + ["ExecStart=" + value for value in kept]
    return "\n".join(lines) + "\n"


def _state(gate, verb, unit):
    # Read-only queries run in check mode too; an unknown unit answers non-zero with a word.
    rc, out, err = gate.runner(["systemctl", verb, unit])
    if rc == 127:
        raise TuningError(NO_SYSTEMCTL)
    return out.strip() or ("unknown" if rc else "")


def unit_states(units, runner):
    """{unit: {enabled, active}}, read-only, as is-enabled and is-active say them: one
    `systemctl show` for every unit (its blocks come in the order asked), else one query each."""
    units = list(units)
    if not units:
        return {}
    gate = Gate(check_mode=True, runner=runner)
    rc, out, err = gate.runner(["systemctl", "show", "--property=LoadState,UnitFileState,ActiveState", "--"] + units)
    if rc == 127:
        # Said once per unit as a state no unit has; applying one fails with NO_SYSTEMCTL.
        return {unit: {"enabled": NO_SYSTEMCTL, "active": NO_SYSTEMCTL} for unit in units}
    blocks = [dict(line.split("=", 1) for line in block.splitlines() if "=" in line)
              for block in out.strip().split("\n\n")] if rc == 0 else []
    if len(blocks) != len(units):
        return {unit: {"enabled": _state(gate, "is-enabled", unit), "active": _state(gate, "is-active", unit)}
                for unit in units}
    return {unit: {"enabled": MISSING[0] if block.get("LoadState") == "not-found"
                   else block.get("UnitFileState") or MISSING[1],
                   "active": block.get("ActiveState") or MISSING[1]}
            for unit, block in zip(units, blocks)}


def _dropin_files(root, unit, drop_exec_args, gate):
    """Our drop-in for a packaged unit as a file to install ([] when it needs none); a drop-in
    left from a package that needed one is removed."""
    content = vendor_dropin(root, unit, drop_exec_args, gate)
    path = "%s/%s.d/infertune.conf" % (SYSTEM_DIR, unit)
    if content is not None:
        return [{"path": path, "content": content}], False
    if os.path.exists(sysfs.path(root, path)):
        gate.run_or_fail(["rm", "-f", "--", sysfs.path(root, path)])
        return [], True
    return [], False


def apply_unit(root, unit, files, enabled, started, gate, wanted_by=None, drop_exec_args=None):
    """Install the unit's files, reload systemd when any changed, enable or disable it, restart
    it when started is asked and a file changed or it is not active, stop it when started is
    not asked and it runs (or waits to restart). A packaged unit (no files) gets a drop-in when
    drop_exec_args or wanted_by ask for one (see vendor_dropin); a static one (no [Install]
    section) starts at boot through a link in wanted_by's .wants (add-wants)."""
    if root not in ("/", ""):
        raise TuningError("unit %s: systemctl manages the running system only" % unit)
    removed = False
    if not files and (wanted_by or drop_exec_args):
        files, removed = _dropin_files(root, unit, list(drop_exec_args or []), gate)
    installed = install(root, files, gate)
    installed["changed"] = installed["changed"] or removed
    before = {"enabled": _state(gate, "is-enabled", unit), "active": _state(gate, "is-active", unit)}
    # A unit a package ships (no files of ours to write) must be there and enableable: else
    # systemctl fails after the plan (never under --check), or the enable never sticks.
    if not installed["changed"] and before["enabled"] in MISSING:
        raise TuningError("%s: no such unit on this host (systemctl is-enabled: %s)" % (unit, before["enabled"]))
    static = before["enabled"] == "static" and wanted_by
    if not installed["changed"] and enabled and before["enabled"] in NOT_ENABLEABLE and not static:
        raise TuningError("%s: systemctl cannot enable it to start at boot (is-enabled: %s)"
                          % (unit, before["enabled"]))
    after = dict(before)
    if installed["changed"]:
        gate.run_or_fail(["systemctl", "daemon-reload"])
    wanted = "enabled" if enabled else "disabled"
    if static and enabled:
        # The link systemctl enable would make from an [Install] section (is-enabled then says
        # enabled); looked for too, so a systemd that still says static is not linked each run.
        if not os.path.lexists(sysfs.path(root, "%s/%s.wants/%s" % (SYSTEM_DIR, wanted_by, unit))):
            gate.run_or_fail(["systemctl", "add-wants", wanted_by, unit])
            after["enabled"] = wanted
    elif before["enabled"] != wanted and (enabled or before["enabled"] == "enabled"):
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


KIND = Kind("systemd_unit", lambda root, a, gate: apply_unit(root, a["unit"], a["files"], a["enabled"], a["started"],
                                                             gate, a["wanted_by"], a["drop_exec_args"]),
            {"unit": (str, REQUIRED), "files": (list, []), "enabled": (bool, True), "started": (bool, False),
             "wanted_by": (str, None), "drop_exec_args": (list, None)}, say=words.mapping(words.unit))
