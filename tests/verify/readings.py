"""Parse what one shell command per knob printed, and say it briefly for 128 CPUs."""
import re

from infertune_node.gpu_health import HEALTH_FIELDS


def grep_files(output):
    """`grep -H . FILES` output -> {path: value}."""
    found = {}
    for line in output.splitlines():
        path, sep, value = line.partition(":")
        if sep:
            found[path] = value.strip()
    return found


def per_cpu(files):
    """{'cpu3/cpufreq/scaling_governor': v} -> {'cpu3': v}."""
    return {re.search(r"(cpu\d+)", path).group(1): value for path, value in files.items()}


def cpu_ranges(cpus):
    """['cpu0', 'cpu1', 'cpu2', 'cpu7'] -> 'cpu0-2,7'."""
    numbers = sorted(int(re.sub(r"\D", "", c)) for c in cpus)
    spans, start = [], None
    for i, n in enumerate(numbers):
        if start is None:
            start = n
        if i + 1 == len(numbers) or numbers[i + 1] != n + 1:
            spans.append(str(start) if start == n else f"{start}-{n}")
            start = None
    return "cpu" + ",".join(spans) if spans else "no CPU"


def per_value(values):
    """{cpu: value} -> 'powersave on cpu0-127; performance on cpu128' (most common first)."""
    groups = {}
    for cpu, value in values.items():
        groups.setdefault(value, []).append(cpu)
    ordered = sorted(groups.items(), key=lambda item: (-len(item[1]), str(item[0])))
    return "; ".join(f"{value} on {cpu_ranges(cpus)}" for value, cpus in ordered)


SECTION = "@@"


def sections(output, count):
    """Split the output of `A; echo @@; B` into [A, B], padding absent trailing parts."""
    parts = output.split(SECTION + "\n")
    return (parts + [""] * count)[:count]


def properties(text):
    """`systemctl show -p ...` output -> {property: value}."""
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


# What the GPU checks ask nvidia-smi (--format=csv,noheader,nounits): index, bus id, compute
# capability, persistence mode, memory (MiB); with the health check, the uuid and the plan's
# health fields after them, in the same query.
GPU_QUERY = "index,pci.bus_id,compute_cap,persistence_mode,memory.total"
GPU_FIELDS = len(GPU_QUERY.split(","))
HEALTH_QUERY = ",".join(["uuid"] + [field for key, field in HEALTH_FIELDS])
HEALTH_KEYS = ["uuid"] + [key for key, field in HEALTH_FIELDS]


# The unit properties of a host without systemd: every check of a unit says it once.
NO_SYSTEMCTL = {"systemctl": "not found (this host does not run systemd)"}


def unit_properties(text):
    """properties(text), or NO_SYSTEMCTL where the shell found no systemctl to run."""
    found = properties(text)
    return NO_SYSTEMCTL if not found and "systemctl" in text and "not found" in text else found


def gpu_reading(output):
    """`systemctl show ... 2>&1; echo @@; nvidia-smi --query-gpu=<GPU_QUERY> ...; echo "@@rc=$?"` ->
    ({unit property: value} (NO_SYSTEMCTL without systemctl), [row of GPU_FIELDS strings], [what
    nvidia-smi printed otherwise])."""
    unit, smi = sections(output, 2)
    rows, other = [], []
    for fields in _gpu_rows(smi, other):
        rows.append(tuple(fields[:GPU_FIELDS]))
    return unit_properties(unit), rows, other


def _gpu_rows(smi, other):
    """The rows of the query with or without the health fields; the other lines into `other`."""
    for line in smi.splitlines():
        fields = [f.strip() for f in line.split(",")]
        if len(fields) in (GPU_FIELDS, GPU_FIELDS + len(HEALTH_KEYS)) and fields[0].isdigit():
            yield fields
        elif line.strip() and not line.startswith("@@rc=0"):
            other.append(line.replace("@@rc=", "exit status ").strip())


def gpu_health_reading(output):
    """The same command's health part: ([(index, bus id, {health key: value})], the Xid lines of the
    kernel log or None when it could not be read and why, [what nvidia-smi printed otherwise])."""
    unit, smi, kernel = sections(output, 3)
    other = []
    rows = [(fields[0], fields[1], dict(zip(HEALTH_KEYS, fields[GPU_FIELDS:])))
            for fields in _gpu_rows(smi, other) if len(fields) > GPU_FIELDS]
    unreadable = kernel.startswith(KMSG_UNREADABLE)
    return rows, (None if unreadable else kernel.splitlines()), (kernel.strip() if unreadable else "") or other


# The kernel log's Xid lines, read without blocking (a plain read of /dev/kmsg waits for the next
# record), or the marker and why it could not be read.
KMSG_UNREADABLE = "@@kmsg-unreadable"
KMSG_READ = f"""import os
try:
    fd = os.open("/dev/kmsg", os.O_RDONLY | os.O_NONBLOCK)
except OSError as exc:
    print("{KMSG_UNREADABLE}", exc.strerror)
    raise SystemExit(0)
data = b""
while True:
    try:
        chunk = os.read(fd, 65536)
    except BlockingIOError:
        break
    except BrokenPipeError:
        continue
    if not chunk:
        break
    data += chunk
print("\\n".join(line.decode("latin-1") for line in data.split(b"\\n") if b"NVRM: Xid" in line))
"""
