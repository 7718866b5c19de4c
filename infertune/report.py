"""Fleet report: host x knob, before -> after as the tuning modules returned it, and the
verification result, as Markdown (readable at a glance for dozens of hosts) and JSON.

    python -m infertune.report [--dir reports] [--hosts h1,h2,...]

Reads DIR/hosts/<host>.json (one fragment per host, written by roles/report after
tuning; the decode floor and the backend A/B add their keys there) and DIR/verify/*.xml
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

# (key, label, verification tests, registered tuning results), in playbook order.
KNOBS = (
    ("kernel", "kernel", ("running_kernel",), ("kernel_install", "kernel_boot")),
    ("cmdline", "command line", ("kernel_cmdline",), ("kernel_cmdline_result",)),
    ("reboot", "reboot", (), ("kernel_reboot_result",)),
    ("amd_pstate", "cpufreq driver", ("cpufreq_driver",), ("cpu_power_amd_pstate",)),
    ("cpufreq", "governor / EPP", ("cpufreq_governor", "cpufreq_epp"), ("cpu_power_cpufreq",)),
    ("cpuidle", "C-states", ("no_deep_cstates",), ("cpu_power_cpuidle",)),
    ("numa", "NUMA balancing", ("numa_balancing",), ("numa_balancing_result",)),
    ("mrrs", "MaxReadReq", ("pcie_mrrs", "pcie_mrrs_untouched_elsewhere"), ("pcie_mrrs_result",)),
    ("nvidia", "NVIDIA options", ("nvidia_module_options",), ("nvidia_options_result",)),
    ("gpus", "GPUs", ("gpu_count", "gpu_compute_capability"), ()),
    ("persistence", "boot re-apply", ("tuning_persistence",), ()),
    ("sglang", "sglang", ("sglang_unit",), ()),
)
NOT_APPLICABLE = "not applicable on this host"
# Worst first: a knob shows the worst status among its checks.
STATUS_ORDER = ("error", "fail", "pass", "n/a", "not checked")
SYMBOL = {"error": "⚠️", "fail": "❌", "pass": "✅", "n/a": "–", "not checked": "·"}
BDF = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$", re.I)
CELL_WIDTH = 70
# "host: knob: " that every verification message starts with; the detail table has both already.
PREFIX = re.compile(r"^[^:\s]+: [^:]+: ")


def merge_into_host_report(path: Path, key: str, value) -> None:
    """Set one key of a JSON host report (created when absent), atomically."""
    path = Path(path)
    report = json.loads(path.read_text()) if path.exists() else {}
    report[key] = value
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w") as f:
        json.dump(report, f, indent=2, sort_keys=True)
    os.replace(tmp, path)


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


def short(value):
    """A tuning module's before/after value in a few words."""
    if value is None or value == {} or value == "":
        return "—"
    if isinstance(value, dict):
        if value and all(BDF.match(k) for k in value):
            counts = {}
            for v in value.values():
                counts[v] = counts.get(v, 0) + 1
            return ", ".join(f"{v} on {n}" for v, n in sorted(counts.items(), key=str))
        parts = []
        for key, item in value.items():
            if isinstance(item, dict):
                parts.append(f"{key}: " + ", ".join(f"{k} {n}" for k, n in item.items() if n))
            else:
                parts.append(f"{key} {item}")
        return "; ".join(parts)
    return " / ".join(line.strip() for line in str(value).splitlines() if line.strip())


def change(result):
    """'before → after' (or what the task said instead) for one registered result."""
    if result is None:
        return "not run"
    if result.get("skipped"):
        return "skipped" + (f": {result['skip_reason']}" if result.get("skip_reason") else "")
    if result.get("failed"):
        return "failed: " + str(result.get("msg", ""))
    if "rebooted" in result:
        return "rebooted" if result["rebooted"] else "not rebooted"
    if "before" not in result:
        return "changed" if result.get("changed") else "unchanged"
    before, after = result.get("before"), result.get("after")
    if isinstance(before, str) and isinstance(after, str) and "\n" not in before + after and before and after:
        old, new = before.split(), after.split()
        words = [f"-{w}" for w in old if w not in new] + [f"+{w}" for w in new if w not in old]
        return " ".join(words) if words else "unchanged"
    return f"{short(before)} → {short(after)}" if before != after else f"{short(after)} (unchanged)"


def worst(statuses):
    return min(statuses, key=STATUS_ORDER.index) if statuses else "not checked"


def knob_catalog(verified):
    """KNOBS plus a column for any test the catalog does not name yet."""
    known = {t for _, _, tests, _ in KNOBS for t in tests}
    extra = sorted({t for tests in verified.values() for t in tests} - known)
    return list(KNOBS) + [(t, t.replace("_", " "), (t,), ()) for t in extra]


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


def build(fragments, verified, hosts=None):
    catalog = knob_catalog(verified)
    names = sorted(hosts or set(fragments) | set(verified))
    report = {"generated": datetime.now(timezone.utc).isoformat(timespec="seconds"),
              "knobs": {key: label for key, label, _, _ in catalog}, "hosts": {}}
    for host in names:
        checks = verified.get(host, {})
        results = fragments.get(host, {}).get("results", {})
        knobs = {}
        for key, label, tests, registered in catalog:
            knob_checks = {t: checks[t] for t in tests if t in checks}
            statuses = [c["status"].replace("skipped", "n/a") for c in knob_checks.values()]
            tuning = {r: results.get(r) for r in registered if r in results}
            knobs[key] = {
                "label": label, "verify": worst(statuses) if tests else "not checked",
                "changed": any(bool(r and r.get("changed")) for r in tuning.values()),
                "checks": knob_checks,
                "tuning": {r: {"change": change(res), **({k: res.get(k) for k in ("before", "after", "changed", "msg")
                                                          if k in res} if res else {})}
                           for r, res in tuning.items()},
            }
        failing = [k for k, v in knobs.items() if v["verify"] in ("fail", "error")]
        report["hosts"][host] = {
            "result": "not verified" if not checks else ("fail" if failing else "pass"),
            "failing": failing,
            "tuned_at": fragments.get(host, {}).get("written"),
            "check_mode": fragments.get(host, {}).get("check_mode"),
            "knobs": knobs,
            "decode": decode(fragments.get(host, {})),
        }
    totals = {}
    for entry in report["hosts"].values():
        totals[entry["result"]] = totals.get(entry["result"], 0) + 1
    report["summary"] = {"hosts": len(names), **totals}
    return report


def clip(text, width=CELL_WIDTH):
    text = text.replace("|", "\\|")
    return text if len(text) <= width else text[:width - 1] + "…"


def named(host, label, check):
    """The check's message, led by host and knob as the suite's own messages are."""
    detail = check["detail"] or check["status"]
    return detail if detail.startswith(host + ": ") else f"{host}: {label}: {detail}"


def markdown(report):
    hosts, knobs = report["hosts"], report["knobs"]
    summary = report["summary"]
    lines = [
        "# infertune fleet report", "",
        f"Generated {report['generated']}. {summary['hosts']} hosts: "
        + ", ".join(f"{summary.get(k, 0)} {k}" for k in ("pass", "fail", "not verified")) + ".", "",
    ]
    failing = [h for h, e in hosts.items() if e["result"] != "pass"]
    if failing:
        lines += ["Needs attention: " + "; ".join(
            f"**{h}** ({', '.join(knobs[k] for k in hosts[h]['failing']) or hosts[h]['result']})" for h in failing), ""]
    lines += ["✅ verified, ❌ off, ⚠️ check broke, – not applicable here, · not checked; "
              "↻ changed by the last tuning run.", "",
              "| host | result | " + " | ".join(knobs.values()) + " |",
              "| --- | --- | " + " | ".join("---" for _ in knobs) + " |"]
    for host, entry in hosts.items():
        cells = [SYMBOL[k["verify"]] + (" ↻" if k["changed"] else "") for k in entry["knobs"].values()]
        lines.append(f"| {host} | {entry['result']} | " + " | ".join(cells) + " |")
    off = [f"- {named(host, knob['label'], check)}" for host, entry in hosts.items()
           for knob in entry["knobs"].values() for check in knob["checks"].values()
           if check["status"] in ("fail", "error")]
    if off:
        lines += ["", "## Knobs that are off", "", *off]
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
    lines += ["", "## Per host: before → after, verification", ""]
    for host, entry in hosts.items():
        tuned = f", tuned {entry['tuned_at']}" if entry["tuned_at"] else ", no tuning record"
        lines += [f"<details><summary>{host}: {entry['result']}{tuned}</summary>", "",
                  "| knob | before → after | verification |", "| --- | --- | --- |"]
        for knob in entry["knobs"].values():
            changes = "; ".join(t["change"] for t in knob["tuning"].values()) or "—"
            notes = "; ".join(PREFIX.sub("", c["detail"]) for c in knob["checks"].values() if c["detail"])
            lines.append(f"| {knob['label']} | {clip(changes)} | {SYMBOL[knob['verify']]} {clip(notes)} |")
        lines += ["", "</details>", ""]
    return "\n".join(lines).rstrip() + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m infertune.report", description=__doc__.splitlines()[0])
    parser.add_argument("--dir", default="reports", help="reports directory (default: reports)")
    parser.add_argument("--hosts", help="comma-separated hosts to report (default: every host seen)")
    args = parser.parse_args(argv)
    directory = Path(args.dir)
    verified = read_junit(sorted((directory / "verify").glob("*.xml")))
    hosts = [h for h in (args.hosts or "").split(",") if h]
    report = build(read_fragments(directory / "hosts"), verified, hosts)
    (directory / "fleet.json").write_text(json.dumps(report, indent=2, sort_keys=False) + "\n")
    (directory / "fleet.md").write_text(markdown(report))
    summary = report["summary"]
    print(f"{directory / 'fleet.md'}: {summary['hosts']} hosts, "
          + ", ".join(f"{summary.get(k, 0)} {k}" for k in ("pass", "fail", "not verified")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
