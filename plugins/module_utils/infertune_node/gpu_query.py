"""Read a host's NVIDIA GPUs through NVML or nvidia-smi and check them against a profile.

Stdlib only: the module passes in a command runner and, when importable, the
pynvml module (from nvidia-ml-py), so both paths can be exercised with fakes.
"""
import re

# (key in our result, nvidia-smi --query-gpu field)
SMI_FIELDS = (
    ("index", "index"),
    ("name", "name"),
    ("uuid", "uuid"),
    ("pci_bus_id", "pci.bus_id"),
    ("pci_device_id", "pci.device_id"),
    ("compute_capability", "compute_cap"),
    ("memory_total_mib", "memory.total"),
    ("driver_version", "driver_version"),
    ("persistence_mode", "persistence_mode"),
    ("pcie_link_gen_current", "pcie.link.gen.current"),
    ("pcie_link_gen_max", "pcie.link.gen.max"),
    ("pcie_link_width_current", "pcie.link.width.current"),
    ("pcie_link_width_max", "pcie.link.width.max"),
)
INT_KEYS = frozenset((
    "index", "memory_total_mib", "pcie_link_gen_current", "pcie_link_gen_max",
    "pcie_link_width_current", "pcie_link_width_max",
))
# nvidia-smi prints these where a VM or a driver hides a value.
SMI_NOT_AVAILABLE = frozenset(("[N/A]", "N/A", "[Not Supported]", "[Unknown Error]"))
# nvidia-smi's wording (rc 9) when the kernel module is absent or cannot be reached.
DRIVER_NOT_LOADED_MARKERS = ("couldn't communicate with the NVIDIA driver", "NVIDIA driver is not loaded")
NO_DEVICES_MARKER = "No devices were found"
# What an older nvidia-smi answers (rc 2) for a field it does not know.
UNKNOWN_FIELD = re.compile(r'Field "([^"]+)" is not a valid field to query')


class GpuQueryError(Exception):
    """The GPUs could not be read; the message says why in operator terms."""


class NvmlUnavailable(GpuQueryError):
    """libnvidia-ml cannot be loaded although pynvml imports; nvidia-smi may still answer."""


class UnknownField(GpuQueryError):
    """nvidia-smi does not know a field that was asked for (an older driver)."""

    def __init__(self, field, message):
        super().__init__(message)
        self.field = field


def smi_argv(nvidia_smi="nvidia-smi", extra=()):
    """The query: the gate's fields, then `extra` (the health read's), in one process."""
    return [
        nvidia_smi,
        "--query-gpu=" + ",".join([field for key, field in SMI_FIELDS] + list(extra)),
        "--format=csv,noheader,nounits",
    ]


def sysfs_bdf(bus_id):
    """nvidia-smi/NVML print an 8-digit PCI domain (00000000:18:00.0); sysfs uses 4 (0000:18:00.0)."""
    domain, rest = bus_id.lower().split(":", 1)
    return "%04x:%s" % (int(domain, 16), rest)


def device_id(pci_device_id):
    """NVML/nvidia-smi pack device and vendor (0x233510DE); sysfs and lspci name the device alone (0x2335)."""
    return "0x%04x" % (pci_device_id >> 16)


def _finish(gpu):
    gpu["pci_bdf"] = sysfs_bdf(gpu["pci_bus_id"])
    return gpu


def rows(text, count):
    """The value lists of `nvidia-smi --query-gpu=... --format=csv,noheader` output, `count` each."""
    found = []
    for line in text.splitlines():
        if not line.strip():
            continue
        # No queried field can hold a comma (GPU names are product names), so a plain split is exact.
        values = [value.strip() for value in line.split(",")]
        if len(values) != count:
            raise GpuQueryError("nvidia-smi printed %d fields where %d were asked for: %r" % (len(values), count, line))
        found.append(values)
    return found


def identity(values):
    """The GPU dict of the SMI_FIELDS values of one row (those first in the row)."""
    gpu = {}
    for (key, field), value in zip(SMI_FIELDS, values):
        if value in SMI_NOT_AVAILABLE:
            gpu[key] = None
        elif key in INT_KEYS:
            gpu[key] = int(value)
        elif key == "persistence_mode":
            gpu[key] = value == "Enabled"
        elif key == "pci_device_id":
            gpu[key] = device_id(int(value, 16))
        else:
            gpu[key] = value
    return _finish(gpu)


def parse_smi_csv(text):
    """Turn `nvidia-smi --query-gpu=<SMI_FIELDS> --format=csv,noheader,nounits` output into GPU dicts."""
    return [identity(values) for values in rows(text, len(SMI_FIELDS))]


def smi_output(run, argv):
    """What `argv` (an nvidia-smi query) printed, "" when there is no GPU; run(argv) -> (rc, stdout,
    stderr) answers rc 127 when nvidia-smi is missing."""
    rc, out, err = run(argv)
    if rc == 127:
        raise GpuQueryError("nvidia-smi not found (%s): is the NVIDIA driver installed on this host?"
                            % ((err or out).strip() or argv[0]))
    message = (out + "\n" + err).strip()
    if NO_DEVICES_MARKER in message:
        return ""
    if rc != 0:
        if any(marker in message for marker in DRIVER_NOT_LOADED_MARKERS):
            raise GpuQueryError("NVIDIA driver not loaded: nvidia-smi says: %s" % message)
        unknown = UNKNOWN_FIELD.search(message)
        if unknown:
            raise UnknownField(unknown.group(1), "nvidia-smi failed (rc %d): %s" % (rc, message))
        raise GpuQueryError("nvidia-smi failed (rc %d): %s" % (rc, message))
    return out


def query_smi(run, nvidia_smi="nvidia-smi"):
    """Run nvidia-smi through `run(argv) -> (rc, stdout, stderr)`, which answers rc 127 when it is missing."""
    return parse_smi_csv(smi_output(run, smi_argv(nvidia_smi)))


def _text(value):
    return value.decode() if isinstance(value, bytes) else value


def query_nvml(nvml):
    """Read every GPU through NVML; `nvml` is the pynvml module or a stand-in with the same calls."""
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as exc:
        if "Driver Not Loaded" in str(exc):
            raise GpuQueryError("NVIDIA driver not loaded: NVML says: %s" % exc)
        if "Library Not Found" in str(exc):
            raise NvmlUnavailable("NVML library not found: %s" % exc)
        raise GpuQueryError("NVML could not start: %s" % exc)
    try:
        driver = _text(nvml.nvmlSystemGetDriverVersion())

        def optional(call, handle):
            # Link queries answer NotSupported inside some VMs; that is not a failure.
            try:
                return call(handle)
            except nvml.NVMLError:
                return None

        gpus = []
        for index in range(nvml.nvmlDeviceGetCount()):
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            major, minor = nvml.nvmlDeviceGetCudaComputeCapability(handle)
            persistence = optional(nvml.nvmlDeviceGetPersistenceMode, handle)
            pci = nvml.nvmlDeviceGetPciInfo(handle)
            gpus.append(_finish({
                "index": index,
                "name": _text(nvml.nvmlDeviceGetName(handle)),
                "uuid": _text(nvml.nvmlDeviceGetUUID(handle)),
                "pci_bus_id": _text(pci.busId),
                "pci_device_id": device_id(pci.pciDeviceId),
                "compute_capability": "%d.%d" % (major, minor),
                "memory_total_mib": nvml.nvmlDeviceGetMemoryInfo(handle).total // (1024 * 1024),
                "driver_version": driver,
                "persistence_mode": None if persistence is None else persistence == 1,
                "pcie_link_gen_current": optional(nvml.nvmlDeviceGetCurrPcieLinkGeneration, handle),
                "pcie_link_gen_max": optional(nvml.nvmlDeviceGetMaxPcieLinkGeneration, handle),
                "pcie_link_width_current": optional(nvml.nvmlDeviceGetCurrPcieLinkWidth, handle),
                "pcie_link_width_max": optional(nvml.nvmlDeviceGetMaxPcieLinkWidth, handle),
            }))
        return gpus
    finally:
        nvml.nvmlShutdown()


def match_table(table, gpu):
    """Key of the GPU table entry for this GPU: by PCI device id, else by name or alias; None when absent."""
    for key, entry in table.items():
        if gpu.get("pci_device_id") in entry.get("pci_device_ids", []):
            return key
    names = {key: [entry.get("name", "")] + entry.get("aliases", []) for key, entry in table.items()}
    return next((key for key, known in names.items() if gpu["name"].casefold() in (n.casefold() for n in known)), None)


def version_key(text):
    """'580.159.03' -> (580, 159, 3), so that driver versions compare as numbers."""
    return tuple(int(part) for part in text.split("."))


def gate_problems(gpus, expected_count=None, compute_capability=None, min_driver=None, require_persistence=False,
                  driver_floor=None):
    """What stops this host's GPUs from matching the profile; each line names the GPU, found and expected.

    driver_floor: {"min_driver", "why"} derived from the installed CUDA (cuda_driver.driver_floor), checked
    next to min_driver, which stays an optional extra floor.
    """
    problems = []
    if expected_count is not None and len(gpus) != expected_count:
        problems.append("%s GPUs than expected: found %d, expected %d" % (
            "fewer" if len(gpus) < expected_count else "more", len(gpus), expected_count))
    for gpu in gpus:
        where = "GPU %s (%s, bus %s)" % (gpu["index"], gpu["name"], gpu["pci_bus_id"])
        if compute_capability is not None and version_key(gpu["compute_capability"]) != version_key(compute_capability):
            problems.append("%s: compute capability %s found, %s expected" % (
                where, gpu["compute_capability"], compute_capability))
        if driver_floor and version_key(gpu["driver_version"]) < version_key(driver_floor["min_driver"]):
            problems.append("%s: driver %s found, %s needs at least %s" % (
                where, gpu["driver_version"], driver_floor["why"], driver_floor["min_driver"]))
        if min_driver and version_key(gpu["driver_version"]) < version_key(min_driver):
            problems.append("%s: driver %s found, at least %s expected" % (where, gpu["driver_version"], min_driver))
        # None (a VM or driver hiding it) is no proof that it is on.
        if require_persistence and gpu.get("persistence_mode") is not True:
            problems.append("%s: persistence mode %s, required on (nvidia-persistenced or nvidia-smi -pm 1)" % (
                where, "off" if gpu.get("persistence_mode") is False else "unknown"))
    return problems
