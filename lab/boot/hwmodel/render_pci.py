"""The PCI tree: /sys/devices/pci0000:RR/... nested like the kernel's, /sys/bus/pci/devices links to it.

Per PCIe switch its own root bus and root port, the switch upstream port, one downstream
port per GPU, the GPUs (`.0`) and on RTX PRO their audio functions (`.1`); an NVMe drive
behind its own root port on bus 00 when the profile has one.
"""
import os

from . import pciconfig

AUDIO_CLASS, BRIDGE_CLASS, NVME_CLASS = 0x040300, 0x060400, 0x010802
# Resource flags as the kernel prints them in sysfs `resource` (mem; mem 64-bit; mem 64-bit prefetchable).
MEM32, MEM64, MEM64_PREF = 0x40200, 0x140204, 0x14220C
DEVICES, BUS = "sys/devices", "sys/bus/pci/devices"
ROOT_PORT_DEV = (1, 1)  # root ports at RR:01.1, as on AMD EPYC
NVME_BDF = "0000:01:00.0"
VFIO_DRIVER = "sys/bus/pci/drivers/vfio-pci"
# Defaults for profiles that leave them out: ACS Control at power-on (source validation, P2P
# request and completion redirect, upstream forwarding, as the kernel enables them under an
# IOMMU), BAR1 window of 128 GiB.
ACS_CTL, BAR1_MIB = 0x001D, 131072


def _bdf(bus, dev=0, fn=0):
    return f"0000:{bus:02x}:{dev:02x}.{fn}"


def _write(path, name, text, mode="w"):
    with open(os.path.join(path, name), mode) as f:
        f.write(text)


def _function(out, parent, bdf, cfg, vendor, device, cls, *, subsystem=(0, 0), irq=0, node=0, resources=()):
    """Write one function's directory under PARENT (relative to OUT/sys/devices) and its bus link."""
    rel = f"{parent}/{bdf}"
    path = os.path.join(out, DEVICES, rel)
    os.makedirs(path)
    _write(path, "config", cfg, "wb")
    _write(path, "vendor", f"0x{vendor:04x}\n")
    _write(path, "device", f"0x{device:04x}\n")
    _write(path, "class", f"0x{cls:06x}\n")
    _write(path, "subsystem_vendor", f"0x{subsystem[0]:04x}\n")
    _write(path, "subsystem_device", f"0x{subsystem[1]:04x}\n")
    _write(path, "irq", f"{irq}\n")
    _write(path, "numa_node", f"{node}\n")
    rows = [(start, start + size - 1, flags) if size else (0, 0, 0) for start, size, flags in resources]
    rows += [(0, 0, 0)] * (13 - len(rows))
    _write(path, "resource", "".join(f"0x{s:016x} 0x{e:016x} 0x{fl:016x}\n" for s, e, fl in rows))
    os.symlink(f"../../../devices/{rel}", os.path.join(out, BUS, bdf))
    return rel


def gpu_layout(profile):
    """[(index, gpu bus, numa node)] in nvidia-smi order (by bus)."""
    buses = sorted(profile["gpu"]["buses"])
    nodes = profile["numa_nodes"]
    return [(i, bus, i * nodes // len(buses)) for i, bus in enumerate(buses)]


def bar1_mib(profile):
    return profile["gpu"].get("bar1_mib", BAR1_MIB)


def switches(profile):
    """[(root bus, [(index, gpu bus, node), ...])]: GPUs grouped per switch (pci.gpus_per_switch).

    A switch whose first GPU is on bus B sits on root bus B-3: root port (B-3):01.1, upstream
    port on B-2, downstream ports (B-1):k.0 leading to bus B+k, so a switch's GPU buses are consecutive.
    """
    layout, per = gpu_layout(profile), profile["pci"].get("gpus_per_switch", 1)
    groups = [layout[i:i + per] for i in range(0, len(layout), per)]
    for group in groups:
        if [bus for _, bus, _ in group] != list(range(group[0][1], group[0][1] + len(group))):
            raise ValueError(f"profile {profile['name']}: GPU buses under one switch must be consecutive: "
                             + ", ".join(f"0x{bus:02x}" for _, bus, _ in group))
    return [(group[0][1] - 3, group) for group in groups]


def ports_above(profile):
    """{gpu index: [root port, upstream port, downstream port]} BDFs."""
    above = {}
    for rbus, group in switches(profile):
        for k, (index, _bus, _node) in enumerate(group):
            above[index] = [_bdf(rbus, *ROOT_PORT_DEV), _bdf(rbus + 1), _bdf(rbus + 2, k)]
    return above


def acs_offsets(profile):
    """{port BDF: ACS capability offset} for the ports that have one."""
    pci, offsets = profile["pci"], {}
    for ports in ports_above(profile).values():
        for bdf, offset in zip(ports, (pci.get("root_acs"), None, pci.get("switch_acs"))):
            if offset:
                offsets[bdf] = offset
    return offsets


def _bridge(out, parent, bdf, buses, vendor, device, port_type, pci, link, node, acs=None, trained=None):
    cfg = pciconfig.build(vendor, device, BRIDGE_CLASS, bridge=buses, port_type=port_type, devctl=pci["devctl"],
                          link=link, trained=trained, acs=(acs, pci.get("acs_ctl", ACS_CTL)) if acs else None)
    return _function(out, parent, bdf, cfg, vendor, device, BRIDGE_CLASS, node=node)


def _nvme(out, pci):
    nvme = pci["nvme"]
    port = _bridge(out, "pci0000:00", _bdf(0, *ROOT_PORT_DEV), (0, 1, 1), pci["root_vendor"], pci["root_device"],
                   pciconfig.ROOT_PORT, pci, (5, 4), 0, acs=pci.get("root_acs"))
    cfg = pciconfig.build(nvme["vendor"], nvme["device"], NVME_CLASS, devctl=pci["devctl"], link=(5, 4),
                          bars=[(0, 0xF8000000 | 0x4)])
    _function(out, port, _bdf(1), cfg, nvme["vendor"], nvme["device"], NVME_CLASS,
              resources=[(0xF8000000, 0x4000, MEM64)])


def render(out, profile, lost_index=None, degraded_index=None, vfio_bdf=None):
    """Write OUT/sys/devices/pci0000:RR/... and OUT/sys/bus/pci/devices.

    degraded_index: the root port above that GPU's switch is configured x4 (BIOS bifurcation),
    so the link to the switch trains at x4. vfio_bdf: that function is bound to vfio-pci
    (handed to a VM): its `driver` link points at the vfio-pci driver, as the kernel's does.
    """
    os.makedirs(os.path.join(out, BUS), exist_ok=True)
    pci, gpu = profile["pci"], profile["gpu"]
    devctl, link = pci["devctl"], (gpu["link_gen_max"], gpu["link_width_max"])
    if pci.get("nvme"):
        _nvme(out, pci)
    for rbus, group in switches(profile):
        node = group[0][2]
        narrow = degraded_index in [index for index, _, _ in group]
        last = group[-1][1]
        root = _bridge(out, f"pci0000:{rbus:02x}", _bdf(rbus, *ROOT_PORT_DEV), (rbus, rbus + 1, last),
                       pci["root_vendor"], pci["root_device"], pciconfig.ROOT_PORT, pci,
                       (link[0], 4 if narrow else link[1]), node, acs=pci.get("root_acs"))
        up = _bridge(out, root, _bdf(rbus + 1), (rbus + 1, rbus + 2, last), pci["switch_vendor"],
                     pci["switch_device"], pciconfig.SWITCH_UP, pci, link, node, trained=4 if narrow else None)
        for k, (index, bus, node) in enumerate(group):
            down = _bridge(out, up, _bdf(rbus + 2, k), (rbus + 2, bus, bus), pci["switch_vendor"],
                           pci["switch_device"], pciconfig.SWITCH_DOWN, pci, link, node, acs=pci.get("switch_acs"))
            _gpu(out, down, profile, index, bus, node, devctl, link, index == lost_index)
    if vfio_bdf:
        _bind(out, vfio_bdf, VFIO_DRIVER)


def _bind(out, bdf, driver):
    """BDF's `driver` link, relative like the kernel's (../../../bus/pci/drivers/NAME); the driver
    directory itself is the booted kernel's, not modelled."""
    function = os.path.realpath(os.path.join(out, BUS, bdf))
    if not os.path.isdir(function):
        raise ValueError(f"vfio-bound: no PCI function {bdf} in this profile")
    os.symlink(os.path.relpath(os.path.join(out, driver), function), os.path.join(function, "driver"))


def _gpu(out, parent, profile, index, bus, node, devctl, link, lost):
    gpu = profile["gpu"]
    # BAR0 16 MiB registers, BAR1 framebuffer window (gpu.bar1_mib), BAR3 32 MiB: addresses per slot.
    regs = 0xF0000000 - index * 0x2000000
    fb = 0x40000000000 + index * 0x4000000000
    bar3 = fb + 0x2000000000
    resources = [(regs, 0x1000000, MEM32), (fb, bar1_mib(profile) << 20, MEM64_PREF), (0, 0, 0),
                 (bar3, 0x2000000, MEM64_PREF)]
    bars = [(0, regs), (1, fb & 0xFFFFFFF0 | 0xC), (2, fb >> 32), (3, bar3 & 0xFFFFFFF0 | 0xC), (4, bar3 >> 32)]
    subsystem = (gpu["subsystem_vendor"], gpu["subsystem_device"])
    irq = 100 + index
    audio = gpu.get("audio_device")
    cfg = pciconfig.lost() if lost else pciconfig.build(
        gpu["vendor"], gpu["device"], gpu["class"], multifunction=bool(audio), subsystem=subsystem,
        devctl=devctl, link=link, bars=bars, irq=irq)
    _function(out, parent, _bdf(bus), cfg, gpu["vendor"], gpu["device"], gpu["class"],
              subsystem=subsystem, irq=irq, node=node, resources=resources)
    if audio:
        cfg = pciconfig.lost() if lost else pciconfig.build(
            gpu["vendor"], audio, AUDIO_CLASS, multifunction=True, subsystem=subsystem,
            devctl=devctl, link=link, irq=irq)
        _function(out, parent, _bdf(bus, 0, 1), cfg, gpu["vendor"], audio, AUDIO_CLASS,
                  subsystem=subsystem, irq=irq, node=node)
