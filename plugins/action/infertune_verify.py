"""infertune_verify: run tests/verify for the run's hosts and write the fleet report.

Runs on the control node only. Hands `python -m infertune.verify` (one pytest-testinfra run
for every host to verify, then reports/) one entry per host, built here from the hosts'
variables: whether to verify it (in the play, not failed, not left out by a stopped
rollout), the values it was tuned to (its variables among `expected`), its results, how to
reach it (its `connection` variables; none when it has one of `secrets`, which are never
handed over), and how far its rollout got.

Options: dir (reports directory), hosts (every host of the run), fleet (every host of the
inventory group, for the targets file), tests (verification tests; empty: all), expected,
connection and secrets (variable names). Returns rc, stdout, stdout_lines and hosts: per host
its result (pass, fail, not verified), off, the details of its checks that failed or broke, and
failing, the knobs they belong to; summary, the run's summary (fleet.json's run_summary) and
summary_key, the set_stats key it is published under (with awx_job_id under AWX, else a run id);
fails when the verification itself broke (not when a knob is off: the report says so).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

from ansible.plugins.action import ActionBase

# The collection root is where `python -m infertune.verify` finds its package.
from ansible_collections.infertune.fleet.infertune import COLLECTION, report
from ansible_collections.infertune.fleet.infertune.plain import plain


def entry(host, facts, play_hosts, options, check_mode):
    """What infertune.verify needs of one host, from its variables (a mapping)."""
    results = plain(facts.get("infertune_results"))
    applied = [k for k, v in (results or {}).items() if isinstance(v, dict) and v.get("applied") and v.get("changed")]
    given = [n for n in options["connection"] if n in facts]
    reason = "infertune_failure" in facts or "rollout_stopped" in facts
    return {
        "verify": host in play_hosts and not reason,
        "expected": {n: plain(facts[n]) for n in options["expected"] if n in facts},
        "results": results,
        "check_mode": plain(facts.get("infertune_check_mode", check_mode)),
        "address": plain(facts.get("ansible_host", host)),
        "connection": None if any(n in facts for n in options["secrets"]) else {n: plain(facts[n]) for n in given},
        "rollout": {"stage": plain(facts.get("infertune_reached", "plan")), "drained": "drain" in applied,
                    "rebooted": "reboot" in applied, "failure": plain(facts.get("infertune_failure", "")),
                    "stopped": plain(facts.get("rollout_stopped", "")),
                    # Out of the play (failed or unreachable earlier) without a reason of ours.
                    "lost": host not in play_hosts and not reason},
    }


def child_env(task_vars, environ):
    """The verification's environment: this run's inventory sources and Ansible configuration.

    testinfra reads the inventory through ansible-inventory where no connection was handed over
    (the same sources as this run, the same interpreter's tools), and its ssh settings from
    ANSIBLE_CONFIG, else ./ansible.cfg: it runs in the collection, so without this it would miss
    the configuration the run uses (ssh options, the ControlPath it shares).
    """
    env = dict(environ, PATH=os.path.dirname(sys.executable) + os.pathsep + environ.get("PATH", ""),
               ANSIBLE_INVENTORY=",".join(task_vars.get("ansible_inventory_sources", [])))
    if task_vars.get("ansible_config_file"):
        env["ANSIBLE_CONFIG"] = task_vars["ansible_config_file"]
    return env


def outcome(host_report):
    """A host's result in the fleet report, the details of its checks that failed or broke and
    the knobs (report rows) they belong to."""
    checks = [c for knob in host_report.get("knobs", {}).values() for c in knob.get("checks", {}).values()]
    return {"result": host_report["result"], "off": [c["detail"] for c in checks if c["status"] in ("fail", "error")],
            "failing": host_report.get("failing", [])}


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False
    _supports_check_mode = True
    _VALID_ARGS = frozenset(("dir", "hosts", "fleet", "tests", "expected", "connection", "secrets"))

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        result["changed"] = False
        options = {k: plain(self._templar.template(v)) for k, v in self._task.args.items()}
        hostvars = task_vars["hostvars"]
        play_hosts = list(task_vars.get("ansible_play_hosts", []))
        check_mode = bool(task_vars.get("ansible_check_mode", False))
        run = {host: entry(host, hostvars[host], play_hosts, options, check_mode) for host in options["hosts"]}
        argv = [sys.executable, "-m", "infertune.verify", "--dir", options["dir"],
                "--tests", ",".join(options.get("tests") or []), "--fleet", ",".join(options["fleet"])]
        # In the collection root: `python -m infertune.verify` runs this collection's package.
        proc = subprocess.run(argv, input=json.dumps(run), cwd=COLLECTION, env=child_env(task_vars, os.environ),
                              capture_output=True, text=True, check=False)
        result.update(rc=proc.returncode, stdout=proc.stdout, stdout_lines=proc.stdout.splitlines())
        if proc.returncode != 0:
            result["failed"] = True
            result["msg"] = (proc.stderr or proc.stdout).strip()[-3000:]
            return result
        with open(os.path.join(options["dir"], "fleet.json")) as handle:
            fleet = json.load(handle)
        result["hosts"] = {host: outcome(entry) for host, entry in fleet["hosts"].items()}
        result["summary"] = fleet["run_summary"]
        result["summary_key"] = report.summary_key(task_vars.get("awx_job_id", task_vars.get("tower_job_id")))
        return result
