"""One kernel parameter: its running value in /proc/sys and its sysctl.d file for every boot."""
import os

from . import sysfs
from .gate import TuningError

HEADER = "# managed by infertune (sysctl): read by systemd-sysctl at every boot.\n"


def proc_path(name):
    return "/proc/sys/" + name.replace(".", "/")


def apply_sysctl(root, name, value, path, gate):
    value = str(value)
    running = sysfs.read(root, proc_path(name))
    if running is None:
        raise TuningError("%s does not exist on this kernel (no %s)" % (name, proc_path(name)))
    content = HEADER + "%s = %s\n" % (name, value)
    target = sysfs.path(root, path)
    old = ""
    if os.path.exists(target):
        with open(target) as handle:
            old = handle.read()
    if old != content:
        gate.write_file(target, content)
    runtime = running != value
    if runtime:
        gate.write_sysfs(sysfs.path(root, proc_path(name)), value + "\n")
    after = value if gate.check_mode else sysfs.read(root, proc_path(name))
    if after != value:
        raise TuningError("%s reads %s after writing %s" % (name, after, value))
    return {"changed": runtime or old != content, "before": running, "after": after,
            "runtime_pending": runtime, "path": path,
            "diff": {"before": old, "after": content, "before_header": path, "after_header": path},
            "msg": "%s = %s, persisted in %s" % (name, value, path)}
