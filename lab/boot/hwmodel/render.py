"""Render a whole host's hardware model into one directory, laid out like the paths it covers."""
import json
import os
import uuid

from . import render_cpu, render_kernel, render_pci, sysctl
from .files import write

# Paths (relative to /) that boot bind-mounts from the rendered tree; files and directories.
MOUNTS = (
    "sys/devices/system/cpu",
    "sys/devices/system/node",
    "sys/bus/pci/devices",
    "sys/module",
    "sys/kernel/security",
    "proc/cpuinfo",
    "proc/cmdline",
    "proc/sys/kernel/osrelease",
    "proc/sys/kernel/numa_balancing",
    "proc/sys/kernel/random/boot_id",
)
PCI = "sys/bus/pci/devices"
NVIDIA_SMI_MODEL = "nvidia-smi.json"
FAULTS = ("no-boot", "driver-unloaded", "lockdown", "gpu-lost")


def read_faults(path):
    """{fault: file content} for the fault files present in PATH."""
    faults = {}
    for name in FAULTS:
        full = os.path.join(path, name)
        if os.path.isfile(full):
            with open(full) as f:
                faults[name] = f.read().strip()
    return faults


def gpu_model(profile, hostname, lost_index, driver_loaded):
    """What nvidia-smi reports: one record per GPU, in bus order."""
    gpu = profile["gpu"]
    gpus = []
    for index, bus, _node in render_pci.gpu_layout(profile):
        bus_id = f"00000000:{bus:02X}:00.0"
        gpus.append({
            "index": index,
            "name": gpu["name"],
            # Stable across boots like a real board's UUID: derived from host and slot.
            "uuid": f"GPU-{uuid.uuid5(uuid.NAMESPACE_DNS, f'{hostname}.{bus_id}.lab')}",
            "pci_bus_id": bus_id,
            "device_id": f"0x{gpu['device']:04X}{gpu['vendor']:04X}",
            "sub_device_id": f"0x{gpu['subsystem_device']:04X}{gpu['subsystem_vendor']:04X}",
            "compute_cap": gpu["compute_cap"],
            "memory_mib": gpu["memory_mib"],
            "link_gen": gpu["link_gen_max"],
            "link_width": gpu["link_width_max"],
            "lost": index == lost_index,
        })
    return {"driver_loaded": driver_loaded, "driver_version": gpu["driver_version"], "gpus": gpus}


def render(out, profile, *, root, release, cmdline, faults, hostname):
    """Render every modelled file for one boot into OUT (OUT/<path> for each of MOUNTS)."""
    lost = int(faults["gpu-lost"]) if faults.get("gpu-lost", "").isdigit() else None
    unloaded = "driver-unloaded" in faults
    render_cpu.render_cpu(os.path.join(out, "sys/devices/system/cpu"), profile, cmdline)
    render_cpu.render_node(os.path.join(out, "sys/devices/system/node"), profile)
    render_pci.render(os.path.join(out, PCI), profile, lost_index=lost)
    modules = render_kernel.loaded_modules(profile, root, cmdline, unloaded)
    render_kernel.render_modules(os.path.join(out, "sys/module"), modules, profile["gpu"]["driver_version"])
    render_kernel.render_security(os.path.join(out, "sys/kernel/security"), "lockdown" in faults)
    sysctls = sysctl.apply(root, profile["sysctl"])
    write(os.path.join(out, "proc/cmdline"), cmdline)
    write(os.path.join(out, "proc/sys/kernel/osrelease"), release)
    write(os.path.join(out, "proc/sys/kernel/numa_balancing"), sysctls["kernel.numa_balancing"])
    write(os.path.join(out, "proc/sys/kernel/random/boot_id"), uuid.uuid4())
    with open(os.path.join(out, "proc/cpuinfo"), "w") as f:
        f.write(render_cpu.cpuinfo(profile))
    with open(os.path.join(out, NVIDIA_SMI_MODEL), "w") as f:
        json.dump(gpu_model(profile, hostname, lost, "nvidia" in modules), f, indent=1)
