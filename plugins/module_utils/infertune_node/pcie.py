"""PCIe Max Read Request Size (Device Control bits 14:12) of GPU endpoints.

Reads walk the capability list in the sysfs `config` file; writes go only
through `setpci` with the mask 7000, so Function-Level Reset (bit 15), Max
Payload and the error-reporting bits are never touched.
"""
import os
import re

from . import sysfs, words
from .gate import TuningError
from .kind import REQUIRED, Kind

PCI_DEVICES = "/sys/bus/pci/devices"
# NVIDIA's PCI vendor id and the classes of its GPU functions (VGA, 3D controller; never the
# audio function, 0x0403): the knobs' and gates' defaults, where a catalog entry names none.
NVIDIA = "0x10de"
GPU_CLASSES = ("0x0300", "0x0302")
VALUES = (128, 256, 512, 1024, 2048, 4096)
MRRS_MASK = 0x7000
PCIE_CAP_ID = 0x10
UPSTREAM_PORT = 0x5  # Device/Port Type of a switch upstream port
BDF_RE = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
LOCKDOWN_REFUSES = ("integrity", "confidentiality")


def setpci_prefix(root):
    """Plain setpci on a real root; for another root point pciutils at its sysfs tree."""
    if root in ("/", ""):
        return ["setpci"]
    return ["setpci", "-A", "linux-sysfs", "-O", "sysfs.path=%s" % sysfs.path(root, "/sys/bus/pci")]


def find_devices(root, vendor, classes):
    """BDFs whose vendor matches and whose base class + subclass (class >> 8) is listed.

    SR-IOV virtual functions (a `physfn` link) are never selected: their Device Control
    fields such as MaxReadReq are reserved, and the physical function carries the setting.
    """
    wanted = {int(c, 16) for c in classes}
    found = []
    for bdf in sysfs.entries(root, PCI_DEVICES + "/*"):
        if os.path.lexists(sysfs.path(root, "%s/%s/physfn" % (PCI_DEVICES, bdf))):
            continue
        dev_vendor = sysfs.read(root, "%s/%s/vendor" % (PCI_DEVICES, bdf))
        dev_class = sysfs.read(root, "%s/%s/class" % (PCI_DEVICES, bdf))
        if dev_vendor is None or dev_class is None:
            continue
        if int(dev_vendor, 16) == int(vendor, 16) and int(dev_class, 16) >> 8 in wanted:
            found.append(bdf)
    return found


def ports_above(root, bdf):
    """Bridges between a device and the host bridge, nearest first, from the sysfs nesting
    (/sys/devices/pci0000:00/<root port>/<switch up>/<switch down>/<device>)."""
    parent = os.path.dirname(os.path.realpath(sysfs.path(root, "%s/%s" % (PCI_DEVICES, bdf))))
    ports = []
    while BDF_RE.match(os.path.basename(parent)):
        ports.append(os.path.basename(parent))
        parent = os.path.dirname(parent)
    return ports


def read_config(root, bdf):
    try:
        with open(sysfs.path(root, "%s/%s/config" % (PCI_DEVICES, bdf)), "rb") as handle:
            config = handle.read()
    except OSError as exc:
        raise TuningError("%s: PCI config space unreadable (%s)" % (bdf, exc.strerror)) from exc
    if len(config) < 64 or config[:4] == b"\xff\xff\xff\xff":
        raise TuningError("%s: PCI config space reads as all 0xff or is truncated; "
                          "the device may have fallen off the bus" % bdf)
    return config


def word(config, offset):
    return int.from_bytes(config[offset:offset + 2], "little")


def dword(config, offset):
    return int.from_bytes(config[offset:offset + 4], "little")


def ext_cap_offset(config, cap_id):
    """Offset of a PCIe extended capability (list from 0x100), or None."""
    offset, seen = 0x100, set()
    while 0x100 <= offset <= len(config) - 4 and offset not in seen:
        seen.add(offset)
        header = dword(config, offset)
        if header in (0, 0xFFFFFFFF):
            return None
        if header & 0xFFFF == cap_id:
            return offset
        offset = (header >> 20) & 0xFFC
    return None


def pcie_cap_offset(config):
    """Offset of the PCI Express capability, or None when the device has none."""
    if not word(config, 0x06) & 0x10:
        return None
    offset, seen = config[0x34] & 0xFC, set()
    while offset and offset not in seen and offset + 2 <= len(config):
        seen.add(offset)
        if config[offset] == PCIE_CAP_ID:
            return offset
        offset = config[offset + 1] & 0xFC
    return None


def port_type(config):
    """Device/Port Type of the PCI Express capability (4 root port, 5 switch upstream, 6 downstream), or None."""
    offset = pcie_cap_offset(config)
    if offset is None or offset + 4 > len(config):
        return None
    return (word(config, offset + 2) >> 4) & 0xF


def device_control(config, bdf):
    offset = pcie_cap_offset(config)
    if offset is None:
        raise TuningError("%s has no PCI Express capability; MaxReadReq does not apply to it" % bdf)
    if offset + 10 > len(config):
        raise TuningError("%s: Device Control lies beyond the readable config space (need root)" % bdf)
    return word(config, offset + 8)


def mrrs_bytes(devctl):
    return 128 << ((devctl & MRRS_MASK) >> 12)


def encode(value):
    return VALUES.index(value) << 12


def read_mrrs(root, bdf):
    return mrrs_bytes(device_control(read_config(root, bdf), bdf))


def refused(root, bdf, knob, detail):
    """The error for a config write that did not take, naming lockdown when it is the cause."""
    mode = sysfs.lockdown(root)
    if mode in LOCKDOWN_REFUSES:
        return TuningError("%s: PCI config write refused: kernel lockdown is '%s', which forbids config "
                           "space writes from user space; %s can only change with lockdown "
                           "off (Secure Boot policy)" % (bdf, mode, knob))
    return TuningError("%s: writing %s failed: %s" % (bdf, knob, detail))


def apply_mrrs(root, value, vendor, classes, gate, setpci=None):
    if value not in VALUES:
        raise TuningError("value=%r is not one of %s" % (value, ", ".join(map(str, VALUES))))
    prefix = setpci or setpci_prefix(root)
    devices = find_devices(root, vendor, classes)
    # Read every device before writing any: a dead GPU fails the whole call up front.
    before = {bdf: read_mrrs(root, bdf) for bdf in devices}
    after = {}
    writes_before = len(gate.actions)
    for bdf in devices:
        if before[bdf] != value:
            argv = prefix + ["-s", bdf, "CAP_EXP+8.w=%04x:%04x" % (encode(value), MRRS_MASK)]
            result = gate.run(argv)
            if result is not None and result[0] != 0:
                raise refused(root, bdf, "MaxReadReq", result[2].strip() or "rc=%d" % result[0])
        after[bdf] = value if gate.check_mode else read_mrrs(root, bdf)
        if after[bdf] != value:
            # setpci only warns when sysfs refuses the write, so the read-back decides.
            raise refused(root, bdf, "MaxReadReq", "read back %d bytes after writing %d" % (after[bdf], value))
    msg = "MaxReadReq %d bytes on %d device(s)" % (value, len(devices))
    if not devices:
        msg = "no PCI device of vendor %s with class %s" % (vendor, "/".join(classes))
    return {"changed": len(gate.actions) > writes_before, "before": before, "after": after,
            "devices": len(devices), "msg": msg}


def original(root, args):
    """{device: MaxReadReq in bytes} of the devices the knob selects."""
    return {bdf: read_mrrs(root, bdf) for bdf in find_devices(root, args["vendor"], args["classes"])}


def revert_mrrs(root, vendor, classes, saved, gate, setpci=None):
    """Each recorded device's MaxReadReq back to what it had (the same masked write as apply's).
    Without a record it is left: firmware sets it at boot, and no kernel default says what it was."""
    prefix = setpci or setpci_prefix(root)
    if saved is None:
        values = {bdf: read_mrrs(root, bdf) for bdf in find_devices(root, vendor, classes)}
        return {"changed": False, "before": values, "after": values, "devices": len(values), "runtime_pending": False,
                "msg": "no record of MaxReadReq before infertune: left as it is (the next boot's is the firmware's)"}
    present = [bdf for bdf in sorted(saved) if os.path.exists(sysfs.path(root, "%s/%s/config" % (PCI_DEVICES, bdf)))]
    before = {bdf: read_mrrs(root, bdf) for bdf in present}
    after = {}
    for bdf in present:
        value = int(saved[bdf])
        if before[bdf] != value:
            result = gate.run(prefix + ["-s", bdf, "CAP_EXP+8.w=%04x:%04x" % (encode(value), MRRS_MASK)])
            if result is not None and result[0] != 0:
                raise refused(root, bdf, "MaxReadReq", result[2].strip() or "rc=%d" % result[0])
        after[bdf] = value if gate.check_mode else read_mrrs(root, bdf)
        if after[bdf] != value:
            raise refused(root, bdf, "MaxReadReq", "read back %d bytes after writing %d" % (after[bdf], value))
    changed = before != after
    msg = "MaxReadReq as before infertune on %d device(s)" % len(present) + "".join(
        "; %s recorded but gone" % bdf for bdf in sorted(set(saved) - set(present)))
    return {"changed": changed, "before": before, "after": after, "devices": len(present), "runtime_pending": changed,
            "msg": msg}


KIND = Kind("pcie_mrrs", lambda root, a, gate: apply_mrrs(root, a["value"], a["vendor"], a["classes"], gate),
            {"value": (int, REQUIRED), "vendor": (str, NVIDIA), "classes": (list, list(GPU_CLASSES))},
            say=words.mapping(lambda value: words.per_device(value, lambda n: "%s bytes" % n, "device")),
            original=original, revert=lambda root, a, saved, gate: revert_mrrs(root, a["vendor"], a["classes"], saved, gate))
