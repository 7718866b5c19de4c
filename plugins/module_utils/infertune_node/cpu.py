"""CPU identity and topology from /proc/cpuinfo and /sys/devices/system."""
from . import sysfs

CPU_DIR = "/sys/devices/system/cpu"


def cpu_names(root):
    """Logical CPU directories (cpu0, cpu1, ...); cpufreq/cpuidle are siblings, not CPUs."""
    return sysfs.entries(root, CPU_DIR + "/cpu[0-9]*")


def cpuinfo(root):
    """The processor blocks of /proc/cpuinfo as a list of dicts."""
    blocks, current = [], {}
    for line in (sysfs.read(root, "/proc/cpuinfo") or "").splitlines():
        if not line.strip():
            if current:
                blocks.append(current)
            current = {}
            continue
        key, sep, value = line.partition(":")
        current[key.strip()] = value.strip()
    if current:
        blocks.append(current)
    return [block for block in blocks if "processor" in block]


def vendor(root):
    blocks = cpuinfo(root)
    return blocks[0].get("vendor_id") if blocks else None


def summary(root):
    blocks = cpuinfo(root)
    first = blocks[0] if blocks else {}
    family = first.get("cpu family")
    sockets = {block["physical id"] for block in blocks if "physical id" in block}
    nodes = sysfs.entries(root, "/sys/devices/system/node/node[0-9]*")
    return {
        "vendor": first.get("vendor_id"),
        "family": int(family) if family and family.isdigit() else None,
        "model_name": first.get("model name"),
        "sockets": len(sockets) or (1 if blocks else None),
        "count": len(cpu_names(root)) or len(blocks) or None,
        "numa_nodes": len(nodes) or None,
    }
