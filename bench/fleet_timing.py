#!/usr/bin/env python3
"""Time site.yml on fleets of 8 and 32 lab hosts against one `ansible -m setup` round.

For each fleet size the lab is recreated from the image (seed profile on every
host) with sglang's package files, then timed: one `setup` round (the baseline),
site.yml from fresh hosts (kernel install, one reboot each) and site.yml again,
which must report changed=0 on every host.

    .venv/bin/python bench/fleet_timing.py [--hosts 8,32] [--out bench/results/fleet_timing.json]

The default fleet (8 fresh hosts with sglang's files) is restored at the end, as the lab
tests expect.
"""
import argparse
import configparser
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "lab"))
from helpers import BIN, fresh_lab, labctl, playbook, recap  # noqa: E402

PROFILE = "seed-epyc-rtxpro6000"
# Serial makes one play per batch; its header repeats under the rollout play's name.
ROLLOUT_PLAY = yaml.safe_load((ROOT / "playbooks" / "rollout.yml").read_text())[0]["name"]


def fleet(hosts):
    labctl("up", "--fresh", "--hosts", str(hosts), "--profile", PROFILE, "--profile-map", "")


def setup_round():
    start = time.monotonic()
    proc = subprocess.run([str(BIN / "ansible"), "gpu_nodes", "-m", "ansible.builtin.setup"],
                          cwd=ROOT, capture_output=True, text=True, check=False)
    if proc.returncode:
        raise SystemExit(proc.stdout[-3000:] + proc.stderr[-3000:])
    return round(time.monotonic() - start, 1)


def run_site(hosts):
    start = time.monotonic()
    rc, out = playbook("site.yml")
    seconds = time.monotonic() - start
    if rc:
        raise SystemExit(out[-6000:])
    per_host = recap(out)
    if len(per_host) != hosts:
        raise SystemExit(f"PLAY RECAP lists {len(per_host)} hosts, expected {hosts}:\n{out[-6000:]}")
    # Not one number: run_once tasks count on the first host of a batch or play only,
    # and the canary skips the canary check, so hosts differ by a few tasks.
    tasks = sorted({r["ok"] + r["changed"] + r["skipped"] for r in per_host.values()})
    return {"seconds": round(seconds, 1), "seconds_per_host": round(seconds / hosts, 2),
            "batches": out.count(f"PLAY [{ROLLOUT_PLAY}]"), "tasks_per_host": tasks,
            "changed": {h: r["changed"] for h, r in per_host.items()}}


def measure(hosts):
    fleet(hosts)
    playbook("lab/provision/sglang.yml", check=True)
    setup_s = setup_round()
    converge = run_site(hosts)
    noop = run_site(hosts)
    changed = {h: c for h, c in noop["changed"].items() if c}
    if changed:
        raise SystemExit(f"no-op site.yml changed something on {len(changed)} host(s): {changed}")
    for run in (converge, noop):
        run["changed"] = sum(run["changed"].values())
    return {"hosts": hosts, "setup_seconds": setup_s, "converge": converge, "noop": noop,
            "noop_over_setup": round(noop["seconds"] / setup_s, 1)}


def print_table(rows):
    print(f"{'hosts':>5} {'setup s':>7} {'run':>8} {'s':>7} {'s/host':>6} {'batches':>7} "
          f"{'tasks/host':>10} {'changed':>7}")
    for r in rows:
        for name in ("converge", "noop"):
            run = r[name]
            tasks = "-".join(str(t) for t in sorted({run["tasks_per_host"][0], run["tasks_per_host"][-1]}))
            print(f"{r['hosts']:>5} {r['setup_seconds']:>7} {name:>8} {run['seconds']:>7} "
                  f"{run['seconds_per_host']:>6} {run['batches']:>7} {tasks:>10} {run['changed']:>7}")
        print(f"{'':>5} no-op / setup = {r['noop_over_setup']}x")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", default="8,32", help="fleet sizes, comma-separated (default 8,32)")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "fleet_timing.json")
    args = parser.parse_args()

    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "ansible.cfg")
    result = {"control_node_cpus": os.cpu_count(),
              "pipelining": cfg.getboolean("ssh_connection", "pipelining", fallback=False),
              "forks": cfg.getint("defaults", "forks"), "fleets": []}
    print(f"pipelining {'on' if result['pipelining'] else 'off'} (ansible.cfg), forks {result['forks']}, "
          f"{result['control_node_cpus']} control-node CPUs", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    try:
        for hosts in (int(n) for n in args.hosts.split(",")):
            print(f"{hosts} hosts ...", flush=True)
            result["fleets"].append(measure(hosts))
            # Written after each fleet: a later failure keeps the finished measurements.
            args.out.write_text(json.dumps(result, indent=2) + "\n")
    finally:
        fresh_lab()
    print_table(result["fleets"])


if __name__ == "__main__":
    main()
