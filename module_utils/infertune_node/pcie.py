"""PCIe Max Read Request Size (Device Control bits 14:12) of GPU endpoints.

Reads walk the capability list in the sysfs `config` file; writes go only
through `setpci` with the mask 7000, so Function-Level Reset (bit 15), Max
Payload and the error-reporting bits are never touched.
"""
from . import sysfs
from .gate import TuningError

PCI_DEVICES = "/sys/bus/pci/devices"
VALUES = (128, 256, 512, 1024, 2048, 4096)
MRRS_MASK = 0x7000
PCIE_CAP_ID = 0x10
LOCKDOWN_REFUSES = ("integrity", "confidentiality")


def setpci_prefix(root):
    """Plain setpci on a real root; for another root point pciutils at its sysfs tree."""
    if root in ("/", ""):
        return ["setpci"]
    return ["setpci", "-A", "linux-sysfs", "-O", "sysfs.path=%s" % sysfs.path(root, "/sys/bus/pci")]


def find_devices(root, vendor, classes):
    """BDFs whose vendor matches and whose base class + subclass (class >> 8) is listed."""
    wanted = {int(c, 16) for c in classes}
    found = []
    for bdf in sysfs.entries(root, PCI_DEVICES + "/*"):
        dev_vendor = sysfs.read(root, "%s/%s/vendor" % (PCI_DEVICES, bdf))
        dev_class = sysfs.read(root, "%s/%s/class" % (PCI_DEVICES, bdf))
        if dev_vendor is None or dev_class is None:
            continue
        if int(dev_vendor, 16) == int(vendor, 16) and int(dev_class, 16) >> 8 in wanted:
            found.append(bdf)
    return found


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


def _word(config, offset):
    return int.from_bytes(config[offset:offset + 2], "little")


def pcie_cap_offset(config):
    """Offset of the PCI Express capability, or None when the device has none."""
    if not _word(config, 0x06) & 0x10:
        return None
    offset, seen = config[0x34] & 0xFC, set()
    while offset and offset not in seen and offset + 2 <= len(config):
        seen.add(offset)
        if config[offset] == PCIE_CAP_ID:
            return offset
        offset = config[offset + 1] & 0xFC
    return None


def device_control(config, bdf):
    offset = pcie_cap_offset(config)
    if offset is None:
        raise TuningError("%s has no PCI Express capability; MaxReadReq does not apply to it" % bdf)
    if offset + 10 > len(config):
        raise TuningError("%s: Device Control lies beyond the readable config space (need root)" % bdf)
    return _word(config, offset + 8)


def mrrs_bytes(devctl):
    return 128 << ((devctl & MRRS_MASK) >> 12)


def encode(value):
    return VALUES.index(value) << 12


def read_mrrs(root, bdf):
    return mrrs_bytes(device_control(read_config(root, bdf), bdf))


def _refused(root, bdf, detail):
    mode = sysfs.lockdown(root)
    if mode in LOCKDOWN_REFUSES:
        return TuningError("%s: PCI config write refused: kernel lockdown is '%s', which forbids config "
                           "space writes from user space; MaxReadReq can only change with lockdown "
                           "off (Secure Boot policy)" % (bdf, mode))
    return TuningError("%s: writing MaxReadReq failed: %s" % (bdf, detail))


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
                raise _refused(root, bdf, result[2].strip() or "rc=%d" % result[0])
        after[bdf] = value if gate.check_mode else read_mrrs(root, bdf)
        if after[bdf] != value:
            # setpci only warns when sysfs refuses the write, so the read-back decides.
            raise _refused(root, bdf, "read back %d bytes after writing %d" % (after[bdf], value))
    msg = "MaxReadReq %d bytes on %d device(s)" % (value, len(devices))
    if not devices:
        msg = "no PCI device of vendor %s with class %s" % (vendor, "/".join(classes))
    return {"changed": len(gate.actions) > writes_before, "before": before, "after": after,
            "devices": len(devices), "msg": msg}
