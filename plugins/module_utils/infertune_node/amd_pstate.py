"""amd_pstate operating mode (active/passive/guided) at runtime."""
from . import cpu, sysfs
from .gate import TuningError
from .kind import REQUIRED, Kind

STATUS = cpu.CPU_DIR + "/amd_pstate/status"
MODES = ("active", "passive", "guided")


def apply_mode(root, mode, gate):
    if mode not in MODES:
        raise TuningError("mode=%r is not one of %s" % (mode, ", ".join(MODES)))
    result = {"changed": False, "before": None, "after": None, "amd_pstate_reboot_required": False}
    vendor = cpu.vendor(root)
    if vendor != "AuthenticAMD":
        result["skipped_reason"] = "CPU vendor is %s; amd_pstate exists only on AMD CPUs" % vendor
        result["msg"] = result["skipped_reason"]
        return result
    current = sysfs.read(root, STATUS)
    if current is None:
        # EPYC does not load amd-pstate unless the command line asks for it.
        result["amd_pstate_reboot_required"] = True
        result["msg"] = ("the amd_pstate driver is not loaded (no %s); the kernel command line "
                         "amd_pstate=%s applies at next boot" % (STATUS, mode))
        return result
    result["before"] = current
    if current != mode:
        gate.write_sysfs(sysfs.path(root, STATUS), mode)
        result["changed"] = True
    result["after"] = mode if gate.check_mode else sysfs.read(root, STATUS)
    if result["after"] != mode:
        raise TuningError("amd_pstate status reads %r after writing %r" % (result["after"], mode))
    result["msg"] = "amd_pstate mode %s" % mode
    return result


KIND = Kind("amd_pstate", lambda root, a, gate: apply_mode(root, a["mode"], gate), {"mode": (str, REQUIRED)},
            say=lambda value: "mode %s" % value, nothing="driver not loaded")
