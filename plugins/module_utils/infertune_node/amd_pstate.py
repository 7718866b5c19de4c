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


def original(root, args):
    """The mode the host runs (None: amd_pstate not loaded)."""
    return {"status": sysfs.read(root, STATUS)}


def revert_mode(root, saved, gate):
    """The mode back to the recorded one; without a record (or with the driver not loaded then or
    now) the mode is left: the kernel's default mode depends on its build and command line."""
    result = {"changed": False, "before": None, "after": None}
    vendor = cpu.vendor(root)
    if vendor != "AuthenticAMD":
        result["msg"] = result["skipped_reason"] = "CPU vendor is %s; amd_pstate exists only on AMD CPUs" % vendor
        return result
    current = result["before"] = result["after"] = sysfs.read(root, STATUS)
    wanted = (saved or {}).get("status")
    if current is None:
        result["msg"] = "the amd_pstate driver is not loaded: no mode to put back"
        return result
    if wanted is None:
        result["msg"] = ("amd_pstate mode left %s: %s" % (current, "no record of the mode before infertune" if saved is None
                         else "the driver was not loaded before infertune (the next boot's is the kernel's)"))
        return result
    if current != wanted:
        gate.write_sysfs(sysfs.path(root, STATUS), wanted)
        result["changed"] = True
    result["after"] = wanted if gate.check_mode else sysfs.read(root, STATUS)
    if result["after"] != wanted:
        raise TuningError("amd_pstate status reads %r after writing %r" % (result["after"], wanted))
    result["runtime_pending"] = result["changed"]
    result["msg"] = "amd_pstate mode %s, as before infertune" % wanted
    return result


KIND = Kind("amd_pstate", lambda root, a, gate: apply_mode(root, a["mode"], gate), {"mode": (str, REQUIRED)},
            say=lambda value: "mode %s" % value, nothing="driver not loaded",
            original=original, revert=lambda root, a, saved, gate: revert_mode(root, saved, gate))
