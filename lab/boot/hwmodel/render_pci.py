"""/sys/bus/pci/devices: per GPU a root port, a PCIe switch (up + down port), the GPU and its audio."""
import os

from . import pciconfig

AUDIO_CLASS, BRIDGE_CLASS = 0x040300, 0x060400
# Resource flags as the kernel prints them in sysfs `resource` (mem; mem 64-bit prefetchable).
MEM32, MEM64_PREF = 0x40200, 0x14220C


def _bdf(bus, dev=0, fn=0):
    return f"0000:{bus:02x}:{dev:02x}.{fn}"


def _write(path, name, text, mode="w"):
    with open(os.path.join(path, name), mode) as f:
        f.write(text)


def _function(root, bdf, cfg, vendor, device, cls, *, subsystem=(0, 0), irq=0, node=0, resources=()):
    path = os.path.join(root, bdf)
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


def gpu_layout(profile):
    """[(index, gpu bus, numa node)] in nvidia-smi order (by bus)."""
    buses = sorted(profile["gpu"]["buses"])
    nodes = profile["numa_nodes"]
    return [(i, bus, i * nodes // len(buses)) for i, bus in enumerate(buses)]


def render(root, profile, lost_index=None):
    """Write the PCI device directories under ROOT (the future /sys/bus/pci/devices)."""
    os.makedirs(root, exist_ok=True)
    pci, gpu = profile["pci"], profile["gpu"]
    devctl, link = pci["devctl"], (gpu["link_gen_max"], gpu["link_width_max"])
    for index, bus, node in gpu_layout(profile):
        up, down = bus - 2, bus - 1
        ports = [
            (_bdf(0, 1 + index, 1), (0, up, bus), pci["root_vendor"], pci["root_device"], pciconfig.ROOT_PORT),
            (_bdf(up), (up, down, bus), pci["switch_vendor"], pci["switch_device"], pciconfig.SWITCH_UP),
            (_bdf(down), (down, bus, bus), pci["switch_vendor"], pci["switch_device"], pciconfig.SWITCH_DOWN),
        ]
        for bdf, buses, vendor, device, port_type in ports:
            cfg = pciconfig.build(vendor, device, BRIDGE_CLASS, bridge=buses, port_type=port_type,
                                  devctl=devctl, link=link)
            _function(root, bdf, cfg, vendor, device, BRIDGE_CLASS, node=node)
        # BAR0 16 MiB registers, BAR1 128 GiB framebuffer window, BAR3 32 MiB: addresses per slot.
        regs = 0xF0000000 - index * 0x2000000
        fb = 0x40000000000 + index * 0x4000000000
        bar3 = fb + 0x2000000000
        resources = [(regs, 0x1000000, MEM32), (fb, 0x2000000000, MEM64_PREF), (0, 0, 0), (bar3, 0x2000000, MEM64_PREF)]
        bars = [(0, regs), (1, fb & 0xFFFFFFF0 | 0xC), (2, fb >> 32), (3, bar3 & 0xFFFFFFF0 | 0xC), (4, bar3 >> 32)]
        subsystem = (gpu["subsystem_vendor"], gpu["subsystem_device"])
        irq = 100 + index
        audio = gpu.get("audio_device")
        cfg = pciconfig.lost() if index == lost_index else pciconfig.build(
            gpu["vendor"], gpu["device"], gpu["class"], multifunction=bool(audio), subsystem=subsystem,
            devctl=devctl, link=link, bars=bars, irq=irq)
        _function(root, _bdf(bus), cfg, gpu["vendor"], gpu["device"], gpu["class"],
                  subsystem=subsystem, irq=irq, node=node, resources=resources)
        if audio:
            cfg = pciconfig.lost() if index == lost_index else pciconfig.build(
                gpu["vendor"], audio, AUDIO_CLASS, multifunction=True, subsystem=subsystem,
                devctl=devctl, link=link, irq=irq)
            _function(root, _bdf(bus, 0, 1), cfg, gpu["vendor"], audio, AUDIO_CLASS,
                      subsystem=subsystem, irq=irq, node=node)
