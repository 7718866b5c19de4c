"""Kernel parameters: their running values in /proc/sys and one sysctl.d file for every boot."""
import os
import re

from . import sysfs, words
from .gate import TuningError
from .kind import REQUIRED, Kind, Rule, is_int
from .original import give_back

HEADER = "# managed by infertune (sysctl): read by systemd-sysctl at every boot.\n"
# The dotted form alone: a name becomes a path under /proc/sys, so no slash and no empty part.
NAME = re.compile(r"[a-z0-9_]+(\.[A-Za-z0-9_-]+)+")


def proc_path(name):
    return "/proc/sys/" + name.replace(".", "/")


def _same(running, value):
    # Multi-field sysctls read back tab-separated ("4096\t87380"): compare the fields.
    return running is not None and running.split() == value.split()


def render(settings):
    return HEADER + "".join("%s = %s\n" % (item["name"], item["value"]) for item in settings)


def apply_sysctls(root, settings, path, gate):
    """Every {name, value} of settings live (one write per differing key) and in path, in order."""
    settings = [{"name": str(item["name"]), "value": str(item["value"])} for item in settings]
    bad = [item["name"] for item in settings if not NAME.fullmatch(item["name"])]
    if bad:
        raise TuningError("not a sysctl name: %s" % ", ".join(bad))
    running = {item["name"]: sysfs.read(root, proc_path(item["name"])) for item in settings}
    missing = [name for name, value in running.items() if value is None]
    if missing:
        # Checked before any write: a host either takes the whole list or nothing of it.
        raise TuningError("not on this kernel: %s" % ", ".join("%s (no %s)" % (n, proc_path(n)) for n in missing))
    content = render(settings)
    target = sysfs.path(root, path)
    old, existed = "", os.path.exists(target)
    if existed:
        with open(target) as handle:
            old = handle.read()
    if old != content:
        gate.write_file(target, content)
    differing = [item for item in settings if not _same(running[item["name"]], item["value"])]
    for item in differing:
        gate.write_sysfs(sysfs.path(root, proc_path(item["name"])), item["value"] + "\n")
    after = {item["name"]: item["value"] if gate.check_mode else sysfs.read(root, proc_path(item["name"]))
             for item in settings}
    wrong = ["%s reads %s after writing %s" % (item["name"], after[item["name"]], item["value"])
             for item in settings if not _same(after[item["name"]], item["value"])]
    if wrong:
        raise TuningError("; ".join(wrong))
    result = {"changed": bool(differing) or old != content, "before": running, "after": after,
              "runtime_pending": bool(differing), "path": path,
              "diff": {"before": old, "after": content, "before_header": path, "after_header": path},
              "msg": "%d sysctl%s live, persisted in %s" % (len(settings), "" if len(settings) == 1 else "s", path)}
    if old != content and not differing:
        # Every value runs already: the change is the file, which the plan and the report name.
        result["differs"] = "%s %s" % (path, "rewritten" if existed else "created")
    return result


# Names in the dotted form the host side takes (a name becomes a path under /proc/sys); values
# are what sysctl -n prints: words of this set separated by single spaces (multi-field sysctls),
# nothing a shell, a unit or sysctl.d would read as syntax.
_SYSCTL_VALUE = re.compile(r"[A-Za-z0-9_.,:/+=@-]+( [A-Za-z0-9_.,:/+=@-]+)*")


# Sysctls whose range the kernel documents: a value outside it would be refused by the kernel
# only when the runtime stage writes it, after the drain, rather than before any change.
SYSCTL_RANGES = {"kernel.numa_balancing": (0, 3), "vm.swappiness": (0, 200)}


def sysctl_settings():
    doc = ("a list of {name, value}: names dotted [a-z0-9_]+(.[A-Za-z0-9_-]+)+, each once; values"
           " [A-Za-z0-9_.,:/+=@-] words separated by single spaces; %s" % ", ".join(
               "%s %d-%d" % (name, low, high) for name, (low, high) in SYSCTL_RANGES.items()))

    def check(value, emit):
        if not isinstance(value, (list, tuple)):
            return
        seen = set()
        for index, item in enumerate(value):
            where = "[%d]" % index
            if not isinstance(item, dict) or set(item) != {"name", "value"}:
                emit("must be a mapping with the keys name and value, no other", where,
                     ", ".join(sorted(map(str, item))) if isinstance(item, dict) else item)
                continue
            name, setting = item["name"], item["value"]
            if not isinstance(name, str) or len(name) > 256 or not NAME.fullmatch(name):
                emit("name must be a dotted sysctl name [a-z0-9_]+(.[A-Za-z0-9_-]+)+", where + ".name", name)
            elif name in seen:
                emit("name must appear once (%s is set twice)" % name, where + ".name", name)
            seen.add(name)
            # A number is what it prints as; a boolean would become True, which no sysctl takes.
            if is_int(setting):
                setting = str(setting)
            if not isinstance(setting, str):
                emit("value must be a string or an integer", where + ".value", setting)
            elif len(setting) > 4096 or not _SYSCTL_VALUE.fullmatch(setting):
                emit("value must be [A-Za-z0-9_.,:/+=@-] words separated by single spaces", where + ".value", setting)
            elif name in SYSCTL_RANGES:
                low, high = SYSCTL_RANGES[name]
                if not (setting.isdigit() and low <= int(setting) <= high):
                    emit("value must be an integer %d-%d for %s" % (low, high, name), where + ".value", setting)
    return Rule(doc, check)


def _say(value):
    return "; ".join("%s: %s" % (key, item) for key, item in value.items()) if isinstance(value, dict) else str(value)


def _change(before, after, differs):
    """The sysctls whose value changes; none: the file alone, as the result's differs says it."""
    if not (isinstance(before, dict) and isinstance(after, dict)):
        return None
    changed = ["%s: %s%s%s" % (key, before.get(key) or "—", words.ARROW, value) for key, value in after.items()
               if before.get(key) != value]
    return "; ".join(changed) if changed else "%s live; %s" % (_say(after), differs or "sysctl.d file rewritten")


def original(root, args):
    """The sysctl.d file's content (None: absent) and the running value of each sysctl, as read."""
    names = [str(item["name"]) for item in args["settings"] if NAME.fullmatch(str(item["name"]))]
    return {"files": {args["path"]: sysfs.content(root, args["path"])},
            "live": {name: sysfs.read(root, proc_path(name)) for name in names
                     if sysfs.read(root, proc_path(name)) is not None}}


def revert_sysctls(root, path, saved, gate):
    """The sysctl.d file removed (or given back what it held before infertune), then each recorded
    sysctl's running value written back. Without a record the running values are left: the next boot
    gives what the other sysctl.d files, or the kernel, say."""
    files = dict((saved or {}).get("files") or {})
    files.setdefault(path, None)
    changed_files, diffs = give_back(root, files, saved, HEADER, gate)[1:]
    live = (saved or {}).get("live") or {}
    before = {name: sysfs.read(root, proc_path(name)) for name in live}
    differing = [name for name, value in live.items() if before[name] is not None and not _same(before[name], value)]
    for name in differing:
        gate.write_sysfs(sysfs.path(root, proc_path(name)), live[name] + "\n")
    after = {name: (live[name] if name in differing and gate.check_mode else sysfs.read(root, proc_path(name)))
             for name in live}
    wrong = ["%s reads %s after writing %s" % (n, after[n], live[n]) for n in differing if not _same(after[n], live[n])]
    if wrong:
        raise TuningError("; ".join(wrong))
    msg = (", ".join(changed_files) if changed_files else "no sysctl.d file of infertune's") + (
        "; %d sysctl%s as before infertune" % (len(live), "" if len(live) == 1 else "s") if saved is not None
        else "; running values left as they are: no record of them before infertune (the next boot gives the"
             " other sysctl.d files' or the kernel's)")
    result = {"changed": bool(differing or changed_files), "before": before, "after": after,
              "runtime_pending": bool(differing), "path": path, "diff": diffs, "msg": msg}
    if changed_files and not differing:
        result["differs"] = ", ".join(changed_files)
    return result


KIND = Kind("sysctl", lambda root, a, gate: apply_sysctls(root, a["settings"], a["path"], gate),
            {"settings": (list, REQUIRED), "path": (str, REQUIRED)}, say=_say, change=_change,
            makers={"sysctl_settings": sysctl_settings}, original=original,
            revert=lambda root, a, saved, gate: revert_sysctls(root, a["path"], saved, gate))
