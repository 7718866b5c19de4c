"""reports/sglang-targets.json: the Prometheus file_sd list of the fleet's sglang /metrics.

Written with the fleet report by `python -m infertune.verify`, so it costs a run no task.
One group per host, [{"targets": ["host:port"], "labels": {"host": name}}]. The hosts of
this run replace their entries (none where sglang_enable_metrics is false), hosts outside
--limit keep theirs, hosts gone from the inventory drop out. Nothing is written when every
host of the run ran under --check.
"""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

FILE = "sglang-targets.json"
ANY_ADDRESS = ("0.0.0.0", "::")


def target(host, entry):
    """host:port where the fleet reaches this host's sglang, or None when it serves no /metrics.

    From the values the run resolved for the host (its entry's `expected`): the listen address,
    unless sglang listens on every address, then the address Ansible reaches the host at. IPv6
    in brackets."""
    values = entry.get("expected") or {}
    # -e gives strings: "false" is off. No port resolved: no sglang settings in this run.
    if (str(values.get("sglang_enable_metrics", True)).lower() in ("false", "no", "off", "0")
            or values.get("sglang_port") in (None, "")):
        return None
    return endpoint(values.get("sglang_host", "0.0.0.0"), values.get("sglang_port"), entry.get("address") or host)


def endpoint(listen, port, reached_at):
    """host:port of a server listening on `listen`: that address, unless it is every address
    (0.0.0.0, ::), then `reached_at` (the address Ansible reaches the host at). IPv6 in brackets.
    The sglang role's sglang_metrics_target is this, through the sglang_target filter."""
    address = str(listen)
    if address in ANY_ADDRESS:
        address = str(reached_at)
    if ":" in address:
        address = f"[{address}]"
    return f"{address}:{port}"


def merge(previous, run, fleet):
    """The list: fleet order; this run's hosts from `run`, the others from `previous`."""
    kept = {group.get("labels", {}).get("host"): group for group in previous if isinstance(group, dict)}
    out = []
    for host in fleet:
        if host in run:
            found = target(host, run[host])
            out += [{"targets": [found], "labels": {"host": host}}] if found else []
        elif host in kept:
            out.append(kept[host])
    return out


def write(directory, run, fleet):
    """Update DIRECTORY/sglang-targets.json; returns its path, or None under --check."""
    if run and all(entry.get("check_mode") for entry in run.values()):
        return None
    path = Path(directory) / FILE
    try:
        previous = json.loads(path.read_text())
    except (OSError, ValueError):
        previous = []
    groups = merge(previous if isinstance(previous, list) else [], run, fleet)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{FILE}.")
    with os.fdopen(fd, "w") as handle:
        json.dump(groups, handle, indent=2)
        handle.write("\n")
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)
    return path
