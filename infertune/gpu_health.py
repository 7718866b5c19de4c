"""GPU health across reads, on the control node, and what it does to a host's plan.

One read (plugins/module_utils/infertune_node/gpu_health.py, on the host) classes what the GPUs
say now. Two rules need earlier reads, which the plan keeps on the control node, one file per host
(REPORTS/gpu-health/<host>.json: a host's plan runs in its own worker, so no two writers share a
file), keyed by the kernel's boot id:

* a reset-class Xid again after a reboot: a GPU that logged one in each of the last N boots read
  before this one, and logs one in this boot too, is rma (N: gpu_gate_health_rma_after_reboots;
  gpud escalates after two, xid/threshold.go). A boot read without one breaks the chain; boots no
  read saw are not counted;
* counters rising between reads (ECC, remapped rows, PCIe replays; the volatile ones within one
  boot): warn, never blocking, as the fleet report's AER trend (report.with_aer_trend) does.

The plan is read-only on the hosts (also under --check); this record is the control node's, and
is written under --check too, as drift.json is: it records what was seen, not a change.
"""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from infertune_node.gpu_health import BLOCKING, VOLATILE, XID_CLASSES, XID_OTHER, lines, other_lines, where, worst

HISTORY_DIR = "gpu-health"
# Boots kept per host: enough for any rma_after_reboots the variable allows.
KEEP_BOOTS = 16


def rises(old, new):
    """[(name, before, after)] for each count in `new` above its value in `old`; a count `old` does
    not have is no rise."""
    old = old or {}
    return [(name, old[name], count) for name, count in sorted(new.items())
            if isinstance(old.get(name), int) and isinstance(count, int) and count > old[name]]


def load(directory, host) -> dict:
    """The host's history, or {} (none yet, or unreadable: the next write replaces it)."""
    try:
        data = json.loads((Path(directory) / f"{host}.json").read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def save(directory, host, history) -> None:
    """Replace the host's history in one step."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{host}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as handle:
            json.dump(history, handle, indent=1, sort_keys=True)
        os.replace(tmp, directory / f"{host}.json")
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def reset_xids(gpu):
    return sorted((n for n in gpu.get("xids") or {} if XID_CLASSES.get(int(n), XID_OTHER) in BLOCKING), key=int)


def _key(gpu):
    return gpu.get("uuid") or gpu["bus_id"]


def judge(health, history, rma_after_reboots, when):
    """(health with the rules of earlier reads applied, the history with this read added). A read
    that did not answer changes neither."""
    if not isinstance(health, dict) or not health.get("read") or not health.get("boot_id"):
        return health, history
    boot = health["boot_id"]
    boots = dict((history or {}).get("boots") or {})
    earlier = [b for b in sorted(boots, key=lambda b: boots[b].get("seen", "")) if b != boot]
    counters = (history or {}).get("counters") or {}
    judged = []
    for gpu in health["gpus"]:
        signals = dict(gpu["signals"])
        found = reset_xids(gpu)
        chain = 0
        for past in reversed(earlier):
            if not (boots[past].get("reset_xids") or {}).get(_key(gpu)):
                break
            chain += 1
        if found and chain >= int(rma_after_reboots):
            signals["xid"] = ["rma", "Xid %s again after %d reboot(s) that did not clear it" % (", ".join(found), chain)]
        old = counters.get(_key(gpu)) or {}
        rose = [r for r in rises(old.get("values"), gpu.get("counters") or {})
                if r[0] not in VOLATILE or old.get("boot_id") == boot]
        if rose:
            signals.setdefault("counters", ["warn", "rising since the last read: " + ", ".join(
                "%s %d → %d" % r for r in rose)])
        judged.append(dict(gpu, signals=signals, rising=[r[0] for r in rose],
                           **{"class": worst([gpu["class"]] + [s[0] for s in signals.values()])}))
    mine = dict(boots.get(boot) or {"seen": when})
    mine["reset_xids"] = {_key(g): sorted(set((mine.get("reset_xids") or {}).get(_key(g), [])) | set(reset_xids(g)), key=int)
                          for g in health["gpus"] if reset_xids(g) or (mine.get("reset_xids") or {}).get(_key(g))}
    boots[boot] = mine
    kept = sorted(boots, key=lambda b: boots[b].get("seen", ""))[-KEEP_BOOTS:]
    new_history = {"boots": {b: boots[b] for b in kept},
                   "counters": {**counters, **{_key(g): {"boot_id": boot, "values": g.get("counters") or {}}
                                               for g in health["gpus"]}}}
    return dict(health, gpus=judged, blocking=lines(judged) + other_lines(health)), new_history


def fix(rma, reset, reboots, reboot_to_reset):
    """What the rollout does about the host's GPUs, in words; "" when nothing is to be done."""
    if rma:
        return "the host stays out of the rollout (never drained)"
    if reset and reboots:
        return "the reboot of this rollout clears it; the proof after the reboot asks for it cleared before sglang starts"
    if reset and reboot_to_reset:
        return "the rollout reboots the host for it (gpu_gate_health_reboot_to_reset)"
    if reset:
        return "needs a GPU reset or a reboot (gpu_gate_health_reboot_to_reset: true lets the rollout reboot it)"
    return ""


def outcome(host, health, reboots, reboot_to_reset):
    """What the GPUs' health does to the host's plan: (problems that stop it, whether it must reboot
    for its GPUs, the result the report and the rollout read), ([], False, None) without a health read.
    rma stops the host: it joins no batch, so it is never drained and uses no canary slot. reset is
    fixed by a reboot the rollout makes anyway (reboots; the proof after it asks for the signal
    cleared), else it needs one, which reboot_to_reset lets the rollout make. warn is reported."""
    if not isinstance(health, dict):
        return [], False, None
    if not health.get("read"):
        error = str(health.get("error", "not read"))
        return [], False, {"changed": False, "before": None, "after": "not read: " + error, "msg": error,
                           "class": "unread", "gpus": [], "lines": []}
    gpus = health["gpus"]
    rma = [g for g in gpus if g["class"] == "rma"]
    reset = lines([g for g in gpus if g["class"] == "reset"], ("reset",)) + other_lines(health)
    reboot = bool(reset) and not rma and not reboots and bool(reboot_to_reset)
    todo = fix(rma, reset, reboots, reboot_to_reset)
    warned = ["%s: %s" % (where(g), "; ".join("%s: %s (%s)" % (name, detail, found)
                                              for name, (found, detail) in sorted(g["signals"].items())))
              for g in gpus if g["class"] == "warn"]
    tally = {c: sum(g["class"] == c for g in gpus) for c in ("warn", "reset", "rma")}
    counts = ", ".join("%d %s" % (n, c) for c, n in tally.items() if n)
    said = reset + lines(rma, ("rma",))
    shown = [f"{host}: GPU health: {line}" + (f": {todo}" if todo else "") for line in reset]
    return ([f"{host}: GPU health: {line}" for line in lines(rma, ("rma",))], reboot, {
        "changed": False, "before": None,
        "after": f"{len(gpus)} GPU(s): {counts or 'healthy'}" + (f"; {todo}" if todo else ""),
        "msg": "; ".join(said + warned), "class": worst([g["class"] for g in gpus]),
        "reboot_required": reboot, "runtime_pending": False,
        # The GPUs that are not healthy, for the report (a row each) and the drift watch.
        "gpus": [{k: g[k] for k in ("index", "bus_id", "uuid", "serial", "class", "signals")}
                 for g in gpus if g["class"] in ("warn", "reset", "rma")],
        # What the plan's table says of the host.
        "lines": shown + [f"{host}: GPU health: {line}" for line in warned]})
