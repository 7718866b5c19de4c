"""Whether a Debian package is installed, from dpkg's status file (read-only).

Installing runs through apt (the kernel role); the plan only needs to know.
"""
from . import sysfs
from .gate import TuningError

STATUS = "/var/lib/dpkg/status"


def installed_version(root, name):
    """The installed version of package name, or None."""
    text = sysfs.read(root, STATUS) or ""
    for stanza in text.split("\n\n"):
        fields = dict(line.split(": ", 1) for line in stanza.splitlines() if ": " in line and line[0] != " ")
        if fields.get("Package") == name and fields.get("Status", "").endswith(" installed"):
            return fields.get("Version")
    return None


def plan_package(root, name, gate):
    version = installed_version(root, name)
    if version is None and not gate.check_mode:
        raise TuningError("%s is not installed: install it with apt (the kernel role does)" % name)
    return {"changed": version is None, "before": version, "after": version or "(installed by apt)",
            "msg": "%s %s" % (name, "installed (%s)" % version if version else "to be installed with apt")}
