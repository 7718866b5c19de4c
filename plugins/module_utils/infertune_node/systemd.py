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


def _ours(unit, files, wanted_by, drop_exec_args):
    """The paths the knob writes: its files, or a packaged unit's drop-in."""
    paths = [str(spec["path"]) for spec in files]
    if not files and (wanted_by or drop_exec_args):
        paths.append("%s/%s.d/infertune.conf" % (SYSTEM_DIR, unit))
    return paths


def _wants(unit, wanted_by):
    return "%s/%s.wants/%s" % (SYSTEM_DIR, wanted_by, unit) if wanted_by else None


def _missing_dirs(root, path):
    """The directories above path that do not exist yet, outermost first."""
    missing, directory = [], os.path.dirname(path)
    while directory not in ("/", "") and not os.path.isdir(sysfs.path(root, directory)):
        missing.insert(0, directory)
        directory = os.path.dirname(directory)
    return missing


def original(root, args, runner=None):
    """The unit's enablement and state, the directories the knob's files create, and whether the
    .wants link existed. The files themselves are infertune's by their names (a unit of its own, its
    tool and library, a drop-in named infertune.conf): revert removes them."""
    gate = Gate(check_mode=True, runner=runner)
    paths = _ours(args["unit"], args["files"], args["wanted_by"], args["drop_exec_args"])
    wants = _wants(args["unit"], args["wanted_by"])
    return {"enabled": _state(gate, "is-enabled", args["unit"]), "active": _state(gate, "is-active", args["unit"]),
            "dirs": {directory: True for path in paths for directory in _missing_dirs(root, path)},
            "wants": {wants: os.path.lexists(sysfs.path(root, wants))} if wants else {}}


def _removable(path):
    """A path revert may remove whole: absolute, normalized, below a top-level directory."""
    if not isinstance(path, str) or not path.startswith("/") or os.path.normpath(path) != path or path.count("/") < 2:
        raise TuningError("remove: %r is not an absolute path below a top-level directory" % (path,))
    return path


def revert_unit(root, unit, files, wanted_by, drop_exec_args, remove, saved, gate):
    """A unit of infertune's own (files of ours) stopped, disabled and its files removed, with the
    directories they created and the paths its program wrote (remove); a packaged unit's drop-in and
    .wants link of ours removed, its enablement and state back to the recorded ones (restarted as
    shipped where it ran and its drop-in went). daemon-reload after any file. Without a record the
    files of ours go; a packaged unit's enablement, state and .wants link, and the directories, are
    left."""
    if root not in ("/", ""):
        raise TuningError("unit %s: systemctl manages the running system only" % unit)
    own = bool(files)
    remove = [_removable(path) for path in remove]
    writes = len(gate.actions)
    before = {"enabled": _state(gate, "is-enabled", unit), "active": _state(gate, "is-active", unit)}
    after = dict(before)
    if own and before["active"] in RUNNING:
        gate.run_or_fail(["systemctl", "stop", unit])
        after["active"] = "inactive"
    if own and before["enabled"] == "enabled":
        gate.run_or_fail(["systemctl", "disable", unit])
        after["enabled"] = "disabled"
    touched = [path for path in _ours(unit, files, wanted_by, drop_exec_args) if os.path.lexists(sysfs.path(root, path))]
    touched += [path for path, existed in sorted(((saved or {}).get("wants") or {}).items())
                if not existed and os.path.lexists(sysfs.path(root, path))]
    # Outermost first: a directory infertune made goes whole (a tool's __pycache__ with it).
    for path in sorted(((saved or {}).get("dirs") or {}), key=len) + remove:
        if os.path.lexists(sysfs.path(root, path)) and not any(path.startswith(gone + "/") for gone in touched):
            touched.append(path)
    for path in touched:
        gate.remove(sysfs.path(root, path))
    if touched:
        gate.run_or_fail(["systemctl", "daemon-reload"])
        if own:
            after = {"enabled": MISSING[0], "active": "inactive"}
    left = ""
    if not own and saved is None:
        left = "; its enablement and state left (%s): no record of them before infertune" % words.unit(before)
    elif not own:
        wanted = {key: saved.get(key, before[key]) for key in ("enabled", "active")}
        if before["enabled"] != wanted["enabled"] and {before["enabled"], wanted["enabled"]} <= {"enabled", "disabled"}:
            gate.run_or_fail(["systemctl", "enable" if wanted["enabled"] == "enabled" else "disable", unit])
            after["enabled"] = wanted["enabled"]
        if wanted["active"] in RUNNING and (before["active"] not in RUNNING or touched):
            gate.run_or_fail(["systemctl", "restart", unit])
            after["active"] = "active"
        elif wanted["active"] not in RUNNING and before["active"] in RUNNING:
            gate.run_or_fail(["systemctl", "stop", unit])
            after["active"] = "inactive"
    done = ("%s removed" % ", ".join(touched[:3]) + (" and %d more" % (len(touched) - 3) if len(touched) > 3 else "")
            if touched else "no file of infertune's")
    return {"changed": len(gate.actions) > writes, "before": before, "after": after, "files": touched,
            "msg": "%s: %s%s" % (unit, done, left)}


KIND = Kind("systemd_unit", lambda root, a, gate: apply_unit(root, a["unit"], a["files"], a["enabled"], a["started"],
                                                             gate, a["wanted_by"], a["drop_exec_args"]),
            {"unit": (str, REQUIRED), "files": (list, []), "enabled": (bool, True), "started": (bool, False),
             "wanted_by": (str, None), "drop_exec_args": (list, None), "remove": (list, [])},
            say=words.mapping(words.unit), original=original,
            revert=lambda root, a, saved, gate: revert_unit(root, a["unit"], a["files"], a["wanted_by"],
                                                            a["drop_exec_args"], a["remove"], saved, gate))
