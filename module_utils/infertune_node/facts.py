"""Read-only hardware and kernel facts of a host (the infertune_hw fact)."""
from . import amd_pstate, cpu, cpufreq, cpuidle, modprobe, pcie, sysfs
from .gate import TuningError

GPU_CLASSES = ("0x0300", "0x0302")
NVIDIA = "0x10de"


def _cpufreq(root):
    states = cpufreq.read_all(root)
    first = states[0] if states else {}
    return {
        "driver": first.get("driver"),
        "governor": first.get("governor"),
        "governors_available": first.get("governors_available", []),
        "epp": first.get("epp"),
        "epp_available": first.get("epp_available", []),
        "amd_pstate_status": sysfs.read(root, amd_pstate.STATUS),
    }


def _cpuidle(root):
    names = cpu.cpu_names(root)
    states = cpuidle.read_states(root, names[0]) if names else []
    return {"driver": sysfs.read(root, cpuidle.DRIVER),
            "states": [{"name": s["name"], "latency": s["latency"]} for s in states]}


def _gpu(root, bdf):
    base = "%s/%s" % (pcie.PCI_DEVICES, bdf)
    try:
        mrrs = pcie.read_mrrs(root, bdf)
    except TuningError:
        mrrs = None
    return {"bdf": bdf, "vendor": sysfs.read(root, base + "/vendor"), "device": sysfs.read(root, base + "/device"),
            "class": "0x%04x" % (int(sysfs.read(root, base + "/class"), 16) >> 8), "max_read_request": mrrs}


def collect(root):
    return {
        "cpu": cpu.summary(root),
        "cpufreq": _cpufreq(root),
        "cpuidle": _cpuidle(root),
        "kernel": {"release": sysfs.read(root, "/proc/sys/kernel/osrelease"),
                   "cmdline": sysfs.read(root, "/proc/cmdline"),
                   "boot_id": sysfs.read(root, "/proc/sys/kernel/random/boot_id")},
        "lockdown": sysfs.lockdown(root),
        "numa_balancing": sysfs.read_int(root, "/proc/sys/kernel/numa_balancing"),
        "pci_gpus": [_gpu(root, bdf) for bdf in pcie.find_devices(root, NVIDIA, GPU_CLASSES)],
        "module_params": modprobe.module_params(root),
    }
