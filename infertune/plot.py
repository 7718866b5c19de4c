"""Plot ms/token against batch size, one line per backend, with the decode floor.

    python -m infertune.plot cutlass.json cutedsl.json --floor-ms 6.15 --out decode.png

Each input is a file written by infertune.bench_client; points are the medians, the
error bars reach up to the p90.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from . import needs


def pyplot():
    """matplotlib's pyplot, drawing to files only (hosts running this have no display); imported
    when a plot is drawn, so that main() can say in one line what a control node without it lacks."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plain_ticks(value, _position):
    return f"{value:g}"  # 20, not 2x10^1, on the log axis


def load(paths) -> list:
    series = []
    for path in paths:
        data = json.loads(Path(path).read_text())
        points = [(r["batch"], r["ms_per_token"]["median"], r["ms_per_token"]["p90"])
                  for r in data["results"]]
        series.append({"backend": data["backend"], "points": sorted(points)})
    return series


def draw(series: list, floor_ms: float | None, out: Path, title: str) -> None:
    plt = pyplot()
    from matplotlib.ticker import FuncFormatter

    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=120)
    for s in series:
        batch, median, p90 = zip(*s["points"])
        ax.errorbar(batch, median, yerr=[[0] * len(median), [p - m for p, m in zip(p90, median)]],
                    marker="o", capsize=3, label=s["backend"])
    if floor_ms is not None:
        ax.axhline(floor_ms, color="black", linestyle="--", linewidth=1,
                   label=f"batch-1 floor {floor_ms:g} ms/token")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(FuncFormatter(plain_ticks))
    ax.yaxis.set_minor_formatter(FuncFormatter(plain_ticks))
    batches = sorted({p[0] for s in series for p in s["points"]})
    ax.set_xticks(batches, [str(b) for b in batches])
    ax.set_xlabel("batch size (concurrent requests)")
    ax.set_ylabel("ms per token (median, bar to p90)")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m infertune.plot", description=__doc__.partition("\n")[0])
    p.add_argument("files", nargs="+", help="JSON files from infertune.bench_client")
    p.add_argument("--floor-ms", type=float, help="decode floor from infertune.roofline")
    p.add_argument("--out", required=True, type=Path, help="PNG to write")
    p.add_argument("--title", default="Decode latency by batch size")
    a = p.parse_args(argv)
    needs.require("plot", p.prog)
    draw(load(a.files), a.floor_ms, a.out, a.title)
    return 0


if __name__ == "__main__":
    sys.exit(main())
