"""Drift watch: what the read-only plan of `playbooks/drift.yml` found on each host, kept across
runs, as one Prometheus textfile for node_exporter's textfile collector and as drift.json.

The playbook's writer (plugins/action/infertune_drift.py) hands over this run's reading of each
host; merge() puts it over the state the previous run left in drift.json:

* a host read now gets its knobs (0/1 for every enabled catalog knob), its pending knobs with
  the time each was first seen pending (kept while it stays pending), its pending reboot, and
  the time of this read;
* a host of the run that could not be read (unreachable, failed its plan) is unchecked and
  keeps what its last read found, with that read's time;
* a host of the inventory outside --limit keeps its last values; one never read is unchecked;
  hosts gone from the inventory drop out.

The exit status follows Terraform's -detailed-exitcode over the run's hosts: 1 when one was not
read, else 2 when one has drifted (a knob or a reboot pending), else 0.
"""
from __future__ import annotations

import json
import os
import tempfile
from datetime import datetime, timezone
from pathlib import Path

import yaml

from . import COLLECTION

STATE_FILE = "drift.json"
TEXTFILE = "infertune_drift.prom"
# Debian's prometheus-node-exporter reads this directory (--collector.textfile.directory).
TEXTFILE_DIR = "/var/lib/prometheus/node-exporter"
NO_DRIFT, ERROR, DRIFT = 0, 1, 2
NEVER_READ = "never read by a drift run"

# name, help; every family is a gauge, in this order in the file.
FAMILIES = (
    ("infertune_knob_pending",
     "Whether the knob differs from what infertune sets on the host (1) or not (0), as last read."),
    ("infertune_host_pending_knobs", "Number of knobs pending on the host, as last read."),
    ("infertune_host_reboot_pending",
     "Whether the host must reboot to run what its tuning asks for (1) or not (0), as last read."),
    ("infertune_host_checked",
     "Whether the last drift run read the host (1) or not: unreachable, failed its read or never read (0)."),
    ("infertune_drift_last_run_timestamp_seconds", "When the last drift run ended, in seconds since the epoch."),
    ("infertune_drift_last_success_timestamp_seconds",
     "When the last drift run that read every host of the run ended, in seconds since the epoch."),
    ("infertune_build_info", "The infertune release that wrote this file (always 1)."),
)
# The GPUs' health as the last read of each host found it (docs/gpu-health.md), written only where
# a read had it; labels host, gpu (index), uuid, bus_id and the family's own (a class, an Xid
# number, a reason, a counter's name): never a free text.
GPU_FAMILIES = (
    ("infertune_gpu_health_read",
     "Whether the last read of the host's GPUs answered (1) or not (0: driver unresponsive, nvidia-smi failed)."),
    ("infertune_gpu_health_class",
     "1 for the GPU's health class as last read (ok, warn, reset, rma, not_applicable), 0 for the others."),
    ("infertune_gpu_remap_pending", "Whether a row remap waits for a GPU reset or a reboot (1) or not (0)."),
    ("infertune_gpu_remap_failure", "Whether a row remap has failed in the GPU's life (1: RMA) or not (0)."),
    ("infertune_gpu_xids_this_boot", "Xids of this number the driver logged for the GPU since the host booted."),
    ("infertune_gpu_clock_event_active", "Whether the clock event reason holds the GPU's clocks down (1) or not (0)."),
    ("infertune_gpu_errors", "The GPU's error counter as last read (ECC volatile and aggregate, remapped rows, PCIe replays)."),
    ("infertune_gpu_counters_rising", "Error counters of the GPU that rose since the read before the last one."),
)
GPU_CLASSES = ("ok", "warn", "reset", "rma", "not_applicable")
CLOCK_REASONS = ("hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown", "sw_thermal_slowdown")


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def epoch(iso: str) -> int:
    return int(datetime.fromisoformat(iso).timestamp())


def version(root: Path = COLLECTION) -> str:
    """The collection's release: MANIFEST.json in an installed collection, galaxy.yml in a checkout."""
    manifest = Path(root) / "MANIFEST.json"
    if manifest.is_file():
        return str(json.loads(manifest.read_text())["collection_info"]["version"])
    return str(yaml.safe_load((Path(root) / "galaxy.yml").read_text())["version"])


def read_ok(knobs, pending: dict, reboot_reasons=(), gpus=None) -> dict:
    """A host this run read: its enabled knobs, {pending knob: what differs}, why it must reboot, and
    its GPUs' health where the read had it (gpus: health_of)."""
    return {"checked": True, "knobs": list(knobs), "pending": dict(pending), "reboot_reasons": list(reboot_reasons),
            **({"gpus": gpus} if gpus is not None else {})}


def read_failed(error: str, gpus=None) -> dict:
    """A host of this run that could not be read, and why; its GPUs' health when its plan read them
    before it stopped (an rma GPU, a driver that did not answer)."""
    return {"checked": False, "error": error, **({"gpus": gpus} if gpus is not None else {})}


def health_of(health):
    """What drift.json keeps of a plan's GPU health (plugins/module_utils/infertune_node/gpu_health.py,
    judged by infertune/gpu_health.py), or None without one."""
    if not isinstance(health, dict):
        return None
    keep = ("index", "bus_id", "uuid", "class", "signals", "counters", "rising", "xids", "flags", "clock_events")
    return {"read": bool(health.get("read")), "error": str(health.get("error") or ""), "boot_id": health.get("boot_id"),
            "gpus": [{k: g[k] for k in keep if k in g} for g in health.get("gpus") or []]}


def _host_state(old: dict | None, reading: dict | None, when: str) -> dict:
    if reading is None:  # outside --limit: as the last run left it
        return old or {"checked": False, "error": NEVER_READ, "last_read": None, "knobs": {}, "pending": {},
                       "reboot_pending": False, "reboot_reasons": []}
    if not reading["checked"]:
        kept = _host_state(old, None, when)
        return dict(kept, checked=False, error=reading["error"], **_gpus(kept, reading))
    since = {k: v["since"] for k, v in ((old or {}).get("pending") or {}).items()}
    return {
        "checked": True, "error": "", "last_read": when,
        "knobs": {k: int(k in reading["pending"]) for k in reading["knobs"]},
        "pending": {k: {"since": since.get(k, when), "detail": str(detail)}
                    for k, detail in reading["pending"].items()},
        "reboot_pending": bool(reading["reboot_reasons"]), "reboot_reasons": list(reading["reboot_reasons"]),
        **_gpus(old or {}, reading),
    }


def _gpus(old: dict, reading: dict) -> dict:
    """{"gpu_health": ...}: this read's, else the last read's (GPUs that did not answer now keep the
    values they had), or nothing before any read had them."""
    new, last = reading.get("gpus"), old.get("gpu_health")
    if new is None:
        return {"gpu_health": last} if last else {}
    if not new["read"] and last:
        return {"gpu_health": dict(last, read=False, error=new["error"])}
    return {"gpu_health": new}


def merge(previous: dict, readings: dict, fleet, when: str) -> dict:
    """The fleet's state after this run: readings {host: read_ok/read_failed} for the run's hosts,
    fleet the inventory's hosts in order."""
    old_hosts = (previous or {}).get("hosts") or {}
    hosts = {h: _host_state(old_hosts.get(h), readings.get(h), when) for h in fleet}
    status = exit_status(hosts, readings)
    return {
        "version": version(), "last_run": when,
        "last_success": when if status != ERROR else (previous or {}).get("last_success"),
        "run": {"hosts": [h for h in fleet if h in readings], "exit_status": status},
        "hosts": hosts,
    }


def drifted(entry: dict) -> bool:
    return bool(entry["pending"]) or entry["reboot_pending"]


def exit_status(hosts: dict, run_hosts) -> int:
    """1 when a host of the run was not read, else 2 when one has drifted, else 0."""
    run = [hosts[h] for h in run_hosts if h in hosts]
    if any(not e["checked"] for e in run):
        return ERROR
    return DRIFT if any(drifted(e) for e in run) else NO_DRIFT


def _label(value: str) -> str:
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def textfile(state: dict) -> str:
    """The state in the Prometheus text exposition format: HELP and TYPE, then every sample of the
    family. Hosts never read have only infertune_host_checked 0; no sample carries a timestamp
    (node_exporter refuses those in textfiles)."""
    samples = {name: [] for name, _help in FAMILIES}
    for host, entry in state["hosts"].items():
        h = _label(host)
        samples["infertune_host_checked"].append((f'host="{h}"', int(entry["checked"])))
        if entry["last_read"] is None:
            continue
        for knob, pending in entry["knobs"].items():
            samples["infertune_knob_pending"].append((f'host="{h}",knob="{_label(knob)}"', pending))
        samples["infertune_host_pending_knobs"].append((f'host="{h}"', len(entry["pending"])))
        samples["infertune_host_reboot_pending"].append((f'host="{h}"', int(entry["reboot_pending"])))
    samples["infertune_drift_last_run_timestamp_seconds"].append(("", epoch(state["last_run"])))
    if state.get("last_success"):
        samples["infertune_drift_last_success_timestamp_seconds"].append(("", epoch(state["last_success"])))
    samples["infertune_build_info"].append((f'version="{_label(state["version"])}"', 1))
    samples.update(gpu_samples(state))
    lines = []
    for name, text in FAMILIES + GPU_FAMILIES:
        if name in dict(GPU_FAMILIES) and not samples[name]:
            continue
        lines += [f"# HELP {name} {text}", f"# TYPE {name} gauge"]
        lines += [f"{name}{{{labels}}} {value}" if labels else f"{name} {value}" for labels, value in samples[name]]
    return "\n".join(lines) + "\n"


def gpu_samples(state: dict) -> dict:
    """The GPU families' samples of every host whose GPU health a read had."""
    samples = {name: [] for name, _help in GPU_FAMILIES}
    for host, entry in state["hosts"].items():
        health = entry.get("gpu_health")
        if not health:
            continue
        samples["infertune_gpu_health_read"].append((f'host="{_label(host)}"', int(health["read"])))
        for gpu in health["gpus"]:
            ids = (f'host="{_label(host)}",gpu="{gpu["index"]}",uuid="{_label(gpu.get("uuid") or "")}",'
                   f'bus_id="{_label(gpu["bus_id"])}"')
            samples["infertune_gpu_health_class"] += [(f'{ids},class="{c}"', int(gpu["class"] == c)) for c in GPU_CLASSES]
            for flag, name in (("remap_pending", "infertune_gpu_remap_pending"), ("remap_failure", "infertune_gpu_remap_failure")):
                if flag in (gpu.get("flags") or {}):
                    samples[name].append((ids, gpu["flags"][flag]))
            samples["infertune_gpu_xids_this_boot"] += [(f'{ids},xid="{int(n)}"', count)
                                                        for n, count in sorted((gpu.get("xids") or {}).items(), key=lambda i: int(i[0]))]
            if gpu.get("clock_events") is not None:
                samples["infertune_gpu_clock_event_active"] += [(f'{ids},reason="{r}"', int(r in gpu["clock_events"]))
                                                                for r in CLOCK_REASONS]
            samples["infertune_gpu_errors"] += [(f'{ids},counter="{_label(c)}"', n)
                                                for c, n in sorted((gpu.get("counters") or {}).items())]
            samples["infertune_gpu_counters_rising"].append((ids, len(gpu.get("rising") or [])))
    return samples


def write_atomic(directory, name: str, text: str) -> Path:
    """DIRECTORY/NAME replaced in one step: written to a temporary file beside it whose name does
    not end in .prom (the textfile collector reads every *.prom, dot-files too), then renamed.
    World-readable, so that node_exporter's user reads it."""
    directory = Path(directory)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, directory / name)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return directory / name


def load(report_dir) -> dict:
    """The state the previous run left, or {} (none, or unreadable: the next write replaces it)."""
    try:
        state = json.loads((Path(report_dir) / STATE_FILE).read_text())
    except (OSError, ValueError):
        return {}
    return state if isinstance(state, dict) else {}


def publish(report_dir, textfile_dir, readings: dict, fleet, when: str | None = None) -> dict:
    """Merge this run into drift.json, then write the textfile (none when textfile_dir is empty).
    Returns the new state; OSError when a directory cannot be written."""
    state = merge(load(report_dir), readings, fleet, when or now())
    Path(report_dir).mkdir(parents=True, exist_ok=True)
    write_atomic(report_dir, STATE_FILE, json.dumps(state, indent=2) + "\n")
    if textfile_dir:
        write_atomic(textfile_dir, TEXTFILE, textfile(state))
    return state
