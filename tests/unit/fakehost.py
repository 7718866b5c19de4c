"""Builders of fake host trees (sysfs, procfs, PCI config space) under a tmp directory."""
import os
import pathlib

REPO = pathlib.Path(__file__).resolve().parents[2]

EPP_AVAILABLE = "default performance balance_performance balance_power power"
GPU, AUDIO, BRIDGE = "0000:41:00.0", "0000:41:00.1", "0000:40:01.1"


def write(root, rel, content):
    target = pathlib.Path(root) / rel.lstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        target.write_bytes(content)
    else:
        target.write_text(content)
    return target


def read(root, rel):
    return (pathlib.Path(root) / rel.lstrip("/")).read_text().strip()


def snapshot(root):
    """Every file under root with its bytes, to prove a tree did not change."""
    result = {}
    for directory, _, files in os.walk(root):
        for name in files:
            full = os.path.join(directory, name)
            with open(full, "rb") as handle:
                result[os.path.relpath(full, root)] = handle.read()
    return result


def cpuinfo(count, vendor, sockets):
    blocks = []
    for n in range(count):
        blocks.append("processor\t: %d\nvendor_id\t: %s\ncpu family\t: 26\nmodel name\t: AMD EPYC 9555 "
                      "64-Core Processor\nphysical id\t: %d\n" % (n, vendor, n * sockets // count))
    return "\n".join(blocks) + "\n"


def cpu_tree(root, count, *, vendor="AuthenticAMD", sockets=1, driver="amd-pstate-epp", governor="powersave",
             epp="balance_performance", idle_states=None):
    """A host with `count` CPUs; epp=None leaves out the EPP files (acpi-cpufreq)."""
    write(root, "/proc/cpuinfo", cpuinfo(count, vendor, sockets))
    write(root, "/sys/devices/system/cpu/present", "0-%d\n" % (count - 1))
    for node in range(sockets):
        write(root, "/sys/devices/system/node/node%d/cpulist" % node, "\n")
    for n in range(count):
        base = "/sys/devices/system/cpu/cpu%d" % n
        write(root, base + "/cpufreq/scaling_driver", driver + "\n")
        write(root, base + "/cpufreq/scaling_governor", governor + "\n")
        write(root, base + "/cpufreq/scaling_available_governors", "performance powersave\n")
        if epp is not None:
            write(root, base + "/cpufreq/energy_performance_preference", epp + "\n")
            write(root, base + "/cpufreq/energy_performance_available_preferences", EPP_AVAILABLE + "\n")
        states = idle_states(n) if idle_states else [("POLL", 0), ("C1", 1), ("C2", 400)]
        for state_id, (name, latency) in enumerate(states):
            state = "%s/cpuidle/state%d" % (base, state_id)
            write(root, state + "/name", name + "\n")
            write(root, state + "/latency", "%d\n" % latency)
            write(root, state + "/disable", "0\n")
    write(root, "/sys/devices/system/cpu/cpuidle/current_driver", "acpi_idle\n")
    write(root, "/proc/cmdline", "BOOT_IMAGE=/boot/vmlinuz-6.1.0-18-amd64 root=UUID=abcd ro quiet\n")
    write(root, "/proc/sys/kernel/osrelease", "6.1.0-18-amd64\n")
    write(root, "/proc/sys/kernel/random/boot_id", "0e4c7f6a-7d39-4d0e-9a57-1b0f1d3c2e11\n")
    write(root, "/proc/sys/kernel/numa_balancing", "1\n")
    write(root, "/sys/kernel/security/lockdown", "[none] integrity confidentiality\n")
    return root


def config_space(vendor, device, class_code, header_type=0, devctl=None, caps=True):
    """256 bytes of config space; with caps, a PM capability at 0x40 chained to PCIe at 0x60."""
    cfg = bytearray(256)
    cfg[0:2] = vendor.to_bytes(2, "little")
    cfg[2:4] = device.to_bytes(2, "little")
    cfg[0x09:0x0C] = class_code.to_bytes(3, "little")
    cfg[0x0E] = header_type
    if caps:
        cfg[0x06] = 0x10
        cfg[0x34] = 0x40
        cfg[0x40:0x42] = bytes([0x01, 0x60])
        cfg[0x60:0x62] = bytes([0x10, 0x00])
        cfg[0x62:0x64] = (0x0002 | (0x1 if header_type == 0 else 0x6) << 4).to_bytes(2, "little")
        cfg[0x68:0x6A] = devctl.to_bytes(2, "little")
    return bytes(cfg)


def pci_device(root, bdf, vendor, device, class_code, config):
    base = "/sys/bus/pci/devices/" + bdf
    write(root, base + "/vendor", "0x%04x\n" % vendor)
    write(root, base + "/device", "0x%04x\n" % device)
    write(root, base + "/class", "0x%06x\n" % class_code)
    write(root, base + "/irq", "0\n")
    write(root, base + "/config", config)


def pci_tree(root, gpu_config=None):
    """A root port, an NVIDIA GPU (Device Control 0x293f: MRRS 512) and the GPU's audio function."""
    pci_device(root, BRIDGE, 0x1022, 0x14AB, 0x060400, config_space(0x1022, 0x14AB, 0x060400, 1, 0x2937))
    pci_device(root, GPU, 0x10DE, 0x2BB5, 0x030000,
               gpu_config or config_space(0x10DE, 0x2BB5, 0x030000, 0, 0x293F))
    pci_device(root, AUDIO, 0x10DE, 0x22E8, 0x040300, config_space(0x10DE, 0x22E8, 0x040300, 0, 0x2910))
    return root


class Recorder:
    """A command runner that records argv and succeeds, for code that shells out."""
    def __init__(self):
        self.calls = []

    def __call__(self, argv):
        self.calls.append(argv)
        return 0, "", ""


def pcie_config(vendor, device, class_code, port_type, *, acs=None, link=(5, 16), trained=None, target=None,
                gen=None, devctl=0x293F):
    """4096 bytes: PCIe capability at 0x60 with link registers, AER at 0x100, ACS=(offset, control) after it.

    link=(max gen, max width); trained: Link Status width (default the maximum); gen: current speed
    (default the maximum); target: Link Control 2 target speed (default the maximum).
    """
    cfg = bytearray(4096)
    cfg[0:2], cfg[2:4] = vendor.to_bytes(2, "little"), device.to_bytes(2, "little")
    cfg[0x09:0x0C] = class_code.to_bytes(3, "little")
    cfg[0x0E] = 0 if port_type == 0 else 1
    cfg[0x06], cfg[0x34] = 0x10, 0x60
    max_gen, width = link

    def put(offset, value, size):
        cfg[offset:offset + size] = value.to_bytes(size, "little")
    put(0x60, 0x10, 2)
    put(0x62, 0x0002 | port_type << 4, 2)
    put(0x68, devctl, 2)
    put(0x6C, max_gen | width << 4, 4)
    put(0x72, (gen or max_gen) | (trained or width) << 4, 2)
    put(0x8C, ((1 << max_gen) - 1) << 1, 4)
    put(0x90, target or max_gen, 2)
    put(0x100, 0x0001 | 2 << 16 | (acs[0] if acs else 0) << 20, 4)
    if acs:
        put(acs[0], 0x000D | 1 << 16, 4)
        put(acs[0] + 4, 0x007F, 2)
        put(acs[0] + 6, acs[1], 2)
    return bytes(cfg)


def nested_device(root, parent, bdf, vendor, device, class_code, config, resource=None):
    """A function under /sys/devices/PARENT/BDF with its /sys/bus/pci/devices link, as the kernel lays them out."""
    rel = "%s/%s" % (parent, bdf)
    base = "/sys/devices/" + rel
    write(root, base + "/vendor", "0x%04x\n" % vendor)
    write(root, base + "/device", "0x%04x\n" % device)
    write(root, base + "/class", "0x%06x\n" % class_code)
    write(root, base + "/irq", "0\n")
    write(root, base + "/config", config)
    if resource:
        write(root, base + "/resource", resource)
    link = pathlib.Path(root) / "sys/bus/pci/devices" / bdf
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to("../../../devices/" + rel)
    return rel


def bar_resource(bar1_bytes):
    """sysfs resource text with a 16 MiB BAR0 and BAR1 of the given size."""
    rows = [(0xF0000000, 0xF0FFFFFF), (0x40000000000, 0x40000000000 + bar1_bytes - 1)] + [(0, 0)] * 11
    return "".join("0x%016x 0x%016x 0x%016x\n" % (start, end, 0) for start, end in rows)


# The lent H200's sysfs resource (2026-12-02): BAR0 64-bit 16 MiB, BAR1 256 GiB at register 2
# (nvidia-smi -q: BAR1 total 262144 MiB), BAR3 32 MiB at register 4.
H200_RESOURCE = ("0x0000104002000000 0x0000104002ffffff 0x000000000014220c\n" + "0x0 0x0 0x0\n"
                 "0x0000100000000000 0x0000103fffffffff 0x000000000014220c\n" + "0x0 0x0 0x0\n"
                 "0x0000104000000000 0x0000104001ffffff 0x000000000014220c\n" + "0x0 0x0 0x0\n" * 8)


RP_ACS, SW_ACS, REDIRECT_ON = 0x2A0, 0x170, 0x001D
SWITCH_ROOT, SWITCH_UP, SWITCH_DOWN = "0000:10:01.1", "0000:11:00.0", ("0000:12:00.0", "0000:12:01.0")
SWITCH_GPUS = ("0000:13:00.0", "0000:14:00.0")
BARE_ROOT, BARE_GPU = "0000:20:01.1", "0000:21:00.0"
NVME_ROOT, NVME = "0000:00:01.1", "0000:01:00.0"


def fabric_tree(root, *, root_width=16, up_trained=None, gpu_trained=None, gpu_gen=None, root_target=None,
                bar1=128 << 30, down_acs=(True, True)):
    """Two GPUs behind one switch (root port and downstream ports with ACS, upstream port without),
    a third GPU on a root port without ACS, an NVMe drive on its own ACS root port; redirect on.
    down_acs: whether each downstream port has the ACS capability."""
    nv, amd, brcm = 0x10DE, 0x1022, 0x1000
    gpu_res = bar_resource(bar1)
    rp = nested_device(root, "pci0000:10", SWITCH_ROOT, amd, 0x14AB, 0x060400,
                       pcie_config(amd, 0x14AB, 0x060400, 4, acs=(RP_ACS, REDIRECT_ON), link=(5, root_width),
                                   target=root_target))
    up = nested_device(root, rp, SWITCH_UP, brcm, 0xC030, 0x060400,
                       pcie_config(brcm, 0xC030, 0x060400, 5, trained=up_trained))
    for k, (down_bdf, gpu_bdf) in enumerate(zip(SWITCH_DOWN, SWITCH_GPUS)):
        down = nested_device(root, up, down_bdf, brcm, 0xC030, 0x060400,
                             pcie_config(brcm, 0xC030, 0x060400, 6, acs=(SW_ACS, REDIRECT_ON) if down_acs[k] else None))
        nested_device(root, down, gpu_bdf, nv, 0x2BB5, 0x030200,
                      pcie_config(nv, 0x2BB5, 0x030200, 0, trained=gpu_trained if k else None, gen=gpu_gen),
                      gpu_res)
        nested_device(root, down, gpu_bdf[:-1] + "1", nv, 0x22E8, 0x040300, pcie_config(nv, 0x22E8, 0x040300, 0))
    bare = nested_device(root, "pci0000:20", BARE_ROOT, amd, 0x14AB, 0x060400,
                         pcie_config(amd, 0x14AB, 0x060400, 4))
    nested_device(root, bare, BARE_GPU, nv, 0x2BB5, 0x030200, pcie_config(nv, 0x2BB5, 0x030200, 0), gpu_res)
    nvme_rp = nested_device(root, "pci0000:00", NVME_ROOT, amd, 0x14AB, 0x060400,
                            pcie_config(amd, 0x14AB, 0x060400, 4, acs=(RP_ACS, REDIRECT_ON), link=(5, 4)))
    nested_device(root, nvme_rp, NVME, 0x144D, 0xA80A, 0x010802, pcie_config(0x144D, 0xA80A, 0x010802, 0, link=(5, 4)))
    write(root, "/sys/kernel/security/lockdown", "[none] integrity confidentiality\n")
    return root
