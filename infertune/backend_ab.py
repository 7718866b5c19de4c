"""Summarise an A/B of MoE runner backends on one host: the winner per batch size.

playbooks/benchmark.yml leaves one directory per host:

    plan.json        what happened to each backend (measured / skipped / not_started, why)
                     and the host's batch-1 decode floor
    <backend>.json   infertune.bench_client output, for each measured backend

    python -m infertune.backend_ab reports/benchmark/node1

writes summary.json, summary.md and, when something was measured, decode.png (ms/token
per batch size and backend, with the floor), and prints the Markdown. With --report FILE
the fastest backend at batch 1 goes into that JSON host report under `benchmark`.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from . import needs, plot
from .report import merge_into_host_report


def load(directory: Path) -> tuple[dict, dict]:
    """(plan, {backend: bench_client result}) for the measured backends of the plan."""
    plan = json.loads((directory / "plan.json").read_text())
    measured = {}
    for entry in plan["backends"]:
        if entry["status"] == "measured":
            measured[entry["backend"]] = json.loads((directory / f"{entry['backend']}.json").read_text())
    return plan, measured


def winners(measured: dict, floor_ms: float | None) -> list:
    """Per batch size: every backend's median ms/token and the fastest one."""
    by_batch: dict = {}
    for backend, data in measured.items():
        for row in data["results"]:
            by_batch.setdefault(row["batch"], {})[backend] = row["ms_per_token"]
    rows = []
    for batch in sorted(by_batch):
        times = by_batch[batch]
        ranked = sorted(times, key=lambda b: times[b]["median"])
        best = times[ranked[0]]["median"]
        row = {"batch": batch, "winner": ranked[0], "ms_per_token": {b: times[b] for b in ranked}}
        if len(ranked) > 1:
            row["ahead_of_next_percent"] = 100 * (times[ranked[1]]["median"] - best) / times[ranked[1]]["median"]
        if floor_ms and batch == 1:
            row["floor_ms_per_token"] = floor_ms
            row["winner_of_floor_percent"] = 100 * floor_ms / best
        rows.append(row)
    return rows


def summarise(directory: Path) -> dict:
    plan, measured = load(directory)
    return {"host": plan["host"], "original_backend": plan["original_backend"],
            "measured_at": min((m["started"] for m in measured.values()), default=None),
            "floor_ms_per_token": plan.get("floor_ms_per_token"),
            "backends": plan["backends"],
            "winners": winners(measured, plan.get("floor_ms_per_token"))}


def markdown(summary: dict) -> str:
    lines = [f"# MoE runner backends on {summary['host']}", "",
             f"Configured backend (restored afterwards): `{summary['original_backend']}`."]
    if summary["floor_ms_per_token"]:
        lines.append(f"Batch-1 decode floor: {summary['floor_ms_per_token']:.2f} ms/token.")
    measured = [b["backend"] for b in summary["backends"] if b["status"] == "measured"]
    if summary["winners"]:
        lines += ["", "| batch | " + " | ".join(measured) + " | fastest |",
                  "| --- | " + " | ".join(["---"] * len(measured)) + " | --- |"]
        for row in summary["winners"]:
            cells = [f"{row['ms_per_token'][b]['median']:.2f} (p90 {row['ms_per_token'][b]['p90']:.2f})"
                     if b in row["ms_per_token"] else "-" for b in measured]
            lines.append(f"| {row['batch']} | " + " | ".join(cells) + f" | {row['winner']} |")
        lines.append("")
        lines.append("ms/token, median of the trials (p90 in brackets).")
    else:
        lines += ["", "No backend was measured."]
    others = [b for b in summary["backends"] if b["status"] != "measured"]
    if others:
        lines += ["", "| backend | outcome | why |", "| --- | --- | --- |"]
        lines += [f"| {b['backend']} | {b['status'].replace('_', ' ')} | {b['reason']} |" for b in others]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m infertune.backend_ab", description=__doc__.partition("\n")[0])
    p.add_argument("directory", type=Path, help="one host's results: plan.json and <backend>.json files")
    p.add_argument("--report", type=Path, help="JSON host report to record the fastest batch-1 backend in")
    a = p.parse_args(argv)
    needs.require("plot", p.prog)  # before anything is written: decode.png is part of the summary
    summary = summarise(a.directory)
    batch1 = next((row for row in summary["winners"] if row["batch"] == 1), None)
    if a.report and batch1:
        merge_into_host_report(a.report, "benchmark", {
            "backend": batch1["winner"], "ms_per_token": batch1["ms_per_token"][batch1["winner"]]["median"],
            "measured_at": summary["measured_at"], "results": str(a.directory)})
    (a.directory / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    text = markdown(summary)
    (a.directory / "summary.md").write_text(text)
    measured = [a.directory / f"{b['backend']}.json" for b in summary["backends"] if b["status"] == "measured"]
    if measured:
        plot.draw(plot.load(measured), summary["floor_ms_per_token"], a.directory / "decode.png",
                  f"Decode latency by batch size on {summary['host']}")
    print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
