"""Kernel metapackages held while infertune pins the kernel (apt-mark hold), and the holds it set
released when asked; holds set by others are left alone. Read from dpkg's status file."""
import os
import re

from . import original, sysfs
from .kind import REQUIRED, Kind
from .packages import STATUS

# The metapackages that would move a host to a newer kernel (and its NVIDIA module) at the
# next `apt upgrade` or unattended-upgrades run: held while infertune pins the kernel.
KERNEL_METAPACKAGE = re.compile(r"^(linux-image-(amd64|arm64|generic|virtual)\S*|linux-(generic|virtual|headers-generic)"
                                r"\S*|linux-headers-(amd64|arm64)|linux-modules-nvidia-\d+(-server)?-generic\S*"
                                r"|proxmox-default-kernel|proxmox-kernel-\d+\.\d+|pve-kernel-\d+\.\d+)$")
HOLDS = "/var/lib/infertune/kernel-holds"


def _selections(root):
    """{name: held} of the installed packages (dpkg's want flag hold)."""
    found = {}
    for stanza in (sysfs.read(root, STATUS) or "").split("\n\n"):
        fields = dict(line.split(": ", 1) for line in stanza.splitlines() if ": " in line and line[0] != " ")
        status = fields.get("Status", "").split()
        if fields.get("Package") and status[-1:] == ["installed"]:
            found[fields["Package"]] = status[0] == "hold"
    return found


def apply_kernel_hold(root, hold, gate):
    """Hold the installed kernel metapackages (apt-mark hold), or release the holds infertune set
    (recorded in HOLDS; holds set by others are left alone)."""
    selections = _selections(root)
    metas = sorted(name for name in selections if KERNEL_METAPACKAGE.match(name))
    ours = [name for name in (sysfs.read(root, HOLDS) or "").split() if selections.get(name)]
    before = [name for name in metas if selections[name]]
    if hold:
        change, argv, record = [n for n in metas if not selections[n]], "hold", sorted(set(ours) | set(metas) - set(before))
    else:
        change, argv, record = ours, "unhold", []
    if change:
        gate.write_file(sysfs.path(root, HOLDS), "".join(name + "\n" for name in record))
        gate.run_or_fail(["apt-mark", argv] + change)
    after = sorted(set(before) | set(change)) if hold else sorted(set(before) - set(change))
    msg = ("apt holds %s: apt upgrade and unattended-upgrades leave the kernel as the rollout set it"
           % (", ".join(after) or "no kernel metapackage (none installed)") if hold
           else "infertune holds no kernel metapackage%s" % (" (released %s)" % ", ".join(change) if change else ""))
    return {"changed": bool(change), "before": ", ".join(before) or "none held", "after": ", ".join(after) or "none held",
            "msg": msg}


def revert_kernel_hold(root, gate):
    """The holds infertune set released (HOLDS is their record; holds set by others are left), and
    HOLDS removed."""
    result = apply_kernel_hold(root, False, gate)
    if result["changed"]:
        result["differs"] = "%s -> %s" % (result["before"], result["after"])
    if os.path.exists(sysfs.path(root, HOLDS)):
        gate.remove(sysfs.path(root, HOLDS))
        result["changed"] = True
        original.tidy(root, gate, gone=[sysfs.path(root, HOLDS)])
    return result


KIND = Kind("apt_hold", lambda root, a, gate: apply_kernel_hold(root, a["hold"], gate), {"hold": (bool, REQUIRED)},
            say=lambda value: str(value) if value == "none held" else "held: %s" % value,
            revert=lambda root, a, saved, gate: revert_kernel_hold(root, gate))
