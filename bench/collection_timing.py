#!/usr/bin/env python3
"""Time a no-op site run from the installed collection against the same run from the checkout.

On the lab as it is (its hosts first converged by the checkout's site.yml), each round runs,
in turn: `ansible-playbook site.yml` in the checkout (its ansible.cfg); `ansible-playbook
infertune.fleet.site` in an empty directory whose ansible.cfg is docs/collection-ansible.cfg
(the settings collection users are given), from the built tarball installed into an empty
collections path; and the same with no ansible.cfg at all (Ansible's defaults: no
pipelining, 5 forks), for what those settings are worth. Every run must change nothing. A
first round, not counted, leaves each kind its ssh master connections and Python's bytecode
(written for every run, whatever PYTHONDONTWRITEBYTECODE says here: a checkout has its own
from earlier runs, an installed collection writes its own on its first). The lab hosts share
the control node's CPUs, so single runs vary: each figure is the median of REPEAT rounds.

    .venv/bin/python bench/collection_timing.py [--repeat 5] [--out bench/results/collection_timing.json]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "lab"))
from infra.drive import BIN, playbook, recap  # noqa: E402

INVENTORY = ROOT / "inventory" / "lab"


def timed(argv, cwd, env=None):
    """(seconds, hosts) of one no-op run; stops the benchmark when it fails or changes anything."""
    start = time.monotonic()
    proc = subprocess.run([str(a) for a in argv], cwd=cwd, env=env, capture_output=True, text=True, check=False)
    seconds = time.monotonic() - start
    out = proc.stdout + proc.stderr
    changed = {h: r["changed"] for h, r in recap(out).items() if r["changed"]}
    if proc.returncode or changed or not recap(out):
        raise SystemExit(f"{' '.join(map(str, argv))} in {cwd}: rc={proc.returncode}, changed {changed}\n{out[-4000:]}")
    return seconds, sorted(recap(out))


def bytecode_env():
    return {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def install(base):
    """The tarball built from this checkout, installed into base/collections; the environment
    that finds it there and no other configuration."""
    galaxy = [str(BIN / "ansible-galaxy"), "collection"]
    subprocess.run([*galaxy, "build", "--output-path", str(base / "dist")], cwd=ROOT, check=True, capture_output=True)
    (tarball,) = (base / "dist").glob("*.tar.gz")
    env = {k: v for k, v in bytecode_env().items() if not k.startswith("ANSIBLE_")}
    env.update(ANSIBLE_COLLECTIONS_PATH=str(base / "collections"), HOME=str(base),
               PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}")
    subprocess.run([*galaxy, "install", str(tarball), "-p", str(base / "collections")], cwd=base, env=env, check=True,
                   capture_output=True)
    return env


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="rounds; each figure is their median (default 5)")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "collection_timing.json")
    args = parser.parse_args()

    playbook("site.yml", check=True)  # converge: every timed run is then a no-op
    # Also HOME, where no ~/.ansible.cfg is read: short, as ssh's ControlPath socket under
    # ~/.ansible/cp must fit a Unix socket path (107 bytes).
    with tempfile.TemporaryDirectory(prefix="itc-") as tmp:
        base = Path(tmp)
        env = install(base)
        configured, bare = base / "configured", base / "bare"
        configured.mkdir()
        bare.mkdir()
        shutil.copy(ROOT / "docs" / "collection-ansible.cfg", configured / "ansible.cfg")
        installed = [BIN / "ansible-playbook", "infertune.fleet.site", "-i", INVENTORY]
        kinds = {"checkout": ([BIN / "ansible-playbook", "site.yml"], ROOT, bytecode_env()),
                 "installed": (installed, configured, env), "installed_without_ansible_cfg": (installed, bare, env)}
        runs, fleets = {name: [] for name in kinds}, set()
        for n in range(args.repeat + 1):
            for name, (argv, cwd, run_env) in kinds.items():
                seconds, hosts = timed(argv, cwd, run_env)
                runs[name].append(seconds)
                fleets.add(tuple(hosts))
            print(f"round {n}/{args.repeat}{' (warm-up)' if not n else ''}: "
                  + ", ".join(f"{k} {v[-1]:.1f} s" for k, v in runs.items()), flush=True)
        runs = {name: values[1:] for name, values in runs.items()}
    if len(fleets) != 1:
        raise SystemExit(f"the runs covered different hosts: {sorted(fleets)}")

    seconds = {name: round(statistics.median(values), 1) for name, values in runs.items()}
    result = {"control_node_cpus": os.cpu_count(), "hosts": len(fleets.pop()), "repeat": args.repeat,
              "seconds": seconds,
              "installed_over_checkout": round(seconds["installed"] / seconds["checkout"], 2),
              "runs": {name: [round(v, 1) for v in values] for name, values in runs.items()}}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: result[k] for k in ("hosts", "seconds", "installed_over_checkout")}))


if __name__ == "__main__":
    main()
