#!/usr/bin/env python3
"""Time site.yml converge and no-op re-run on a 4-CPU and a 128-CPU lab host.

Shows that the number of tasks does not grow with the CPU or GPU count (one
module call per knob per host) and what a converge and a no-op run cost,
against one `ansible -m setup` round on the same hosts.

    .venv/bin/python bench/task_scaling.py [--out bench/results/task_scaling.json]

It recreates the lab with two hosts; `lab/labctl up --fresh` restores the
default fleet afterwards.
"""
import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "lab"))
from infra.drive import BIN, labctl, playbook, recap  # noqa: E402

PROFILES = {
    "lab-gpu-01": ("small-epyc-rtxpro6000", 1),
    "lab-gpu-02": ("seed-epyc-rtxpro6000", 8),
}


def timed(fn, *args):
    start = time.monotonic()
    result = fn(*args)
    return time.monotonic() - start, result


def setup_round(limit):
    proc = subprocess.run([str(BIN / "ansible"), limit, "-m", "ansible.builtin.setup"],
                          cwd=ROOT, capture_output=True, text=True, check=False)
    if proc.returncode:
        raise SystemExit(proc.stdout[-3000:])


def run_site(host, gpus, expectations):
    seconds, (rc, out) = timed(playbook, "site.yml", "-i", "inventory/lab", "-i", str(expectations),
                               "--limit", host)
    if rc:
        raise SystemExit(out[-6000:])
    r = recap(out)[host]
    return {"seconds": round(seconds, 1), "tasks": r["ok"] + r["changed"] + r["skipped"],
            "changed": r["changed"]}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "task_scaling.json")
    args = parser.parse_args()

    labctl("up", "--fresh", "--hosts", str(len(PROFILES)), "--profile-map",
           ",".join(f"{h}={p}" for h, (p, _) in PROFILES.items()))
    # The verification reads the inventory, so each host's GPU expectations go there.
    expectations = args.out.parent / "task_scaling_inventory.yml"
    args.out.parent.mkdir(parents=True, exist_ok=True)
    expectations.write_text(json.dumps({"gpu_nodes": {"hosts": {
        h: {"gpu_gate_expected_count": g, "sglang_tp": g} for h, (_, g) in PROFILES.items()}}}))
    rows = []
    for host, (profile, gpus) in PROFILES.items():
        cpus = int(labctl("exec", host, "--", "sh", "-c",
                          "ls -d /sys/devices/system/cpu/cpu[0-9]* | wc -l").strip())
        setup_s, _ = timed(setup_round, host)
        rows.append({"host": host, "profile": profile, "cpus": cpus, "gpus": gpus,
                     "setup_seconds": round(setup_s, 1),
                     "converge": run_site(host, gpus, expectations),
                     "noop": run_site(host, gpus, expectations)})

    args.out.write_text(json.dumps(rows, indent=2) + "\n")
    print(f"{'profile':24} {'cpus':>4} {'gpus':>4} {'setup s':>8} {'converge s':>10} "
          f"{'tasks':>5} {'no-op s':>8} {'tasks':>5} {'changed':>7}")
    for r in rows:
        print(f"{r['profile']:24} {r['cpus']:>4} {r['gpus']:>4} {r['setup_seconds']:>8} "
              f"{r['converge']['seconds']:>10} {r['converge']['tasks']:>5} "
              f"{r['noop']['seconds']:>8} {r['noop']['tasks']:>5} {r['noop']['changed']:>7}")
    noop_tasks = {r["noop"]["tasks"] for r in rows}
    if len(noop_tasks) != 1:
        raise SystemExit(f"task count differs between profiles: {noop_tasks}")


if __name__ == "__main__":
    main()
