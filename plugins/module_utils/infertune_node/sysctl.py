"""Kernel parameters: their running values in /proc/sys and one sysctl.d file for every boot."""
import os
import re

from . import sysfs
from .gate import TuningError

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
