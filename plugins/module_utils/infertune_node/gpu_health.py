"""GPU health: what each GPU says of itself, asked in the gate's own nvidia-smi query (one process
for identity and health), the Xids the driver logged since this boot, the PCIe replay counters;
every signal classed from the tables below, each with its source.

Classes, worst last: not_applicable (the card or driver lacks the feature: [N/A], [Not Supported],
a field an older nvidia-smi does not know), ok, warn (reported, never blocks), reset (a GPU reset
or a reboot clears it), rma (the GPU goes back to its vendor). What needs more than one read, a
reset-class Xid again after a reboot and counters rising between reads, is judged on the control
node, which keeps the reads (infertune/gpu_health.py).
"""
import os
import re

from .gpu_query import SMI_FIELDS, GpuQueryError, UnknownField, identity, rows, smi_argv, smi_output
from .timed import Unresponsive

CLASSES = ("not_applicable", "ok", "warn", "reset", "rma")
BLOCKING = ("reset", "rma")

# (key, nvidia-smi --query-gpu field), after the gate's SMI_FIELDS in the same query. Names as
# `nvidia-smi --help-query-gpu` lists them (tests/fixtures/gpu/ holds a real card's answers).
# Measured on an H100 (driver 580.159.04, medians of 7): the gate's fields alone 23.5 ms, with
# these 28 ms; inforom.checksum_validation alone added 72 ms (it checks the InfoROM each time),
# so it is not asked at every plan.
HEALTH_FIELDS = (
    ("serial", "serial"),
    ("ecc_mode", "ecc.mode.current"),
    ("ecc_corrected_volatile", "ecc.errors.corrected.volatile.total"),
    ("ecc_corrected_aggregate", "ecc.errors.corrected.aggregate.total"),
    ("ecc_uncorrected_volatile", "ecc.errors.uncorrected.volatile.total"),
    ("ecc_uncorrected_aggregate", "ecc.errors.uncorrected.aggregate.total"),
    ("ecc_sram_uncorrected", "ecc.errors.uncorrected.aggregate.sram"),
    ("ecc_sram_threshold", "ecc.errors.uncorrected.aggregate.sram.thresholdExceeded"),
    ("remap_pending", "remapped_rows.pending"),
    ("remap_failure", "remapped_rows.failure"),
    ("remapped_correctable", "remapped_rows.correctable"),
    ("remapped_uncorrectable", "remapped_rows.uncorrectable"),
    ("retired_pending", "retired_pages.pending"),
    ("clock_events", "clocks_event_reasons.active"),
    ("recovery_action", "gpu_recovery_action"),
)
# Counts kept per read for the trend (the control node compares them with the last read);
# volatile ones start again at every driver load, so they are compared within one boot only.
COUNTERS = ("ecc_corrected_volatile", "ecc_corrected_aggregate", "ecc_uncorrected_volatile",
            "ecc_uncorrected_aggregate", "remapped_correctable", "remapped_uncorrectable")
VOLATILE = ("ecc_corrected_volatile", "ecc_uncorrected_volatile", "pcie_replays")
FLAGS = ("remap_pending", "remap_failure", "retired_pending")
# What nvidia-smi prints for a feature the card or the driver does not have.
ABSENT = frozenset(("[N/A]", "N/A", "[Not Supported]", "Not Supported", ""))

# NVIDIA's Xid catalog (docs.nvidia.com/deploy/xid-errors, "Analyzing Xid Errors with the Xid
# Catalog": each Xid's immediate resolution), as classes: RESET_GPU and RESTART_BM (79, restart
# the machine) are reset, and so are the workflows of 48 (a double-bit ECC error: the row remap
# or page retirement a reset applies) and 74 (NVLink: reset); 64 (a row remap failed) is what
# remapped_rows.failure reports, rma by NVIDIA's memory error management. The application faults
# the k8s device plugin ignores (internal/rm/health.go: 13 31 43 45 68) are ok. Every other Xid,
# 63 (a row marked for remapping) and 154 (the recovery action changed) among them, whose own
# signals carry the class, is warn: reported, never blocking.
XID_CLASSES = {
    13: "ok", 31: "ok", 43: "ok", 45: "ok", 68: "ok",
    46: "reset", 48: "reset", 62: "reset", 74: "reset", 79: "reset", 95: "reset", 109: "reset", 110: "reset",
    119: "reset", 120: "reset", 136: "reset", 140: "reset", 143: "reset", 155: "reset", 156: "reset", 158: "reset",
    64: "rma",
}
XID_OTHER = "warn"
# The line the driver writes: "NVRM: Xid (PCI:0000:3b:00): 79, pid=..., GPU has fallen off the bus."
XID_LINE = re.compile(rb"NVRM: Xid \((?:PCI:)?([0-9a-fA-F]{4,8}):([0-9a-fA-F]{2}):([0-9a-fA-F]{2})[^)]*\): (\d+)")

# gpu_recovery_action (NVML's nvmlDeviceGpuRecoveryAction_t; NVIDIA's "GPU Memory Error Management",
# "Error Recovery and Response Flags"), by its words without case or spaces: None, the GPU can be
# used again; every other action is a reset or a reboot, after draining where it says so.
RECOVERY_CLASSES = {"none": "ok", "gpureset": "reset", "nodereboot": "reset", "drainp2p": "reset",
                    "drainandreset": "reset", "busreset": "reset", "systemreboot": "reset"}
# Bits of clocks_event_reasons.active (nvml.h, nvmlClocksEventReasons) that mean the hardware or
# its cooling holds the clocks down; idle, application clocks and the power cap are normal.
CLOCK_EVENTS = {0x8: "hw_slowdown", 0x20: "sw_thermal_slowdown", 0x40: "hw_thermal_slowdown",
                0x80: "hw_power_brake_slowdown"}


class DriverUnresponsive(GpuQueryError):
    """nvidia-smi did not answer in time: a GPU or the driver is stuck."""


def worst(classes):
    classes = [c for c in classes if c in CLASSES]
    return max(classes, key=CLASSES.index) if classes else "not_applicable"


def _number(text):
    try:
        return int(text)
    except (TypeError, ValueError):
        return None


def _unreadable(raw, keys):
    """(class, detail) when nvidia-smi printed an error in place of one of `keys` ("[Unknown Error]",
    "[GPU requires reset]"), else None."""
    for key in keys:
        value = raw.get(key)
        if value and value.startswith("[") and value not in ABSENT:
            return ("reset" if "reset" in value.lower() else "warn"), "%s reads %s" % (key, value)
    return None


def _absent(raw, keys):
    return all(raw.get(key) is None or raw.get(key) in ABSENT for key in keys)


def _remap(raw, limits):
    if raw.get("remap_failure") == "Yes":
        return "rma", "row remapping failed (RMA by NVIDIA's policy)"
    rows_lost = _number(raw.get("remapped_uncorrectable"))
    if rows_lost is not None and rows_lost > limits["remap_uncorrectable_max"]:
        return "rma", "%d rows remapped for uncorrectable errors, more than %d" % (rows_lost, limits["remap_uncorrectable_max"])
    if raw.get("remap_pending") == "Yes":
        return "reset", "row remap pending (applied at the next GPU reset or reboot)"
    return "ok", ""


def _retired(raw, limits):
    if raw.get("retired_pending") == "Yes":
        return "reset", "page retirement pending (applied at the next GPU reset or reboot)"
    return "ok", ""


def _ecc(raw, limits):
    if raw.get("ecc_mode") == "Disabled":
        return "not_applicable", "ECC off"
    if raw.get("ecc_sram_threshold") == "Yes":
        return "rma", "uncorrectable SRAM errors past NVIDIA's threshold"
    sram = _number(raw.get("ecc_sram_uncorrected"))
    if sram is not None and sram > limits["sram_uncorrectable_max"]:
        return "rma", "%d uncorrectable SRAM errors, more than %d" % (sram, limits["sram_uncorrectable_max"])
    volatile = _number(raw.get("ecc_uncorrected_volatile"))
    if volatile:
        return "warn", "%d uncorrectable ECC errors since the driver loaded" % volatile
    return "ok", ""


def _recovery(raw, limits):
    action = raw["recovery_action"]
    found = RECOVERY_CLASSES.get(re.sub(r"[^a-z0-9]", "", action.lower()), "warn")
    return found, "" if found == "ok" else "recovery action %s" % action


def _clocks(raw, limits):
    try:
        mask = int(raw["clock_events"], 16)
    except ValueError:
        return "warn", "clocks_event_reasons.active reads %s" % raw["clock_events"]
    active = [name for bit, name in sorted(CLOCK_EVENTS.items()) if mask & bit]
    return ("warn", "clocks held down: " + ", ".join(active)) if active else ("ok", "")


# signal -> (the fields it reads, its judge); a signal whose every field is absent is not applicable.
SIGNALS = (
    ("remap", ("remap_pending", "remap_failure", "remapped_uncorrectable"), _remap),
    ("retired_pages", ("retired_pending",), _retired),
    ("ecc", ("ecc_mode", "ecc_sram_threshold", "ecc_sram_uncorrected", "ecc_uncorrected_volatile"), _ecc),
    ("recovery_action", ("recovery_action",), _recovery),
    ("clock_events", ("clock_events",), _clocks),
)


def classify(raw, limits):
    """{signal: (class, detail)} of one GPU's health fields (raw: key -> printed value, None for a
    field its nvidia-smi does not know)."""
    out = {}
    for name, keys, judge in SIGNALS:
        if _absent(raw, keys):
            out[name] = ("not_applicable", "")
        else:
            out[name] = _unreadable(raw, keys) or judge(raw, limits)
    return out


def xid_signal(xids):
    """(class, detail) of this boot's Xids of one GPU ({number: count})."""
    if not xids:
        return "ok", ""
    found = worst(XID_CLASSES.get(int(n), XID_OTHER) for n in xids)
    return found, "Xid " + ", ".join("%s (%d×)" % (n, c) if c > 1 else str(n) for n, c in sorted(xids.items(), key=lambda i: int(i[0])))


def bus_prefix(domain, bus, device):
    """The Xid line's PCI:DDDD:BB:DD as the GPU's bus id starts (0000:3b:00)."""
    return "%04x:%s:%s" % (int(domain, 16), bus.lower(), device.lower())


def kernel_xids(root="/"):
    """({bus prefix: {xid: count}}, why the log could not be read or ""): every Xid line in the
    kernel's ring buffer, which holds this boot's messages (until it wraps). /dev/kmsg answers one
    record per read and EAGAIN at its end; a copy of the log in a plain file answers many, then
    EOF. Read-only: nothing is cleared."""
    path = os.path.join(root, "dev/kmsg")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        return {}, "kernel log unreadable (%s: %s)" % (path, exc.strerror)
    found, rest = {}, b""

    def scan(line):
        match = XID_LINE.search(line)
        if match:
            bus = found.setdefault(bus_prefix(*[part.decode() for part in match.groups()[:3]]), {})
            number = match.group(4).decode()
            bus[number] = bus.get(number, 0) + 1

    try:
        while True:
            try:
                chunk = os.read(fd, 65536)
            except BlockingIOError:
                break
            except BrokenPipeError:  # records overwritten while reading: go on with the next
                continue
            except OSError as exc:
                return {}, "kernel log unreadable (%s: %s)" % (path, exc.strerror)
            if not chunk:
                break
            *complete, rest = (rest + chunk).split(b"\n")
            for line in complete:
                scan(line)
        scan(rest)
    finally:
        os.close(fd)
    return found, ""


def replay_counters(gpus, nvml):
    """({bus id: replays since the GPU's reset}, why none were read or ""), through NVML in this
    process (`nvml`: the pynvml module, None where it does not import): nvidia-smi's query has no
    such field, and `nvidia-smi -q` would be a second, slower process."""
    if nvml is None:
        return {}, "no NVML (nvidia-ml-py) on the host"
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as exc:
        return {}, "NVML: %s" % exc
    try:
        found = {}
        for index in range(nvml.nvmlDeviceGetCount()):
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            bus = nvml.nvmlDeviceGetPciInfo(handle).busId
            bus = bus.decode() if isinstance(bus, bytes) else bus
            try:
                found[bus.upper()] = int(nvml.nvmlDeviceGetPcieReplayCounter(handle))
            except nvml.NVMLError:
                continue
        return found, ""
    except nvml.NVMLError as exc:
        return {}, "NVML: %s" % exc
    finally:
        nvml.nvmlShutdown()


def query(run, nvidia_smi="nvidia-smi"):
    """(gpus, [{key: printed value}] per GPU, fields its nvidia-smi does not know): one query for the
    gate's fields and the health fields. A health field an older nvidia-smi does not know is
    dropped and the query asked again without it (its signals are then not applicable)."""
    wanted, unknown = list(HEALTH_FIELDS), []
    while True:
        try:
            out = smi_output(run, smi_argv(nvidia_smi, [field for key, field in wanted]))
        except UnknownField as exc:
            if exc.field not in [field for key, field in wanted]:
                raise
            wanted = [(key, field) for key, field in wanted if field != exc.field]
            unknown.append(exc.field)
            continue
        except Unresponsive as exc:
            raise DriverUnresponsive("driver unresponsive: %s" % exc)
        found = rows(out, len(SMI_FIELDS) + len(wanted))
        gpus = [identity(values) for values in found]
        raws = [dict({key: None for key, field in HEALTH_FIELDS},
                     **{key: value for (key, field), value in zip(wanted, values[len(SMI_FIELDS):])}) for values in found]
        return gpus, raws, unknown


def where(gpu):
    """'GPU 3 (bus 00000000:13:00.0, serial 1321..., uuid GPU-...)': what names a GPU for the person
    who pulls it."""
    ids = ["bus %s" % gpu["bus_id"]] + ["%s %s" % (k, gpu[k]) for k in ("serial", "uuid") if gpu.get(k)]
    return "GPU %s (%s)" % (gpu["index"], ", ".join(ids))


def lines(gpus, classes=BLOCKING):
    """One line per signal of these classes: 'GPU 3 (...): remap: row remap pending ... (reset)'."""
    return ["%s: %s: %s (%s)" % (where(gpu), name, detail, found)
            for gpu in gpus for name, (found, detail) in sorted(gpu["signals"].items()) if found in classes]


def other_lines(health):
    """One line per bus no GPU answered for that logged a reset-class Xid (a GPU fallen off it)."""
    out = []
    for bus, xids in sorted((health.get("other_xids") or {}).items()):
        found = sorted((n for n in xids if XID_CLASSES.get(int(n), XID_OTHER) in BLOCKING), key=int)
        if found:
            out.append("PCI %s (no GPU answers there): xid: Xid %s since this boot (reset)" % (bus, ", ".join(found)))
    return out


def flags(raw):
    """The yes/no states the drift watch exports ({name: 0 or 1}, where the card has them) and the
    clock events active by name (absent where the card has no such mask)."""
    out = {key: int(raw[key] == "Yes") for key in FLAGS if raw.get(key) in ("Yes", "No")}
    try:
        mask = int(raw.get("clock_events") or "", 16)
    except ValueError:
        return out, None
    return out, [name for bit, name in sorted(CLOCK_EVENTS.items()) if mask & bit]


def entry(gpu, raw, signals, xids, replays):
    """One GPU's health, compact (the plan's record carries it for every host): its class, the
    signals that are not ok, those not applicable by name, the counters, this boot's Xids, its
    yes/no flags and the clock events active."""
    counters = {key: _number(raw.get(key)) for key in COUNTERS if _number(raw.get(key)) is not None}
    if replays is not None:
        counters["pcie_replays"] = replays
    states, clocks = flags(raw)
    serial = raw.get("serial")
    return {"index": gpu["index"], "bus_id": gpu["pci_bus_id"], "uuid": gpu["uuid"],
            "serial": None if serial is None or serial in ABSENT or serial.startswith("[") else serial,
            "class": worst(found for found, detail in signals.values()),
            "signals": {name: [found, detail] for name, (found, detail) in signals.items() if found not in ("ok", "not_applicable")},
            "not_applicable": sorted(name for name, (found, detail) in signals.items() if found == "not_applicable"),
            "counters": counters, "xids": dict(xids), "flags": states,
            **({"clock_events": clocks} if clocks is not None else {})}


def read(run, nvidia_smi="nvidia-smi", root="/", nvml=None, sram_uncorrectable_max=0, remap_uncorrectable_max=512):
    """(gpus as the gate reads them, health): every GPU's signals classed from one query, this
    boot's Xids and the replay counters. DriverUnresponsive when nvidia-smi hangs, GpuQueryError
    when it cannot answer; NVML is asked only once nvidia-smi has answered (a call into a stuck
    driver in this process could not be timed out)."""
    limits = {"sram_uncorrectable_max": int(sram_uncorrectable_max), "remap_uncorrectable_max": int(remap_uncorrectable_max)}
    gpus, raws, unknown = query(run, nvidia_smi)
    xids, kernel_log = kernel_xids(root)
    replays, replay_reason = replay_counters(gpus, nvml) if gpus else ({}, "")
    health, matched = [], set()
    for gpu, raw in zip(gpus, raws):
        signals = classify(raw, limits)
        prefix = gpu["pci_bdf"].rsplit(".", 1)[0]
        matched.add(prefix)
        mine = xids.get(prefix, {})
        signals["xid"] = ("not_applicable", "") if kernel_log else xid_signal(mine)
        count = replays.get(gpu["pci_bus_id"].upper())
        signals["pcie_replays"] = ("ok", "") if count is not None else ("not_applicable", "")
        health.append(entry(gpu, raw, signals, mine, count))
    # Xids of a bus no GPU answered for (one that fell off it, for instance).
    other = {bus: found for bus, found in xids.items() if bus not in matched}
    try:
        with open(os.path.join(root, "proc/sys/kernel/random/boot_id")) as handle:
            boot_id = handle.read().strip()
    except OSError:
        boot_id = ""
    result = {"read": True, "boot_id": boot_id, "kernel_log": kernel_log, "replays": replay_reason,
              "unknown_fields": unknown, "gpus": health, "other_xids": other}
    # What the proof after a reboot asks to be gone, one line each.
    result["blocking"] = lines(health) + other_lines(result)
    return gpus, result
