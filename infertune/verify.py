"""Verify hosts with tests/verify in one pytest-testinfra run, then write the fleet report.

    python -m infertune.verify --dir reports [--tests pcie_mrrs,...] [--catalog ROWS] < run.json

run.json on standard input, as the infertune_verify action writes it: {host: {verify, expected,
results, check_mode}}. Hosts with verify true are checked against their expected values (what
Ansible resolved for them in the run, -e included); every host's results go into its report
fragment. --catalog: the knob catalog's rows as the run read it (JSON, infertune.report's
catalog_rows); without it the report reads the catalog file.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from . import COLLECTION, collection_files, needs, report, targets

PROJECT = COLLECTION
# pytest: 0 all passed, 1 some failed (a knob is off: reported), 5 nothing selected; each writes
# the JUnit report. `python -m pytest` without pytest exits 1 as well, and writes none.
REPORTED = (0, 1, 5)
COULD_NOT_RUN = "the verification could not run: "


def pytest_argv(hosts, junit, tests):
    # testinfra only: autoload (off in the environment main() passes) scans every installed package.
    argv = [sys.executable, "-m", "pytest", str(PROJECT / "tests" / "verify"), "-q", "-p", "no:cacheprovider",
            "-p", "testinfra.plugin",
            "--hosts=" + ",".join(f"ansible://{h}" for h in hosts), f"--junitxml={junit}"]
    if tests:
        argv += ["-k", " or ".join(tests)]
    return argv


def inventory(connections):
    """`ansible-inventory --list` output for the hosts to verify: their connection variables."""
    return {"_meta": {"hostvars": connections}, "all": {"children": ["ungrouped", "gpu_nodes"]},
            "ungrouped": {"hosts": []}, "gpu_nodes": {"hosts": sorted(connections)}}


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m infertune.verify", description=__doc__.splitlines()[0])
    parser.add_argument("--dir", default="reports", help="reports directory (default: reports)")
    parser.add_argument("--tests", default="", help="comma-separated verification tests (default: all)")
    parser.add_argument("--fleet", default="", help="comma-separated inventory hosts (sglang-targets.json keeps these)")
    parser.add_argument("--catalog", type=json.loads, default=None,
                        help="the run's knob catalog rows, JSON (default: read the catalog file)")
    args = parser.parse_args(argv)
    collection_files(parser.prog, "verification (tests/verify)")
    run = json.load(sys.stdin)
    directory = Path(args.dir)
    verify_dir = directory / "verify"
    shutil.rmtree(verify_dir, ignore_errors=True)
    verify_dir.mkdir(parents=True)
    hosts = [h for h, entry in run.items() if entry.get("verify")]
    if hosts:
        expected = verify_dir / "expected.json"
        expected.write_text(json.dumps({h: run[h]["expected"] for h in hosts}))
        env = dict(os.environ, INFERTUNE_VERIFY_EXPECTED=str(expected), PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")
        connections = {h: run[h].get("connection") for h in hosts}
        if all(c is not None for c in connections.values()):
            # The run's own view of how to reach each host: testinfra skips ansible-inventory.
            known = verify_dir / "inventory.json"
            known.write_text(json.dumps(inventory(connections)))
            env["INFERTUNE_VERIFY_INVENTORY"] = str(known)
        tests = [t for t in args.tests.split(",") if t]
        broke = could_not_run(hosts, verify_dir / "fleet.xml", tests, env)
        if broke:
            # Every host it was to verify is not verified, with the reason; the run fails.
            for host in hosts:
                run[host].setdefault("rollout", {})["stopped"] = COULD_NOT_RUN + broke.splitlines()[0]
            written(directory, run, args)
            print(COULD_NOT_RUN + broke, file=sys.stderr)
            return 2
    written(directory, run, args)
    return 0


def could_not_run(hosts, junit, tests, env):
    """Why tests/verify could not run for the hosts (None when it ran): this Python lacks what it
    needs, or pytest ended without its JUnit report."""
    missing = needs.problems(["verify"], where="the Python that runs the verification")
    if missing:
        return missing[0].removeprefix("control node: ")
    proc = subprocess.run(pytest_argv(hosts, junit, tests), env=env, cwd=PROJECT, capture_output=True, text=True,
                          check=False)
    if proc.returncode in REPORTED and junit.is_file():
        return None
    return (f"pytest exited {proc.returncode}" + ("" if junit.is_file() else " without its JUnit report")
            + f" (tests/verify broke):\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}")


def written(directory, run, args):
    report.record(directory / "hosts", run)
    targets.write(directory, run, [h for h in args.fleet.split(",") if h] or list(run))
    print(report.write(directory, list(run), run, catalog=args.catalog))


if __name__ == "__main__":
    sys.exit(main())
