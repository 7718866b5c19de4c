"""Interconnect measurements for the host report: the text output of CUDA samples'
p2pBandwidthLatencyTest and of nccl-tests' all_reduce_perf, parsed into JSON.

    python -m infertune.interconnect --p2p p2p.txt --all-reduce all_reduce.txt \\
        [--p2p-failed TEXT] [--all-reduce-failed TEXT] [--not-installed p2p|all_reduce] \\
        [--report reports/hosts/<host>.json]

A measurement, not a requirement: nothing here passes or fails a host. Each tool's record
has a status: "measured" (with the figures; a "warning" too when the run failed after
printing them, e.g. all_reduce_perf found wrong values), "failed" or "unreadable" (with a
"warning" saying why), or "not installed". With --report the records go into the JSON host
report under `interconnect`; the summary is printed either way.
"""
from __future__ import annotations

import argparse
import math
import re
import sys
from datetime import datetime, timezone
from pathlib import Path

# "Unidirectional P2P=Enabled Bandwidth (P2P Writes) Matrix (GB/s)", "P2P=Disabled Latency
# Matrix (us)", ...; CUDA releases before the P2P Writes/Reads variants print no "(P2P ...)".
P2P_TITLE = re.compile(r"(?:(Uni|Bi)directional )?P2P=(Enabled|Disabled) (Bandwidth|Latency)"
                       r"(?: \(P2P (Writes|Reads)\))? Matrix \((?:GB/s|us)\)")
CONNECTIVITY_TITLE = "P2P Connectivity Matrix"
GROUPS = ("unidirectional_gbps", "bidirectional_gbps", "latency_us")
DEVICE = re.compile(r"Device: (\d+), (.+), pciBusID: ")
AVG_BUSBW = re.compile(r"#\s*Avg bus bandwidth\s*:\s*(\S+)")
OUT_OF_BOUNDS = re.compile(r"#\s*Out of bounds values\s*:\s*(\d+)")
NCCL_VERSION = re.compile(r"^NCCL version (\S+)")
# "# nccl-tests version 2.19.6 nccl-headers=22809 nccl-library=22809": NCCL 2.28.9.
TESTS_VERSION = re.compile(r"#\s*nccl-tests version (\S+) .*nccl-library=(\d+)")


class Unreadable(ValueError):
    """The output is not what the tool prints when it finishes: the message says how."""


def _number(token: str) -> float | None:
    """A finite number, or None ("N/A", "nan", anything else)."""
    try:
        value = float(token)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _matrix(lines: list[str], at: int, title: str) -> list[list[float]]:
    """The square matrix whose title is lines[at]: a header of column numbers, then one row
    per GPU led by its number (the latency matrices' CPU rows come after, and are not read)."""
    head = next((i for i in range(at + 1, min(at + 3, len(lines))) if lines[i].strip()), None)
    header = lines[head].split() if head is not None else []
    size = len(header) - 1
    if size < 1 or header[1:] != [str(i) for i in range(size)]:
        raise Unreadable(f"'{title}': no header of GPU numbers under the title")
    rows = []
    for i, line in enumerate(lines[head + 1:head + 1 + size]):
        tokens = line.split()
        values = [_number(t) for t in tokens[1:]]
        if tokens[:1] != [str(i)] or len(values) != size or None in values:
            break
        rows.append(values)
    if len(rows) != size:
        raise Unreadable(f"'{title}': {len(rows)} of {size} GPU rows readable (output cut short or garbled)")
    return rows


def _peers(matrix: list[list[float]]):
    """((value, [row, column]) for every off-diagonal cell."""
    return ((v, [i, j]) for i, row in enumerate(matrix) for j, v in enumerate(row) if i != j)


def _extreme(matrix: list[list[float]], pick) -> tuple:
    """(value, [row, column]) of the lowest (min) or highest (max) peer cell; (None, None) without one."""
    return pick(_peers(matrix), key=lambda cell: cell[0], default=(None, None))


def parse_p2p(text: str) -> dict:
    """p2pBandwidthLatencyTest output -> matrices (GB/s, us; GPU rows only) and their summary."""
    lines = text.splitlines()
    out: dict = {"devices": [], "connectivity": None, **{group: {} for group in GROUPS}}
    for at, line in enumerate(lines):
        stripped = line.strip()
        if device := DEVICE.match(stripped):
            out["devices"].append(device.group(2))
        elif stripped == CONNECTIVITY_TITLE:
            out["connectivity"] = [[int(v) for v in row] for row in _matrix(lines, at, stripped)]
        elif title := P2P_TITLE.fullmatch(stripped):
            direction, state, kind, method = title.groups()
            group = f"{direction.lower()}directional_gbps" if kind == "Bandwidth" else "latency_us"
            key = f"p2p_{state.lower()}" + ("_reads" if method == "Reads" else "")
            out[group][key] = _matrix(lines, at, stripped)
    matrices = [m for group in GROUPS for m in out[group].values()]
    if not matrices:
        raise Unreadable("no P2P bandwidth or latency matrix (not p2pBandwidthLatencyTest output?)")
    sizes = {len(m) for m in matrices + ([out["connectivity"]] if out["connectivity"] else [])}
    if out["devices"]:
        sizes.add(len(out["devices"]))
    if len(sizes) != 1:
        raise Unreadable(f"the matrices disagree on the number of GPUs: {sorted(sizes)}")
    out["gpus"] = sizes.pop()
    uni, bi, latency = (out[group].get("p2p_enabled", []) for group in GROUPS)
    out["min_peer_unidirectional_gbps"] = _extreme(uni, min)[0]
    out["min_peer_bidirectional_gbps"], out["min_peer_bidirectional_pair"] = _extreme(bi, min)
    out["max_peer_latency_us"] = _extreme(latency, max)[0]
    # Either direction refused is a pair NCCL cannot use P2P between.
    refused = {tuple(sorted(pair)) for v, pair in _peers(out["connectivity"] or []) if not v}
    out["pairs_without_p2p"] = [list(pair) for pair in sorted(refused)] if out["connectivity"] else None
    return out


def _columns(header: list[str]) -> dict:
    """Column indexes from the table header (size first): type, redop, and per placement
    (out-of-place first, in-place second) time, algbw, busbw and #wrong ("error" in older releases)."""
    def where(*names):
        return [i for i, name in enumerate(header) if name in names]
    busbw, algbw, time, wrong = where("busbw"), where("algbw"), where("time", "cputime"), where("#wrong", "error")
    if len(busbw) != 2 or len(algbw) != 2 or len(time) < 2 or header[0] != "size":
        raise Unreadable("the result table's header is not all_reduce_perf's: " + " ".join(header))
    return {"type": header.index("type") if "type" in header else None,
            "redop": header.index("redop") if "redop" in header else None,
            "placements": [{"time_us": time[k], "algbw_gbps": algbw[k], "busbw_gbps": busbw[k],
                            "wrong": wrong[k] if len(wrong) == 2 else None} for k in (0, 1)]}


def parse_all_reduce(text: str) -> dict:
    """all_reduce_perf output -> every row, the peak bus bandwidth and where, the average, #wrong."""
    columns, rows, ranks, said = None, [], 0, None
    out = {"avg_busbw_gbps": None, "out_of_bounds": None, "nccl_version": None, "nccl_tests_version": None}
    for line in text.splitlines():
        tokens = line.split()
        if not tokens:
            continue
        if tokens[0].startswith("#"):
            body = line.strip().lstrip("#").split()
            if "size" in body and "busbw" in body:
                columns = _columns(body)
            elif body[:1] == ["Rank"]:
                ranks += 1
            elif match := AVG_BUSBW.match(line.strip()):
                out["avg_busbw_gbps"] = _number(match.group(1))
            elif match := OUT_OF_BOUNDS.match(line.strip()):
                out["out_of_bounds"] = int(match.group(1))
            elif match := TESTS_VERSION.match(line.strip()):
                code = int(match.group(2))
                out["nccl_tests_version"] = match.group(1)
                out["nccl_version"] = out["nccl_version"] or f"{code // 10000}.{code // 100 % 100}.{code % 100}"
        elif match := NCCL_VERSION.match(line):
            out["nccl_version"] = match.group(1)
        elif columns and tokens[0].isdigit():
            rows.append(_row(tokens, columns))
        elif said is None:
            said = line.strip()[:200]
    if not rows:
        # The first line outside the header is, in a run that failed, what went wrong.
        raise Unreadable("no result rows in the all_reduce_perf output" + (f": {said}" if said else ""))
    if out["avg_busbw_gbps"] is None:
        raise Unreadable(f"{len(rows)} result rows but no '# Avg bus bandwidth' line: the run did not finish")
    peak = max(rows, key=lambda r: max(p["busbw_gbps"] for p in (r["out_of_place"], r["in_place"])))
    wrong = [p["wrong"] for r in rows for p in (r["out_of_place"], r["in_place"]) if p["wrong"] is not None]
    out.update(peak_busbw_gbps=max(peak["out_of_place"]["busbw_gbps"], peak["in_place"]["busbw_gbps"]),
               peak_size_bytes=peak["size_bytes"],
               # None: validation was off (-c 0), nccl-tests printed N/A.
               wrong=int(sum(wrong)) if wrong else None, ranks=ranks or None, rows=rows)
    return out


def _row(tokens: list[str], columns: dict) -> dict:
    def placement(index):
        values = {key: _number(tokens[i]) if i is not None and i < len(tokens) else None for key, i in index.items()}
        if values["busbw_gbps"] is None:
            raise Unreadable(f"result row without a bus bandwidth: {' '.join(tokens)}")
        if values["wrong"] is not None:
            values["wrong"] = int(values["wrong"])
        return values
    row = {"size_bytes": int(tokens[0]),
           **{k: tokens[columns[k]] if columns[k] is not None else None for k in ("type", "redop")}}
    row["out_of_place"], row["in_place"] = (placement(p) for p in columns["placements"])
    return row


PARSERS = {"p2p": parse_p2p, "all_reduce": parse_all_reduce}


def record(tool: str, output: Path | None = None, failed: str | None = None, missing: bool = False) -> dict:
    """One tool's entry in the host report; never raises on what the tool printed."""
    if missing:
        return {"status": "not installed"}
    text = output.read_text(errors="replace") if output and output.exists() else ""
    try:
        result = {"status": "measured", **PARSERS[tool](text)}
    except Unreadable as problem:
        result = {"status": "failed" if failed else "unreadable",
                  "warning": "; ".join(filter(None, (failed, str(problem))))}
    else:
        if failed:
            result["warning"] = failed
    if text:
        result["output"] = str(output)
    return result


def _size(n: int) -> str:
    """8 -> '8 B', 268435456 -> '256 MiB'."""
    unit = 0
    while n >= 1024 and unit < 3:
        n, unit = n / 1024, unit + 1
    return f"{n:g} {('B', 'KiB', 'MiB', 'GiB')[unit]}"


def summary(records: dict) -> list[str]:
    """One line per tool, for the playbook's output."""
    lines = []
    for tool, label in (("p2p", "P2P"), ("all_reduce", "all-reduce")):
        entry = records.get(tool)
        if entry is None:
            continue
        if entry["status"] != "measured":
            lines.append(f"{label}: {entry['status']}" + (f": {entry['warning']}" if entry.get("warning") else ""))
            continue
        if tool == "p2p":
            low, pair = entry["min_peer_bidirectional_gbps"], entry["min_peer_bidirectional_pair"]
            text = f"P2P: {entry['gpus']} GPU" + ("s" if entry["gpus"] != 1 else "")
            if low is not None:
                text += f", lowest peer bidirectional {low:.1f} GB/s (GPUs {pair[0]} and {pair[1]})"
            if entry["pairs_without_p2p"]:
                text += f", {len(entry['pairs_without_p2p'])} GPU pairs without P2P access"
        else:
            text = (f"all-reduce: bus bandwidth {entry['avg_busbw_gbps']:.1f} GB/s average, "
                    f"{entry['peak_busbw_gbps']:.1f} GB/s peak at {_size(entry['peak_size_bytes'])}")
            if entry["wrong"]:
                text += f", {entry['wrong']} wrong values"
        lines.append(text + (f" (warning: {entry['warning']})" if entry.get("warning") else ""))
    return lines


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m infertune.interconnect", description=__doc__.partition("\n")[0])
    p.add_argument("--p2p", type=Path, help="p2pBandwidthLatencyTest output")
    p.add_argument("--all-reduce", type=Path, help="all_reduce_perf output")
    p.add_argument("--p2p-failed", metavar="TEXT", help="how the p2p run failed (exit status, end of stderr)")
    p.add_argument("--all-reduce-failed", metavar="TEXT", help="how the all-reduce run failed")
    p.add_argument("--not-installed", action="append", default=[], choices=sorted(PARSERS),
                   help="a tool the host does not have (repeatable)")
    p.add_argument("--report", type=Path, help="JSON host report to record the measurement in, under `interconnect`")
    a = p.parse_args(argv)
    sources = {"p2p": (a.p2p, a.p2p_failed), "all_reduce": (a.all_reduce, a.all_reduce_failed)}
    records = {tool: record(tool, output, failed, tool in a.not_installed)
               for tool, (output, failed) in sources.items()
               if output or failed or tool in a.not_installed}
    if a.report:
        # Imported here: the report module needs PyYAML, the parsers only the standard library.
        from .report import merge_into_host_report
        merge_into_host_report(a.report, "interconnect", {
            "measured_at": datetime.now(timezone.utc).isoformat(timespec="seconds"), **records})
    print("\n".join(summary(records)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
