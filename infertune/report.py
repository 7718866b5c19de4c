"""Fleet report: host x knob, before -> after as the tuning modules returned it, and the
verification result, as Markdown (readable at a glance for dozens of hosts) and JSON.

    python -m infertune.report [--dir reports] [--hosts h1,h2,...]

Reads DIR/hosts/<host>.json (one fragment per host: the knob results of the last run,
infertune_results, which infertune.verify records; the decode floor, the backend A/B and
the interconnect measurement add their keys there) and DIR/verify/*.xml
(JUnit XML of tests/verify, any number of hosts per file); writes DIR/fleet.md and
DIR/fleet.json.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import xml.etree.ElementTree as ET
from datetime import datetime, timezone
from pathlib import Path

import yaml

from . import COLLECTION, collection_files, docsection, gpu_health, values

CATALOG = COLLECTION / "roles" / "infertune" / "vars" / "main.yml"
# Rows beside the knob catalog's: what the rollout did to the host, the GPU gate, the PCIe
# fabric gates with the AER counters, and the MoE backend's verdict when the plan judged it
# (the reason says which fallback, if any).
EXTRA = (("drain", "drain", ()), ("reboot", "reboot", ()), ("gpus", "GPUs", ("gpu_count", "gpu_compute_capability")),
         ("fabric", "PCIe fabric", ("pcie_links", "pcie_bar1")), ("backend", "MoE backend", ()),
         # The GPUs' health (docs/gpu-health.md): the plan's classes, the verification's verdict.
         ("gpu_health", "GPU health", ("gpu_health",)))
# EXTRA's rows that are read and judged, never changed: their value stands alone.
READ_ONLY = ("gpus", "fabric", "backend", "gpu_health")
# The set_stats key of a run's summary: this prefix, then the AWX job or a run id.
SUMMARY_PREFIX = "infertune_summary_"


def catalog_rows(entries):
    """What the report reads of the knob catalog's entries: name, label, verification tests,
    module, and the unit a systemd_unit knob sets where the entry names it literally. The
    actions hand over these rows of the catalog Ansible read; nothing here reads it again.
    None (a play without the catalog) stays None: the report then reads the file."""
    if entries is None:
        return None
    rows = []
    for entry in entries:
        args = entry.get("args") if isinstance(entry.get("args"), dict) else {}
        unit = args.get("unit") if entry.get("module") == "systemd_unit" else None
        rows.append({"name": entry["name"], "label": entry.get("label", entry["name"]),
                     "verify": list(entry.get("verify") or ()), "module": entry.get("module"),
                     "unit": unit if isinstance(unit, str) and "{" not in unit else None})
    return rows


def file_rows(catalog=CATALOG):
    """The rows of the catalog file, for a report run by hand (python -m infertune.report)."""
    return catalog_rows(yaml.safe_load(Path(catalog).read_text())["infertune_knobs"])


def knobs(rows=None):
    """(name, label, verification tests) of every knob, in catalog order, then EXTRA. rows: the
    run's catalog rows (catalog_rows); None reads the file."""
    rows = file_rows() if rows is None else rows
    return tuple((r["name"], r["label"], tuple(r["verify"])) for r in rows) + EXTRA


def kinds(rows=None):
    """{name: (kind, subject)}: how each knob's values read (values.py): its module, and the unit
    it sets where the catalog names it literally; EXTRA's rows by their own name."""
    out = {key: (key, None) for key, _label, _tests in EXTRA}
    out["drain"] = ("drain", "sglang.service")
    for row in file_rows() if rows is None else rows:
        out[row["name"]] = (row["module"], row["unit"])
    return out


NOT_APPLICABLE = "not applicable on this host"
# Worst first: a knob shows the worst status among its checks.
STATUS_ORDER = ("error", "fail", "pass", "n/a", "not checked")
SYMBOL = {"error": "⚠️", "fail": "❌", "pass": "✅", "n/a": "–", "not checked": "·"}
CELL_WIDTH = 70
# "host: knob: " that every verification message starts with; the detail table has both already.
PREFIX = re.compile(r"^[^:\s]+: [^:]+: ")


def _write_json(path: Path, data) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w") as f:
        json.dump(data, f, indent=2, sort_keys=True)
    os.replace(tmp, path)


def merge_into_host_report(path: Path, key: str, value) -> None:
    """Set one key of a JSON host report (created when absent), atomically."""
    path = Path(path)
    report = json.loads(path.read_text()) if path.exists() else {}
    report[key] = value
    _write_json(path, report)


def host_of(case_name):
    """'test_gpu_count[ansible://lab-gpu-01]' -> ('gpu_count', 'lab-gpu-01')."""
    match = re.match(r"test_(\w+)\[(.*)\]$", case_name)
    if not match:
        return None, None
    host = match.group(2).split("://")[-1].rsplit("@", 1)[-1]
    return match.group(1), host


def read_junit(paths):
    """{host: {test: {"status": pass|fail|error|n/a|skipped, "detail": message}}}."""
    results = {}
    cases = (case for path in paths for case in ET.parse(path).iter("testcase"))
    for case in cases:
        test, host = host_of(case.get("name", ""))
        if host is None:
            continue
        status, detail = "pass", ""
        for tag in ("failure", "error", "skipped"):
            node = case.find(tag)
            if node is not None:
                # A failure's text is our one-line message; an error's is a traceback, its message the gist.
                detail = (node.text if tag == "failure" else node.get("message")) or node.get("message") or ""
                status = {"failure": "fail", "error": "error"}.get(tag, "skipped")
                if tag == "skipped" and NOT_APPLICABLE in detail:
                    status = "n/a"
                break
        # Keep the first outcome of a case reported twice (a teardown error after a failure).
        results.setdefault(host, {}).setdefault(test, {"status": status, "detail": detail.strip()})
    return results


def read_fragments(directory):
    fragments = {}
    for path in sorted(Path(directory).glob("*.json")):
        data = json.loads(path.read_text())
        fragments[data.get("host", path.stem)] = data
    return fragments


def change(result, check_mode=False, kind=None, subject=None):
    """'before → after' (or what happened instead) for one knob's published result, each value
    said for what it is (infertune/values.py): kind is the catalog entry's module or the row's
    name, subject the unit it sets. The drain row names the load-balancer hooks that ran."""
    if result is None:
        return "not run"
    hooks = f"; hooks: {', '.join(result['hooks'])}" if result.get("hooks") else ""
    if result.get("failed"):
        return "failed: " + str(result.get("msg", ""))
    if result.get("skipped_reason"):
        return "skipped: " + result["skipped_reason"]
    if not result.get("changed"):
        said = values.say(kind, result.get("after"), subject)
        return said if kind in READ_ONLY else f"{said} (unchanged){hooks}"
    text = values.change(kind, result.get("before"), result.get("after"), subject, result.get("differs")) + hooks
    # A plan, or a --check run, is never shown as applied.
    return text if result.get("applied") and not check_mode else f"would change: {text}"


def worst(statuses):
    return min(statuses, key=STATUS_ORDER.index) if statuses else "not checked"


def knob_catalog(verified, catalog=None):
    """The catalog's knobs (catalog: rows, None reads the file) plus a column for any test it does
    not name yet."""
    rows = list(knobs(catalog))
    known = {t for key, label, tests in rows for t in tests}
    extra = sorted({t for tests in verified.values() for t in tests} - known)
    return rows + [(t, t.replace("_", " "), (t,)) for t in extra]


def decode(fragment):
    """Batch-1 decode floor and the fastest measured backend, when the benchmark wrote them."""
    floor, measured = fragment.get("roofline"), fragment.get("benchmark")
    if not floor and not measured:
        return None
    out = {}
    if floor:
        out.update({k: floor[k] for k in ("floor_ms_per_token", "floor_tok_per_s", "model", "gpu", "tp")})
    if measured:
        out.update({k: measured[k] for k in ("backend", "ms_per_token", "measured_at")})
        if floor:
            out["of_floor_percent"] = 100 * floor["floor_ms_per_token"] / measured["ms_per_token"]
    return out


def interconnect(fragment):
    """Lowest peer P2P bandwidth and all-reduce bus bandwidth, when the benchmark measured the
    interconnect; notes say which tool was missing, failed or found wrong values."""
    measured = fragment.get("interconnect")
    if not measured:
        return None
    p2p, reduce = measured.get("p2p") or {}, measured.get("all_reduce") or {}
    notes = [f"{label}: {entry['status']}" + (f" ({entry['warning']})" if entry.get("warning") else "")
             for label, entry in (("P2P", p2p), ("all-reduce", reduce))
             if entry and (entry["status"] != "measured" or entry.get("warning"))]
    if reduce.get("wrong"):
        notes.append(f"all-reduce: {reduce['wrong']} wrong values")
    return {"measured_at": measured.get("measured_at"),
            **{k: p2p.get(k) for k in ("gpus", "min_peer_bidirectional_gbps", "pairs_without_p2p")},
            **{k: reduce.get(k) for k in ("avg_busbw_gbps", "peak_busbw_gbps", "peak_size_bytes", "wrong")},
            "notes": notes}


def record_label(fragment, stale=False, entry=None):
    """When the host's tuning record was written and whether it applied anything: a record
    of a --check run, or of a run that applied nothing to the host, never reads as tuned; a host
    this run failed says the stage it stopped in, whether it was drained or rebooted, and what
    was changed before it stopped."""
    if not fragment.get("written"):
        return "no tuning record"
    results = fragment.get("results") or {}
    if fragment.get("check_mode"):
        text = f"checked {fragment['written']} under --check, nothing applied"
    elif not stale and failed_in_run(entry):
        rollout = entry["rollout"]
        done = [k for k, r in results.items() if isinstance(r, dict) and r.get("applied") and r.get("changed")
                and k not in ("drain", "reboot")]
        text = (f"stopped in stage {rollout.get('stage', 'plan')} {fragment['written']} "
                f"({'drained' if rollout.get('drained') else 'not drained'}, "
                f"{'rebooted' if rollout.get('rebooted') else 'not rebooted'}): "
                + (f"changed {', '.join(done)}" if done else "nothing changed"))
    elif any(isinstance(r, dict) and r.get("applied") for r in results.values()):
        text = f"tuned {fragment['written']}"
    else:
        text = f"planned {fragment['written']}, nothing applied"
    return text + (" (an earlier run)" if stale else "")


def why(result, failing_labels, entry):
    """Why a host did not pass: the knobs that are off, or how far this run took it and why it
    stopped there. entry is the run's record of the host (None without one)."""
    if result == "pass":
        return ""
    if failing_labels:
        return "knobs off: " + ", ".join(failing_labels)
    rollout = (entry or {}).get("rollout")
    if not rollout:
        return "no verification result"
    if rollout.get("stopped"):
        return str(rollout["stopped"])
    if rollout.get("failure"):
        return f"failed in stage {rollout['stage']}: {first_line(rollout['failure'])}"
    if rollout.get("unreachable"):
        return f"unreachable in stage {rollout['stage']}: {first_line(rollout['unreachable'])}"
    # Out of the play without a reason: every failure after the plan is rescued with one, so a
    # host lost later was unreachable.
    if rollout.get("lost") and rollout["stage"] != "plan":
        return f"unreachable in stage {rollout['stage']} (the run's output names the task)"
    if entry.get("verify"):
        return "verification returned no result for it"
    return f"failed or unreachable in stage {rollout['stage']} (the run's output names the task)"


def first_line(text):
    lines = str(text).strip().splitlines()
    return lines[0] if lines else ""


def failed_in_run(entry):
    """Whether this run failed the host before verification: its plan or a stage failed, or it
    was lost (a host left out by a stopped rollout did not fail)."""
    rollout = (entry or {}).get("rollout") or {}
    return bool(not rollout.get("stopped")
                and (rollout.get("failure") or rollout.get("unreachable") or rollout.get("lost")))


def build(fragments, verified, hosts=None, run=None, catalog=None):
    """run: this run's record per host ({verify, results, check_mode, rollout}), when there is one;
    catalog: the run's catalog rows (None reads the file)."""
    run = run or {}
    shapes = kinds(catalog)
    catalog = knob_catalog(verified, catalog)
    names = sorted(hosts or set(fragments) | set(verified))
    report = {"generated": datetime.now(timezone.utc).isoformat(timespec="seconds"),
              "knobs": {key: label for key, label, tests in catalog}, "hosts": {}}
    for host in names:
        checks = verified.get(host, {})
        results = fragments.get(host, {}).get("results", {})
        rows = {}
        check_mode = bool(fragments.get(host, {}).get("check_mode"))
        for key, label, tests in catalog:
            knob_checks = {t: checks[t] for t in tests if t in checks}
            statuses = [c["status"].replace("skipped", "n/a") for c in knob_checks.values()]
            result = results.get(key)
            rows[key] = {
                "label": label, "verify": worst(statuses) if tests else "not checked",
                "changed": bool(result and result.get("changed") and result.get("applied") and not check_mode),
                "checks": knob_checks,
                "tuning": None if result is None else {
                    "change": change(result, check_mode, *shapes.get(key, (None, None))),
                    **{k: result[k] for k in ("before", "after", "changed", "msg", "hooks") if k in result}},
            }
        failing = [k for k, v in rows.items() if v["verify"] in ("fail", "error")]
        entry = run.get(host)
        result = "fail" if failing or failed_in_run(entry) else ("pass" if checks else "not verified")
        rollout = (entry or {}).get("rollout")
        report["hosts"][host] = {
            "result": result,
            "reason": why(result, [rows[k]["label"] for k in failing], entry),
            # How far this run took the host: stage reached, drained, rebooted.
            "rollout": {k: rollout[k] for k in ("stage", "drained", "rebooted") if k in rollout} if rollout else None,
            "failing": failing,
            "tuned_at": fragments.get(host, {}).get("written"),
            "record": record_label(fragments.get(host, {}), stale=entry is not None and entry.get("results") is None,
                                   entry=entry),
            "check_mode": fragments.get(host, {}).get("check_mode"),
            "knobs": rows,
            "decode": decode(fragments.get(host, {})),
            "interconnect": interconnect(fragments.get(host, {})),
            "gpu_health": gpu_health_of(results.get("gpu_health")),
        }
    totals = {}
    for entry in report["hosts"].values():
        totals[entry["result"]] = totals.get(entry["result"], 0) + 1
    # Each failed host with the stage it failed in (verify: a knob is off).
    failed = {h: (e["rollout"] or {}).get("stage", "verify") for h, e in report["hosts"].items() if e["result"] == "fail"}
    report["summary"] = {"hosts": len(names), **totals, "failed": failed}
    return report


def gpu_health_of(result):
    """The host's GPU health in the report: its worst class and the GPUs that are not healthy, as the
    plan judged them (None without a health read)."""
    if not isinstance(result, dict):
        return None
    return {"class": result.get("class"), "summary": result.get("after"), "gpus": list(result.get("gpus") or [])}


def gpu_health_rows(hosts):
    """fleet.md's GPU health section: one row per GPU that is not healthy, worst first."""
    order = ("rma", "reset", "warn")
    found = [(host, gpu) for host, entry in hosts.items() for gpu in (entry.get("gpu_health") or {}).get("gpus") or []
             if gpu.get("class") in order]
    if not found:
        return []
    rows = ["", "## GPU health", "", "rma: the GPU goes back to its vendor (the rollout keeps the host out); reset: "
            "a GPU reset or a reboot clears it; warn: reported, never blocking (docs/gpu-health.md).", "",
            "| host | GPU | bus id | serial | uuid | class | signals |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for host, gpu in sorted(found, key=lambda item: (order.index(item[1]["class"]), item[0], item[1]["index"])):
        signals = "; ".join(f"{name}: {detail} ({found})" for name, (found, detail) in sorted(gpu["signals"].items()))
        rows.append(f"| {host} | {gpu['index']} | {gpu['bus_id']} | {gpu.get('serial') or '—'} | {gpu.get('uuid') or '—'} "
                    f"| {gpu['class']} | {clip(signals, 2 * CELL_WIDTH)} |")
    return rows


def run_summary(report, run, catalog=None):
    """What the next node of an AWX workflow needs of this run (set_stats: reports written inside
    an execution environment are gone with it): verdict counts, each failed host with its stage
    and reason, each host not verified with the reason, the knobs still pending per host (every
    planned change under --check; those a host did not reach otherwise), the hosts drained and
    rebooted. Host and knob names, stages and the report's reasons only: no variable's value."""
    hosts = report["hosts"]
    names = [key for key, _label, _tests in knobs(catalog) if key not in {extra[0] for extra in EXTRA}]
    pending = {}
    for host, entry in sorted(run.items()):
        results, check_mode = entry.get("results") or {}, bool(entry.get("check_mode"))
        waiting = [k for k in names if isinstance(results.get(k), dict) and results[k].get("changed")
                   and not (results[k].get("applied") and not check_mode)]
        if waiting:
            pending[host] = waiting
    done = {word: sorted(h for h, e in hosts.items() if (e["rollout"] or {}).get(word)) for word in ("drained", "rebooted")}
    return {
        "check_mode": any(bool(entry.get("check_mode")) for entry in run.values()),
        "hosts": len(hosts),
        "verdicts": {key.replace(" ", "_"): report["summary"].get(key, 0) for key in ("pass", "fail", "not verified")},
        "failed": {h: {"stage": (e["rollout"] or {}).get("stage", "verify"), "reason": e["reason"]}
                   for h, e in hosts.items() if e["result"] == "fail"},
        "not_verified": {h: e["reason"] for h, e in hosts.items() if e["result"] == "not verified"},
        "pending": pending,
        **done,
    }


def summary_key(awx_job_id=None, now=None):
    """The summary's set_stats key, unique to the run: AWX merges the artifacts of a sliced job's
    slices, and of a workflow's converging branches, into one mapping, in no defined order."""
    if awx_job_id not in (None, ""):
        return SUMMARY_PREFIX + "awx_" + re.sub(r"\W", "_", str(awx_job_id))
    now = now or datetime.now(timezone.utc)
    return f"{SUMMARY_PREFIX}run_{now:%Y%m%dT%H%M%SZ}_{os.urandom(3).hex()}"


def counts(summary):
    """'3 pass, 2 fail (gpu-03 in stage plan, gpu-05 in stage runtime), 3 not verified'."""
    failed = summary.get("failed") or {}
    stages = " (" + ", ".join(f"{h} in stage {s}" for h, s in failed.items()) + ")" if failed else ""
    return (f"{summary.get('pass', 0)} pass, {summary.get('fail', 0)} fail{stages}, "
            f"{summary.get('not verified', 0)} not verified")


def clip(text, width=CELL_WIDTH):
    text = text.replace("|", "\\|")
    return text if len(text) <= width else text[:width - 1] + "…"


def named(host, label, check):
    """The check's message, led by host and knob as the suite's own messages are."""
    detail = check["detail"] or check["status"]
    return detail if detail.startswith(host + ": ") else f"{host}: {label}: {detail}"


def attention(entry, knobs):
    """The knobs that are off, or 'not verified: failed in stage drain: ...; drained'."""
    if entry["failing"]:
        return ", ".join(knobs[k] for k in entry["failing"])
    rollout = entry.get("rollout") or {}
    done = [word for word in ("drained", "rebooted") if rollout.get(word)]
    return "; ".join([f"{entry['result']}: {entry['reason']}"] + ([" and ".join(done)] if done else []))


def markdown(report, drift=""):
    """fleet.md; drift is the drift watch's section (drift_section), placed after the knobs that are off."""
    hosts, knobs = report["hosts"], report["knobs"]
    summary = report["summary"]
    lines = [
        "# infertune fleet report", "",
        f"Generated {report['generated']}. {summary['hosts']} hosts: {counts(summary)}.", "",
    ]
    failing = [h for h, e in hosts.items() if e["result"] != "pass"]
    if failing:
        lines += ["Needs attention: " + "; ".join(f"**{h}** ({attention(hosts[h], knobs)})" for h in failing), ""]
    lines += ["✅ verified, ❌ off, ⚠️ check broke, – not applicable here, · not checked; "
              "↻ changed by the last tuning run.", "",
              "| host | result | " + " | ".join(knobs.values()) + " |",
              "| --- | --- | " + " | ".join(["---"] * len(knobs)) + " |"]
    for host, entry in hosts.items():
        cells = [SYMBOL[k["verify"]] + (" ↻" if k["changed"] else "") for k in entry["knobs"].values()]
        lines.append(f"| {host} | {entry['result']} | " + " | ".join(cells) + " |")
    off = [f"- {named(host, knob['label'], check)}" for host, entry in hosts.items()
           for knob in entry["knobs"].values() for check in knob["checks"].values()
           if check["status"] in ("fail", "error")]
    if off:
        lines += ["", "## Knobs that are off", "", *off]
    lines += gpu_health_rows(hosts)
    if drift:
        lines += ["", drift]
    decoded = {h: e["decode"] for h, e in hosts.items() if e["decode"]}
    if decoded:
        lines += ["", "## Decode latency at batch 1", "",
                  "| host | model | floor ms/token | fastest measured | ms/token | of floor |",
                  "| --- | --- | --- | --- | --- | --- |"]
        for host, d in decoded.items():
            floor = f"{d['floor_ms_per_token']:.2f} ({d['tp']}× {d['gpu']})" if "floor_ms_per_token" in d else "—"
            ms = f"{d['ms_per_token']:.2f}" if "ms_per_token" in d else "—"
            share = f"{d['of_floor_percent']:.0f}%" if "of_floor_percent" in d else "—"
            lines.append(f"| {host} | {d.get('model', '—')} | {floor} | {d.get('backend', '—')} | {ms} | {share} |")
    linked = {h: e["interconnect"] for h, e in hosts.items() if e["interconnect"]}
    if linked:
        lines += ["", "## GPU interconnect (measured, not required)", "",
                  "| host | GPUs | lowest peer P2P, bidirectional | all-reduce bus bandwidth avg / peak | notes |",
                  "| --- | --- | --- | --- | --- |"]
        for host, i in linked.items():
            low, avg = i["min_peer_bidirectional_gbps"], i["avg_busbw_gbps"]
            p2p = f"{low:.1f} GB/s" if low is not None else "—"
            busbw = f"{avg:.1f} / {i['peak_busbw_gbps']:.1f} GB/s" if avg is not None else "—"
            notes = clip("; ".join(i["notes"])) or "—"
            lines.append(f"| {host} | {i['gpus'] or '—'} | {p2p} | {busbw} | {notes} |")
    lines += ["", "## Per host: before → after, verification", ""]
    for host, entry in hosts.items():
        lines += [f"<details><summary>{host}: {entry['result']}, {entry['record']}</summary>", "",
                  "| knob | before → after | verification |", "| --- | --- | --- |"]
        for knob in entry["knobs"].values():
            changes = knob["tuning"]["change"] if knob["tuning"] else "—"
            notes = "; ".join(PREFIX.sub("", c["detail"]) for c in knob["checks"].values() if c["detail"])
            lines.append(f"| {knob['label']} | {clip(changes)} | {SYMBOL[knob['verify']]} {clip(notes)} |")
        lines += ["", "</details>", ""]
    return "\n".join(lines).rstrip() + "\n"


def record(directory, run):
    """Write each host's results of this run into its fragment, keeping the decode floor and
    the backend A/B; a host without results (it failed before its plan) keeps its fragment."""
    directory = Path(directory)
    for host, entry in run.items():
        if entry.get("results") is None:
            continue
        path = directory / f"{host}.json"
        fragment = json.loads(path.read_text()) if path.exists() else {}
        results = with_aer_trend((fragment.get("results") or {}).get("fabric"), entry["results"])
        fragment.update(host=host, written=datetime.now(timezone.utc).isoformat(timespec="seconds"),
                        check_mode=bool(entry.get("check_mode")), results=results)
        _write_json(path, fragment)


def with_aer_trend(previous, results):
    """results with a warning in front of the PCIe fabric row when an AER counter rose since the
    host's previous record (a link that keeps correcting errors is failing); never a failure."""
    fabric = results.get("fabric")
    if not isinstance(fabric, dict) or not isinstance(previous, dict):
        return results
    old, new = previous.get("aer") or {}, fabric.get("aer") or {}
    rising = [f"{bdf} {kind} {before} → {after}" for bdf, counters in sorted(new.items())
              for kind, before, after in gpu_health.rises(old.get(bdf), counters)]
    if not rising:
        return results
    warning = f"warning: AER counters rose: {', '.join(rising)}; {fabric.get('after', '')}"
    return dict(results, fabric=dict(fabric, aer_rising=rising, after=warning))


def write(directory, hosts=None, run=None, verified=True, catalog=None):
    """fleet.json and fleet.md from the fragments and the JUnit XML (and this run's record of
    each host, when there is one); returns a summary line. verified=False: this run verified
    nothing, so no JUnit file (an earlier run's) is read. catalog: the run's catalog rows
    (catalog_rows), None reads the file."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    junit = read_junit(sorted((directory / "verify").glob("*.xml"))) if verified else {}
    report = build(read_fragments(directory / "hosts"), junit, hosts, run, catalog)
    report["run_summary"] = run_summary(report, run or {}, catalog)
    (directory / "fleet.json").write_text(json.dumps(report, indent=2, sort_keys=False) + "\n")
    (directory / "fleet.md").write_text(markdown(report, drift_section(directory, catalog)))
    return f"{directory / 'fleet.md'}: {report['summary']['hosts']} hosts, {counts(report['summary'])}"


DRIFT_START, DRIFT_END = "<!-- drift:start -->", "<!-- drift:end -->"


def drift_markdown(state, labels):
    """The drift watch's section of fleet.md, from drift.json: per host whether the last drift run
    read it, when it was last read, and each pending knob with the time it was first seen pending."""
    run = state.get("run") or {}
    lines = [DRIFT_START, "## Drift watch", "",
             f"Last drift run {state['last_run']} (exit status {run.get('exit_status')}, "
             f"{len(run.get('hosts') or [])} hosts in the run); last run that read every host of its run: "
             f"{state.get('last_success') or 'none yet'}. Details: drift.json.", "",
             "| host | read by the last run | last read | reboot pending | pending knobs, drifted since | GPUs |",
             "| --- | --- | --- | --- | --- | --- |"]
    for host, entry in state["hosts"].items():
        read = "yes" if entry["checked"] else "no: " + clip(first_line(entry["error"]))
        pending = "; ".join(f"{labels.get(k, k)} since {v['since']}" for k, v in entry["pending"].items())
        reboot = ("yes (" + ", ".join(entry["reboot_reasons"]) + ")") if entry["reboot_pending"] else "no"
        lines.append(f"| {host} | {read} | {entry['last_read'] or 'never'} | {reboot} | {pending or '—'} "
                     f"| {drift_gpus(entry.get('gpu_health'))} |")
    return "\n".join(lines + [DRIFT_END])


def drift_gpus(health):
    """The drift section's GPUs cell: not read and why, healthy, or each GPU that is not."""
    if not health:
        return "—"
    if not health.get("read"):
        return "not read: " + clip(first_line(health.get("error", "")))
    sick = [f"GPU {g['index']} {g['class']}" for g in health.get("gpus") or [] if g.get("class") in ("warn", "reset", "rma")]
    return ", ".join(sick) or f"{len(health.get('gpus') or [])} healthy"


def drift_section(directory, catalog=None):
    """The drift section from DIRECTORY/drift.json, or "" before the first drift run."""
    path = Path(directory) / "drift.json"
    if not path.exists():
        return ""
    return drift_markdown(json.loads(path.read_text()), {key: label for key, label, _tests in knobs(catalog)})


def update_drift_section(directory, catalog=None):
    """Put the drift section into fleet.md in place (the rest stays: a drift run verifies nothing);
    a fleet.md is started for it when there is none yet."""
    path = Path(directory) / "fleet.md"
    text = path.read_text() if path.exists() else "# infertune fleet report\n\nNo rollout or verification report yet.\n"
    section = drift_section(directory, catalog)
    if DRIFT_START in text:
        text = docsection.rewrite(text, section, DRIFT_START, DRIFT_END, str(path))
    else:
        text = text.rstrip("\n") + "\n\n" + section + "\n"
    path.write_text(text)


EARLIER = ("> ⚠️ **Not current.** This report is from an earlier run. A run started {started} has not "
           "written its own yet: it is in progress, or it ended before its report (its output says why).")


def mark_earlier(directory, started):
    """At a run's start: mark the report an earlier run left (fleet.md and fleet.json) as not
    current, so that it never reads as this run's if this run ends before writing its own.
    Returns whether there was one to mark."""
    directory = Path(directory)
    md, js = directory / "fleet.md", directory / "fleet.json"
    if not md.exists():
        return False
    text = md.read_text()
    banner = EARLIER.format(started=started)
    # A report marked by a run that ended without its own keeps one banner: the latest run's.
    text = text.split("\n\n", 1)[1] if text.startswith("> ⚠️ **Not current.**") else text
    md.write_text(banner + "\n\n" + text)
    if js.exists():
        data = json.loads(js.read_text())
        data["not_current"] = banner.removeprefix("> ⚠️ ").replace("**", "")
        js.write_text(json.dumps(data, indent=2) + "\n")
    return True


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m infertune.report", description=__doc__.splitlines()[0])
    parser.add_argument("--dir", default="reports", help="reports directory (default: reports)")
    parser.add_argument("--hosts", help="comma-separated hosts to report (default: every host seen)")
    args = parser.parse_args(argv)
    collection_files(parser.prog, "knob catalog")
    print(write(args.dir, [h for h in (args.hosts or "").split(",") if h]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
