#!/usr/bin/env python3
"""Time site.yml on fleets of 8, 32 and 64 lab hosts against one `ansible -m setup` round, in wall
time and in the control node's CPU seconds (the ansible process tree's user + system).

For each fleet size the lab is recreated from the image (seed profile on every
host) with sglang's package files, then site.yml runs once from fresh hosts (kernel install, one
reboot each) and the rest is timed in REPEAT rounds, each of: one `setup` round (the baseline),
site.yml again, which must report changed=0 on every host and put none into a batch, site.yml
--check on the converged fleet, playbooks/verify.yml alone, and the drift watch
(playbooks/drift.yml, which must find no drift; its textfile goes to a temporary directory).
Each figure is the median of its REPEAT runs. Rounds, not one kind after another: the lab hosts
share the control node's CPUs and single runs vary by 10-25 %, and drifting conditions (a busier
machine later on) then fall on the baseline and the runs alike instead of on the kinds timed
last. Each run's plays are timed too (plan, batches, verification; the drift run's read and
publish): wall seconds from Ansible's json callback, CPU seconds from
bench/callback_plugins/play_cpu.py. Per-host figures divide by the hosts that answered
(`hosts_reached`; a run that does not reach every lab host fails).

--strategy mitogen_linear times the playbooks under Mitogen for Ansible (docs/mitogen.md; not a
dependency: install it where --mitogen points, by default the venv); the `setup` baseline stays
Ansible's own linear round, and so does the converge from fresh hosts (Mitogen's broker exits at
the rollout's wait_for_connection, docs/mitogen.md; the entry says converge_strategy): what is
timed under Mitogen is what a converged fleet costs, the no-op, --check, verify and drift runs.
The JSON keeps one entry per fleet size and strategy; a run for one strategy keeps the other's
entries.

    .venv/bin/python bench/fleet_timing.py [--hosts 8,32,64] [--strategy linear|mitogen_linear]
        [--out bench/results/fleet_timing.json]

The default fleet (8 fresh hosts with sglang's files) is restored at the end, as the lab
tests expect.
"""
import argparse
import configparser
import importlib.util
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "lab"))
from infra.drive import BIN, fresh_lab, labctl, playbook  # noqa: E402

PROFILE = "seed-epyc-rtxpro6000"
REPEAT = 3
CALLBACK_DIR = ROOT / "bench" / "callback_plugins"
PLAY_CPU = "play_cpu"
STRATEGIES = ("linear", "mitogen_linear")
# ansible-core's warning for a strategy from outside ansible.builtin, kept in the JSON.
DEPRECATION = re.compile(r"^\[DEPRECATION WARNING\]: .*$", re.M)
# A host's line in the ad-hoc `setup` round's output: "lab-gpu-01 | SUCCESS => {".
ADHOC_RESULT = re.compile(r"^(\S+) \| (SUCCESS|CHANGED|FAILED!|UNREACHABLE!)", re.M)
# Each playbook's first play, which fails a run whose inventory has no host in gpu_nodes and
# otherwise targets no host: counted with the start-up (its marks are left out).
GUARD = "Stop when the inventory has no host in gpu_nodes"


# Play name -> phase; serial makes one play entry per batch under the rollout play's name.
def play_names(playbook):
    return [play["name"] for play in yaml.safe_load((ROOT / "playbooks" / playbook).read_text())
            if play["name"] != GUARD]


# Every play of verify.yml is the verification (the last one fails the hosts it named).
PHASES = {**dict(zip(play_names("rollout.yml"), ("plan", "batches"))),
          **{name: "verify" for name in play_names("verify.yml")},
          **dict(zip(play_names("drift.yml"), ("read", "publish", "unread")))}


def fleet(hosts):
    labctl("up", "--fresh", "--hosts", str(hosts), "--profile", PROFILE, "--profile-map", "")


def timed(argv, env=None):
    """Run argv to the end: (process, wall seconds, the control node's CPU seconds). The CPU is user +
    system of the process and every descendant it waited for (Ansible's forked workers; not the
    ssh ControlPersist masters, which detach), from this process's RUSAGE_CHILDREN."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    proc = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    seconds = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return proc, seconds, cpu


def hosts_answered(output):
    """Hosts that an ad-hoc round reached and ran the module on (SUCCESS or CHANGED)."""
    return sorted(host for host, status in ADHOC_RESULT.findall(output) if status in ("SUCCESS", "CHANGED"))


def setup_round(hosts):
    """The baseline: Ansible's own fact round, under its own strategy whatever --strategy says."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_STRATEGY")}
    proc, seconds, cpu = timed([str(BIN / "ansible"), "gpu_nodes", "-m", "ansible.builtin.setup"], env)
    reached = len(hosts_answered(proc.stdout))
    if proc.returncode or reached != hosts:
        raise SystemExit(f"the setup round reached {reached} of {hosts} hosts:\n"
                         + proc.stdout[-3000:] + proc.stderr[-3000:])
    return {"seconds": round(seconds, 1), "cpu_seconds": round(cpu, 1), "hosts_reached": reached}


def median(results):
    """The median of a kind's runs (result dicts, by their seconds)."""
    ordered = sorted(results, key=lambda r: r["seconds"])
    return ordered[len(ordered) // 2]


def rounds(kinds, repeat):
    """{kind: [results]}: `repeat` rounds, each running every kind once in the order given."""
    results = {kind: [] for kind in kinds}
    for _ in range(repeat):
        for kind, measure_once in kinds.items():
            results[kind].append(measure_once())
    return results


def strategy_env(strategy, mitogen=None):
    """The variables that select `strategy` for ansible-playbook: none for Ansible's own linear;
    for Mitogen's, its strategy plugins' directory (from `mitogen`, a --target install, or the
    ansible_mitogen package this Python imports)."""
    if strategy == "linear":
        return {}
    if mitogen:
        plugins = Path(mitogen) / "ansible_mitogen" / "plugins" / "strategy"
    else:
        spec = importlib.util.find_spec("ansible_mitogen")
        plugins = Path(spec.origin).parent / "plugins" / "strategy" if spec and spec.origin else None
    if plugins is None or not (plugins / f"{strategy}.py").is_file():
        raise SystemExit(f"--strategy {strategy}: Mitogen for Ansible is not installed "
                         f"(docs/mitogen.md: pip install --target DIR mitogen==0.3.54, then --mitogen DIR)")
    return {"ANSIBLE_STRATEGY": strategy, "ANSIBLE_STRATEGY_PLUGINS": str(plugins)}


def merge_fleets(kept, new):
    """The JSON's fleets: the new entries, and the kept ones of another size or strategy (an entry
    without a strategy is Ansible's linear)."""
    done = {(f["hosts"], f.get("strategy", "linear")) for f in new}
    return [f for f in kept if (f["hosts"], f.get("strategy", "linear")) not in done] + new


def seconds_between(duration):
    start, end = (datetime.fromisoformat(duration[k].replace("Z", "+00:00")) for k in ("start", "end"))
    return (end - start).total_seconds()


def phase_of(play_name):
    return PHASES.get(play_name, play_name)


def play_cpu(marks):
    """(CPU seconds before the first play, {phase: CPU seconds}) from play_cpu's marks: each play
    costs what was spent from its start to the next mark (a later play or the playbook's end)."""
    phases = {}
    marks = [mark for mark in marks if mark.get("play") != GUARD]
    for mark, following in zip(marks, marks[1:]):
        phase = phase_of(mark["play"])
        phases[phase] = phases.get(phase, 0) + following["cpu"] - mark["cpu"]
    return marks[0]["cpu"], phases


STRATEGY_ENV = {}  # strategy_env() of --strategy, for the playbook runs (not the setup round)


def timing_env(cpu_file, strategy=True):
    """The environment of a timed run: the json stdout callback, and play_cpu beside the callbacks
    ansible.cfg enables (the variable replaces that list, so the fleet report's callback stays on);
    --strategy's variables unless strategy is false (Ansible's own linear)."""
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "ansible.cfg")
    enabled = os.environ.get("ANSIBLE_CALLBACKS_ENABLED", cfg.get("defaults", "callbacks_enabled", fallback=""))
    return dict(os.environ, ANSIBLE_STDOUT_CALLBACK="ansible.posix.json", ANSIBLE_LOAD_CALLBACK_PLUGINS="1",
                ANSIBLE_CALLBACK_PLUGINS=str(CALLBACK_DIR),
                ANSIBLE_CALLBACKS_ENABLED=",".join(n for n in [*enabled.split(","), PLAY_CPU] if n.strip()),
                INFERTUNE_BENCH_PLAY_CPU=str(cpu_file), **(STRATEGY_ENV if strategy else {}))


def per_host(figures, hosts):
    return {name: round(value / hosts, 3) for name, value in figures.items()}


def reached_hosts(result):
    """The hosts a run reached: those its stats list as reachable, or where the verification answered
    for more (the verify play runs no task per host, so its stats list only the host its run-once
    tasks ran on; the hosts it verified were reached over ssh all the same)."""
    reached = sum(1 for s in result["stats"].values() if not s["unreachable"])
    verified = [set(res["verified"]) for play in result["plays"] for task in play["tasks"]
                for res in task["hosts"].values() if isinstance(res, dict) and isinstance(res.get("verified"), list)]
    return max([reached] + [len(v) for v in verified])


def run(hosts, playbook_file="site.yml", *args, strategy=True):
    """Run a playbook with the json callback and play_cpu: seconds and CPU seconds, in all and per
    phase, batches, tasks, changes; under --strategy unless strategy is false."""
    with tempfile.TemporaryDirectory(prefix="infertune-bench-") as tmp:
        cpu_file = Path(tmp) / "play_cpu.json"
        proc, seconds, cpu = timed([str(BIN / "ansible-playbook"), playbook_file, *args], timing_env(cpu_file, strategy))
        if proc.returncode:
            raise SystemExit(proc.stdout[-6000:] + proc.stderr[-3000:])
        startup_cpu, phases_cpu = play_cpu(json.loads(cpu_file.read_text()))
    result = json.loads(proc.stdout)
    phases = {}
    for play in result["plays"]:
        if play["play"]["name"] == GUARD:
            continue
        phase = phase_of(play["play"]["name"])
        # A play that matched no host (no host pending) has no end: it cost nothing.
        seconds_in_play = seconds_between(play["play"]["duration"]) if "end" in play["play"]["duration"] else 0
        phases[phase] = round(phases.get(phase, 0) + seconds_in_play, 1)
    stats = result["stats"]
    reached = reached_hosts(result)
    if reached != hosts:
        raise SystemExit(f"the run's stats list {len(stats)} hosts, {reached} reached, expected {hosts}")
    # Not one number: run_once tasks count on the first host of a batch or play only.
    tasks = sorted({s["ok"] + s["changed"] + s["skipped"] for s in stats.values()})
    batches = sum(1 for play in result["plays"] if phase_of(play["play"]["name"]) == "batches" and play["tasks"])
    return {"hosts_reached": reached, "seconds": round(seconds, 1), "seconds_per_host": round(seconds / reached, 2),
            "cpu_seconds": round(cpu, 1), "controller_cpu_seconds_per_host": round(cpu / reached, 3),
            "phases": phases, "startup_cpu_seconds": round(startup_cpu, 2),
            "phases_cpu": {name: round(value, 2) for name, value in phases_cpu.items()},
            "phases_cpu_per_host": per_host(phases_cpu, reached),
            "batches": batches, "tasks_per_host": tasks, "changed": {h: s["changed"] for h, s in stats.items()},
            "deprecation_warnings": sorted(set(DEPRECATION.findall(proc.stderr + proc.stdout)))}


def noop_run(hosts):
    """site.yml on the converged fleet: it must change nothing and put no host into a batch."""
    result = run(hosts)
    changed = {h: c for h, c in result["changed"].items() if c}
    if changed or result["batches"]:
        raise SystemExit(f"no-op site.yml changed {changed} or ran {result['batches']} batch(es)")
    return result


def drift_run(hosts):
    """playbooks/drift.yml on the converged fleet: it must find no drift on any host."""
    with tempfile.TemporaryDirectory(prefix="infertune-textfile-") as textfiles:
        result = run(hosts, "playbooks/drift.yml", "-e", f"report_drift_textfile_dir={textfiles}")
    state = json.loads((ROOT / "reports" / "drift.json").read_text())
    if state["run"]["exit_status"] != 0:
        raise SystemExit(f"the drift run on the converged fleet found drift or an error: {state['hosts']}")
    return result


def measure(hosts, strategy):
    fleet(hosts)
    converge = run(hosts, strategy=False)
    samples = rounds({"setup": lambda: setup_round(hosts), "noop": lambda: noop_run(hosts),
                      "check": lambda: run(hosts, "site.yml", "--check"),
                      "verify": lambda: run(hosts, "playbooks/verify.yml"), "drift": lambda: drift_run(hosts)}, REPEAT)
    setup = median(samples.pop("setup"))
    setup_s = setup["seconds"]
    runs = {"converge": converge, **{name: median(results) for name, results in samples.items()}}
    for result in runs.values():
        result["changed"] = sum(result["changed"].values())
    return {"hosts": hosts, "strategy": strategy, "converge_strategy": "linear",
            "hosts_reached": setup["hosts_reached"], "setup_seconds": setup_s,
            "setup_cpu_seconds": setup["cpu_seconds"],
            "setup_cpu_seconds_per_host": round(setup["cpu_seconds"] / setup["hosts_reached"], 3),
            "repeat": REPEAT, "interleaved": True, **runs,
            **{f"{name}_over_setup": round(runs[name]["seconds"] / setup_s, 2)
               for name in ("noop", "check", "verify", "drift")},
            **{f"{name}_cpu_over_setup": round(runs[name]["cpu_seconds"] / setup["cpu_seconds"], 2)
               for name in ("noop", "check", "verify", "drift")}}


def print_table(rows):
    print(f"{'strategy':>14} {'hosts':>5} {'setup s':>7} {'run':>8} {'s':>7} {'x setup':>7} {'cpu s':>6} {'x cpu':>6} {'cpu/host':>8} "
          f"{'plan':>5} {'batches':>7} {'verify':>6} {'#batch':>6} {'changed':>7}")
    for r in rows:
        for name in ("converge", "noop", "check", "verify", "drift"):
            result = r[name]
            phases = result["phases"]
            print(f"{r.get('strategy', 'linear'):>14} {r['hosts_reached']:>5} {r['setup_seconds']:>7} {name:>8} {result['seconds']:>7} "
                  f"{result['seconds'] / r['setup_seconds']:>7.2f} {result['cpu_seconds']:>6} "
                  f"{result['cpu_seconds'] / r['setup_cpu_seconds']:>6.2f} "
                  f"{result['controller_cpu_seconds_per_host']:>8} "
                  f"{phases.get('plan', phases.get('read', '-')):>5} "
                  f"{phases.get('batches', '-'):>7} {phases.get('verify', '-'):>6} {result['batches']:>6} "
                  f"{result['changed']:>7}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", default="8,32,64", help="fleet sizes, comma-separated (default 8,32,64)")
    parser.add_argument("--strategy", choices=STRATEGIES, default="linear",
                        help="the playbooks' strategy (default linear, Ansible's own)")
    parser.add_argument("--mitogen", help="where Mitogen for Ansible was installed with pip --target")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "fleet_timing.json")
    args = parser.parse_args()
    STRATEGY_ENV.update(strategy_env(args.strategy, args.mitogen))
    kept = json.loads(args.out.read_text())["fleets"] if args.out.is_file() else []

    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "ansible.cfg")
    result = {"control_node_cpus": os.cpu_count(),
              "pipelining": cfg.getboolean("ssh_connection", "pipelining", fallback=False),
              "forks": cfg.getint("defaults", "forks"), "fleets": []}
    print(f"pipelining {'on' if result['pipelining'] else 'off'} (ansible.cfg), forks {result['forks']}, "
          f"{result['control_node_cpus']} control-node CPUs", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    done = []
    try:
        for hosts in (int(n) for n in args.hosts.split(",")):
            print(f"{hosts} hosts ...", flush=True)
            done.append(measure(hosts, args.strategy))
            result["fleets"] = merge_fleets(kept, done)
            # Written after each fleet: a later failure keeps the finished measurements.
            args.out.write_text(json.dumps(result, indent=2) + "\n")
    finally:
        fresh_lab()
    print_table(result["fleets"])


if __name__ == "__main__":
    main()
