"""ACS P2P Request/Completion Redirect on the bridges above the GPUs.

With the redirect bits set, root ports and switch downstream ports send every
GPU-to-GPU transfer up through the root complex (about half the bandwidth
between two GPUs on one switch). Only bits 2 and 3 of ACS Control are cleared,
through setpci with the mask 000c; the other ACS bits (source validation,
upstream forwarding, ...) and ports that lead to no GPU stay as they are.
"""
import os

from . import pcie, sysfs, words
from .gate import TuningError
from .kind import Kind

ACS_ID = 0x000D
CONTROL = 6  # ACS Control register, from the start of the capability
REDIRECT = 0x000C  # bit 2 P2P Request Redirect, bit 3 P2P Completion Redirect


def acs_control(root, bdf, config=None):
    """ACS Control word of a port, or None when it has no ACS capability."""
    config = config or pcie.read_config(root, bdf)
    if len(config) < 4096 and pcie.pcie_cap_offset(config) is not None:
        raise TuningError("%s: extended config space unreadable (%d bytes); reading ACS needs root"
                          % (bdf, len(config)))
    offset = pcie.ext_cap_offset(config, ACS_ID)
    return None if offset is None else pcie.word(config, offset + CONTROL)


def gpu_ports(root, vendor, classes):
    """{port BDF: [GPU BDFs below it]} for every bridge above a selected GPU, root ports first."""
    ports = {}
    for gpu in pcie.find_devices(root, vendor, classes):
        for port in reversed(pcie.ports_above(root, gpu)):
            ports.setdefault(port, []).append(gpu)
    return ports


def vfio_devices(root):
    """BDFs bound to vfio-pci, i.e. handed to virtual machines."""
    return [bdf for bdf in sysfs.entries(root, pcie.PCI_DEVICES + "/*")
            if os.path.basename(os.path.realpath(sysfs.path(root, "%s/%s/driver" % (pcie.PCI_DEVICES, bdf))))
            == "vfio-pci"]


def vfio_below(root, ports):
    """{vfio-pci device: [the PORTS above it]} for the devices handed to VMs below any of PORTS."""
    found = {}
    for bdf in vfio_devices(root):
        above = [port for port in pcie.ports_above(root, bdf) if port in ports]
        if above:
            found[bdf] = above
    return found


def _hex(value):
    return "0x%04x" % value


def apply_acs(root, vendor, classes, force, gate, setpci=None):
    """Clear ACS redirect on every port above the GPUs; {changed, before, after, ports, without_acs, msg}."""
    prefix = setpci or pcie.setpci_prefix(root)
    ports = gpu_ports(root, vendor, classes)
    # Read every port before writing any, so a port that cannot be read fails the call up front.
    configs = {bdf: pcie.read_config(root, bdf) for bdf in ports}
    control = {bdf: acs_control(root, bdf, config) for bdf, config in configs.items()}
    before = {bdf: value for bdf, value in control.items() if value is not None}
    todo = [bdf for bdf, value in before.items() if value & REDIRECT]
    vfio = vfio_below(root, todo)
    if vfio and not force:
        raise TuningError("ACS redirect left on at %s: %s bound to vfio-pci (passed to a VM); clearing redirect on "
                          "the port(s) above removes the isolation between the devices behind them. Unbind them, or "
                          "force the change (pcie_acs_force: true) if that isolation is not needed"
                          % (", ".join(todo), ", ".join("%s (below %s)" % (bdf, ", ".join(above))
                                                        for bdf, above in sorted(vfio.items()))))
    after = dict(before)
    for bdf in todo:
        result = gate.run(prefix + ["-s", bdf, "ECAP_ACS+%d.w=0000:%04x" % (CONTROL, REDIRECT)])
        if result is not None and result[0] != 0:
            raise pcie.refused(root, bdf, "ACS Control", result[2].strip() or "rc=%d" % result[0])
        after[bdf] = before[bdf] & ~REDIRECT if gate.check_mode else acs_control(root, bdf)
        if after[bdf] != before[bdf] & ~REDIRECT:
            # setpci only warns when sysfs refuses the write, so the read-back decides.
            raise pcie.refused(root, bdf, "ACS Control", "read back %s after clearing the redirect bits of %s"
                               % (_hex(after[bdf]), _hex(before[bdf])))
    gpus = {gpu for below in ports.values() for gpu in below}
    # A switch upstream port never carries ACS (the PCIe spec gives it none): no port to name.
    without = sorted(bdf for bdf in set(ports) - set(before) if pcie.port_type(configs[bdf]) != pcie.UPSTREAM_PORT)
    msg = ("ACS redirect off on %d port(s) above %d GPU(s)" % (len(before), len(gpus)) if ports
           else "not applicable: no root or switch port above any GPU (%s)" % (
               "the GPUs sit on a root bus" if pcie.find_devices(root, vendor, classes) else "no GPU found"))
    if without:
        msg += "; no ACS capability (nothing to clear) on %s" % ", ".join(without)
    return {"changed": bool(todo), "before": {b: _hex(v) for b, v in before.items()},
            "after": {b: _hex(v) for b, v in after.items()}, "ports": len(ports), "without_acs": without, "msg": msg}


def original(root, args):
    """{port: ACS Control} of every port above the GPUs that has the capability."""
    control = {bdf: acs_control(root, bdf) for bdf in gpu_ports(root, args["vendor"], args["classes"])}
    return {bdf: value for bdf, value in control.items() if value is not None}


def revert_acs(root, vendor, classes, saved, gate, setpci=None):
    """The redirect bits (2 and 3, and no other) of each recorded port back to what they were.
    Without a record they are left: the kernel sets them at boot as its IOMMU setup asks, which
    no file says."""
    prefix = setpci or pcie.setpci_prefix(root)
    if saved is None:
        values = {bdf: _hex(value) for bdf, value in original(root, {"vendor": vendor, "classes": classes}).items()}
        return {"changed": False, "before": values, "after": values, "runtime_pending": False,
                "msg": "no record of ACS Control before infertune: left as it is (the next boot sets what the kernel sets)"}
    present = [bdf for bdf in sorted(saved) if os.path.exists(sysfs.path(root, "%s/%s/config" % (pcie.PCI_DEVICES, bdf)))]
    before = {bdf: acs_control(root, bdf) for bdf in present}
    after = {}
    for bdf in present:
        want = (before[bdf] & ~REDIRECT) | (int(saved[bdf]) & REDIRECT)
        if before[bdf] != want:
            result = gate.run(prefix + ["-s", bdf, "ECAP_ACS+%d.w=%04x:%04x" % (CONTROL, want & REDIRECT, REDIRECT)])
            if result is not None and result[0] != 0:
                raise pcie.refused(root, bdf, "ACS Control", result[2].strip() or "rc=%d" % result[0])
        after[bdf] = want if gate.check_mode else acs_control(root, bdf)
        if after[bdf] != want:
            raise pcie.refused(root, bdf, "ACS Control", "read back %s after restoring the redirect bits of %s"
                               % (_hex(after[bdf]), _hex(int(saved[bdf]))))
    msg = "ACS redirect as before infertune on %d port(s)" % len(present) + "".join(
        "; %s recorded but gone" % bdf for bdf in sorted(set(saved) - set(present)))
    return {"changed": before != after, "before": {b: _hex(v) for b, v in before.items()},
            "after": {b: _hex(v) for b, v in after.items()}, "runtime_pending": before != after, "msg": msg}


KIND = Kind("pcie_acs", lambda root, a, gate: apply_acs(root, a["vendor"], a["classes"], a["force"], gate),
            {"vendor": (str, pcie.NVIDIA), "classes": (list, list(pcie.GPU_CLASSES)), "force": (bool, False)},
            say=words.mapping(lambda value: words.per_device(value, words.acs, "port")),
            original=original, revert=lambda root, a, saved, gate: revert_acs(root, a["vendor"], a["classes"], saved, gate))
