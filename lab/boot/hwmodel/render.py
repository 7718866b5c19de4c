"""Render a whole host's hardware model into one directory, laid out like the paths it covers."""
import json
import os
import uuid

from . import iommu, kmod, kmsg, render_cpu, render_kernel, render_pci, sysctl
from .files import write

# Paths (relative to /) that boot bind-mounts from the rendered tree; files and directories.
# sys/devices is laid over the real one (boot binds the real entries the model lacks back).
DEVICES = "sys/devices"
MOUNTS = (
    "sys/bus/pci/devices",
    "sys/module",
    "sys/kernel/security",
    "sys/kernel/mm/transparent_hugepage",
    "proc/cpuinfo",
    "proc/cmdline",
    "proc/sys/kernel/osrelease",
    "proc/sys/kernel/random/boot_id",
)
NVIDIA_SMI_MODEL = "nvidia-smi.json"


def sysctl_path(key):
    """proc/sys/<key with dots as slashes>: where a modelled sysctl lives (relative to /)."""
    return "proc/sys/" + key.replace(".", "/")


def mounts(profile):
    """MOUNTS and one writable file per sysctl the profile models; every other /proc/sys file
    stays the container's read-only one, so a write to a key the lab does not model fails."""
    return MOUNTS + tuple(sysctl_path(key) for key in sorted(profile["sysctl"]))
FAULTS = ("no-boot", "driver-unloaded", "lockdown", "gpu-lost", "link-degraded", "old-driver", kmod.FAULT,
          "vfio-bound") + ("remap-pending", "remap-failure", "xid", "hw-slowdown", "nvidia-smi-hang")
# The health faults act at once (lab/boot/nvidia-smi reads them while the host runs); xid is read at
# boot too: the GPU reports it again at every boot until cleared.


def read_faults(path):
    """{fault: file content} for the fault files present in PATH."""
    faults = {}
    for name in FAULTS:
        full = os.path.join(path, name)
        if os.path.isfile(full):
            with open(full) as f:
                faults[name] = f.read().strip()
    return faults


def _index(faults, name, default=None):
    value = faults.get(name)
    if value is None:
        return None
    return int(value) if value.isdigit() else default


def gpu_model(profile, hostname, lost_index, driver_loaded, iommu_mode=iommu.TRANSLATED, driver_version=None):
    """What nvidia-smi reports: one record per GPU, in bus order, plus what decides P2P status
    (the ports above each GPU, their ACS offsets, the IOMMU mode), read live by nvidia-smi."""
    gpu = profile["gpu"]
    above = render_pci.ports_above(profile)
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
            "bar1_mib": render_pci.bar1_mib(profile),
            "ports": above[index],
            "lost": index == lost_index,
            # Stable like the UUID: a board's serial number.
            "serial": "1650%09d" % (uuid.uuid5(uuid.NAMESPACE_DNS, f"{hostname}.{bus_id}.serial").int % 10**9),
            "health": dict(gpu.get("health") or {}),
        })
    return {"driver_loaded": driver_loaded, "driver_version": driver_version or gpu["driver_version"], "gpus": gpus,
            "acs": render_pci.acs_offsets(profile), "iommu": iommu_mode}


def render(out, profile, *, root, release, cmdline, faults, hostname):
    """Render every modelled file for one boot into OUT (OUT/<path> for each of mounts(profile))."""
    lost = _index(faults, "gpu-lost")
    modules_plan = kmod.plan(root, profile, faults)
    # No nvidia.ko for the booted release: the driver cannot load, as with driver-unloaded.
    unloaded = "driver-unloaded" in faults or not kmod.loads(root, release, modules_plan)
    render_cpu.render_cpu(os.path.join(out, "sys/devices/system/cpu"), profile, cmdline)
    render_cpu.render_node(os.path.join(out, "sys/devices/system/node"), profile)
    render_pci.render(out, profile, lost_index=lost, degraded_index=_index(faults, "link-degraded", 0),
                      vfio_bdf=(faults.get("vfio-bound") or render_pci.NVME_BDF) if "vfio-bound" in faults else None)
    modules = render_kernel.loaded_modules(profile, root, cmdline, unloaded)
    # old-driver: an older driver installed (same module files): the version it reports.
    driver = faults.get("old-driver") or profile["gpu"]["driver_version"]
    render_kernel.render_modules(os.path.join(out, "sys/module"), modules, driver)
    render_kernel.render_security(os.path.join(out, "sys/kernel/security"), "lockdown" in faults)
    render_kernel.render_thp(os.path.join(out, "sys/kernel/mm/transparent_hugepage"), profile, cmdline)
    sysctls = sysctl.apply(root, profile["sysctl"])
    write(os.path.join(out, "proc/cmdline"), cmdline)
    write(os.path.join(out, "proc/sys/kernel/osrelease"), release)
    write(os.path.join(out, "proc/sys/kernel/random/boot_id"), uuid.uuid4())
    for key, value in sysctls.items():
        write(os.path.join(out, sysctl_path(key)), value)
    with open(os.path.join(out, "proc/cpuinfo"), "w") as f:
        f.write(render_cpu.cpuinfo(profile))
    with open(os.path.join(out, kmod.PLAN), "w") as f:
        json.dump(modules_plan, f)
    mode = iommu.mode(cmdline, profile["cpu"]["vendor_id"], profile["pci"].get("iommu", iommu.TRANSLATED))
    model = gpu_model(profile, hostname, lost, "nvidia" in modules, mode, driver)
    with open(os.path.join(out, NVIDIA_SMI_MODEL), "w") as f:
        json.dump(model, f, indent=1)
    kmsg.render(out, driver, model["driver_loaded"], boot_xids(faults, model["gpus"]))


def boot_xids(faults, gpus):
    """[(bus id, Xid)] that the xid fault ("NUMBER INDEX") makes a GPU report at every boot."""
    words = (faults.get("xid") or "").split()
    if len(words) != 2 or not all(w.isdigit() for w in words):
        return []
    number, index = int(words[0]), int(words[1])
    return [(g["pci_bus_id"], number) for g in gpus if g["index"] == index]
