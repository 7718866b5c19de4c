"""PCI configuration space images (4096 bytes) with a real capability list.

The PCI Express capability is deliberately not first in the list (PM -> MSI -> PCIe),
so tools that assume a fixed offset fail here as they would on real GPUs. Extended
capabilities: AER at 0x100, then ACS where the port has it, at the offset its vendor uses.
"""
import struct

SIZE = 4096
PM, MSI, EXP = 0x60, 0x68, 0x78
STATUS_CAP_LIST = 0x0010
# PCIe device/port types (PCI Express capability register bits 7:4).
ENDPOINT, ROOT_PORT, SWITCH_UP, SWITCH_DOWN = 0x0, 0x4, 0x5, 0x6
AER, ACS = 0x0001, 0x000D
AER_AT = 0x100
# ACS Capability: source validation, translation blocking, P2P request/completion redirect,
# upstream forwarding, egress control, direct translated P2P.
ACS_CAPS = 0x007F


def _put(buf, offset, fmt, value):
    struct.pack_into("<" + fmt, buf, offset, value)


def build(vendor, device, cls, *, bridge=None, multifunction=False, subsystem=(0, 0), revision=0xa1,
          port_type=ENDPOINT, devctl=0x2810, link=(5, 16), trained=None, bars=(), irq=0, acs=None):
    """Config space of one function; bridge=(primary, secondary, subordinate) makes it type 1.

    link=(max gen, max width); trained: Link Status width when below the maximum;
    acs=(offset, ACS Control) adds the ACS capability there.
    """
    buf = bytearray(SIZE)
    _put(buf, 0x00, "H", vendor)
    _put(buf, 0x02, "H", device)
    _put(buf, 0x04, "H", 0x0407 if bridge else 0x0406)  # I/O+mem decode (bridges), bus master
    _put(buf, 0x06, "H", STATUS_CAP_LIST)
    _put(buf, 0x08, "I", (cls << 8) | revision)
    buf[0x0E] = (0x01 if bridge else 0x00) | (0x80 if multifunction else 0)
    if bridge:
        buf[0x18:0x1B] = bytes(bridge)
    else:
        for index, value in bars:
            _put(buf, 0x10 + 4 * index, "I", value)
        _put(buf, 0x2C, "H", subsystem[0])
        _put(buf, 0x2E, "H", subsystem[1])
    buf[0x34] = PM
    buf[0x3C], buf[0x3D] = irq & 0xFF, 1  # INTA
    # Power Management: version 3, D0, next -> MSI.
    buf[PM], buf[PM + 1] = 0x01, MSI
    _put(buf, PM + 2, "H", 0x0003)
    _put(buf, PM + 4, "H", 0x0008)
    # MSI: 64-bit capable, disabled, next -> PCI Express.
    buf[MSI], buf[MSI + 1] = 0x05, EXP
    _put(buf, MSI + 2, "H", 0x0080)
    # PCI Express capability v2, end of list.
    gen, width = link
    buf[EXP], buf[EXP + 1] = 0x10, 0x00
    _put(buf, EXP + 0x02, "H", 0x0002 | (port_type << 4) | (0x0100 if port_type in (ROOT_PORT, SWITCH_DOWN) else 0))
    _put(buf, EXP + 0x04, "I", 0x00008022)  # DevCap: MaxPayload 512 supported, ext tags, RBER
    _put(buf, EXP + 0x08, "H", devctl)
    _put(buf, EXP + 0x0C, "I", gen | (width << 4))  # LnkCap
    _put(buf, EXP + 0x12, "H", gen | ((trained or width) << 4))  # LnkSta
    _put(buf, EXP + 0x2C, "I", ((1 << gen) - 1) << 1)  # LnkCap2: supported speeds vector
    _put(buf, EXP + 0x30, "H", gen)  # LnkCtl2: target speed
    # AER v2 (registers left clear), then ACS v1.
    _put(buf, AER_AT, "I", AER | (2 << 16) | ((acs[0] if acs else 0) << 20))
    if acs:
        offset, control = acs
        _put(buf, offset, "I", ACS | (1 << 16))
        _put(buf, offset + 4, "H", ACS_CAPS)
        _put(buf, offset + 6, "H", control)
    return bytes(buf)


def lost():
    """What a function that fell off the bus reads as."""
    return b"\xff" * SIZE
