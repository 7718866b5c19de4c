"""infertune_verify: run tests/verify for the run's hosts and write the fleet report.

Runs on the control node only. Hands `python -m infertune.verify` (one pytest-testinfra run
for every host to verify, then reports/) one entry per host, built here from the hosts'
variables: whether to verify it (in the play, not failed, not left out by a stopped
rollout), the values it was tuned to, its results, how to reach it (its `connection`
variables; none when it has one of `secrets`, which are never handed over), and how far its
rollout got.

The values it was tuned to are every documented input of `roles` (their argument specs'
options, less those marked no_log) as Ansible resolves them for that host in this play: the
play's role defaults under the host's own variables (inventory, facts, -e), templated in the
host's context. The verification reads no defaults file of its own, and the report takes the
knob catalog's rows from this run's (infertune_knobs) rather than reading the file again.

Options: dir (reports directory), hosts (every host of the run), fleet (every host of the
inventory group, for the targets file), tests (verification tests; empty: all), roles (role
names), connection and secrets (variable names), enforce (fail the hosts whose knobs are off).
Returns rc, stdout, stdout_lines and hosts: per host its result (pass, fail, not verified), off,
the details of its checks that failed or broke, and failing, the knobs they belong to; verified,
the hosts it verified (they reached the verify stage); fail, {host: reason} for each host of the
play to fail (ended by the plan or the rollout; with enforce, its knobs off), which one play
fails by name instead of an assert on every host; summary, the run's summary (fleet.json's
run_summary) and summary_key, the set_stats key it is published under (with awx_job_id under
AWX, else a run id); fails when the verification itself broke (not when a knob is off: the
report says so).
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys

from ansible.errors import AnsibleError
from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.action import ActionBase
from ansible.utils.vars import combine_vars

# The collection root is where `python -m infertune.verify` finds its package.
from ansible_collections.infertune.fleet.infertune import COLLECTION, report, specs
from ansible_collections.infertune.fleet.infertune.plain import plain
from infertune_node.kinds import KINDS  # on the path the package above puts plugins/module_utils on


def entry(host, facts, play_hosts, options, check_mode):
    """What infertune.verify needs of one host, from its variables (a mapping)."""
    results = plain(facts.get("infertune_results"))
    applied = [k for k, v in (results or {}).items() if isinstance(v, dict) and v.get("applied") and v.get("changed")]
    given = [n for n in options["connection"] if n in facts]
    reason = "infertune_failure" in facts or "rollout_stopped" in facts
    verify = host in play_hosts and not reason
    return {
        "verify": verify,
        "expected": {n: plain(facts[n]) for n in options["expected"] if n in facts},
        "results": results,
        "check_mode": plain(facts.get("infertune_check_mode", check_mode)),
        "address": plain(facts.get("ansible_host", host)),
        "connection": None if any(n in facts for n in options["secrets"]) else {n: plain(facts[n]) for n in given},
        # A host verified now reached the verification; the others keep the stage they reached.
        "rollout": {"stage": "verify" if verify else plain(facts.get("infertune_reached", "plan")),
                    "drained": "drain" in applied, "rebooted": "reboot" in applied, "failure": plain(facts.get("infertune_failure", "")),
                    "stopped": plain(facts.get("rollout_stopped", "")),
                    # Out of the play (failed or unreachable earlier) without a reason of ours.
                    "lost": host not in play_hosts and not reason},
    }


def judged(catalog, view):
    """{knob: {module, args}}: the catalog's enabled entries whose kind verifies itself (its module's
    observe and judge, tests/verify/test_kinds.py), their arguments rendered in the host's context."""
    out = {}
    for knob in catalog or []:
        kind = KINDS.get(knob.get("module"))
        if kind is None or kind.judge is None or not boolean(view.render(knob.get("enabled", True)), strict=False):
            continue
        out[knob["name"]] = {"module": knob["module"], "args": plain(view.render(knob.get("args") or {}))}
    return out


def inputs(specs, roles):
    """The documented inputs of ROLES (their argument specs' options), less the secrets (no_log)."""
    unknown = [role for role in roles if role not in specs]
    if unknown:
        raise ValueError("no argument spec for role(s) %s" % ", ".join(unknown))
    return sorted({name for role in roles for name, option in specs[role].options.items()
                   if not option.spec.get("no_log")})


def play_defaults(play):
    """The role defaults of the play, layered as Ansible layers them under every host's variables."""
    merged = {}
    for role in play.get_roles():
        if role.public:
            merged = combine_vars(merged, role.get_default_vars())
    return merged


class Resolved:
    """A host's variables as a task of this play sees them: the play's role defaults under the
    host's own (inventory, facts, -e), each value templated in the host's context on lookup."""

    def __init__(self, host, templar, defaults, host_vars):
        self.host = host
        self.variables = combine_vars(defaults, host_vars)
        self.templar = templar.copy_with_new_env(available_variables=self.variables)

    def __contains__(self, name):
        return name in self.variables

    def __getitem__(self, name):
        try:
            return self.templar.template(self.variables[name])
        except AnsibleError as exc:
            raise AnsibleError("%s: %s: %s" % (self.host, name, exc.message)) from exc

    def get(self, name, default=None):
        return self[name] if name in self.variables else default

    def render(self, value):
        """A value (a catalog entry's) templated in the host's context."""
        return self.templar.template(value)


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


def failures(run, views, play_hosts, enforce, directory, outcomes):
    """{host: why it fails}: each host of the play that the plan or the rollout ended (its stage and
    reason), and with enforce each host verified whose knobs are off (the checks that failed or
    broke); a host left out by a stopped rollout is not failed here. In play order."""
    where = "fleet report: %s" % os.path.join(directory, "fleet.md")
    out = {}
    for host in play_hosts:
        if host not in run:
            continue
        view = views[host]
        if "infertune_failure" in view:
            out[host] = "%s: did not converge (stage %s): %s; %s" % (
                host, plain(view.get("infertune_reached", "plan")), plain(view["infertune_failure"]), where)
        elif enforce and "rollout_stopped" not in view and outcomes[host]["result"] != "pass":
            # Each detail once: a host ssh cannot reach fails every check with the same one.
            out[host] = "; ".join([*dict.fromkeys(outcomes[host]["off"]), where])
    return out


# pytest's message for a fixture that failed with our own one-line message (pytest.fail).
FIXTURE_FAILED = re.compile(r'^failed on (?:setup|teardown) with "Failed: (.*)"$', re.S)


def outcome(host_report):
    """A host's result in the fleet report, the details of its checks that failed or broke (a
    fixture's own message as a check's) and the knobs (report rows) they belong to."""
    checks = [c for knob in host_report.get("knobs", {}).values() for c in knob.get("checks", {}).values()]
    off = [c["detail"] for c in checks if c["status"] in ("fail", "error")]
    return {"result": host_report["result"], "off": [FIXTURE_FAILED.sub(r"\1", detail) for detail in off],
            "failing": host_report.get("failing", [])}


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False
    _supports_check_mode = True
    _VALID_ARGS = frozenset(("dir", "hosts", "fleet", "tests", "roles", "connection", "secrets", "enforce"))

    def resolved(self, task_vars, hosts):
        """{host: Resolved}: each host's variables as a task of this play sees them."""
        defaults = play_defaults(self._task.get_play())
        hostvars = task_vars["hostvars"]
        return {host: Resolved(host, self._templar, defaults, hostvars.raw_get(host)) for host in hosts}

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        result["changed"] = False
        options = {k: plain(self._templar.template(v)) for k, v in self._task.args.items()}
        try:
            options["expected"] = inputs(specs.load_specs(COLLECTION), options["roles"])
        except ValueError as exc:
            return dict(result, failed=True, msg="roles: %s" % exc)
        try:
            enforce = boolean(options.get("enforce", True), strict=True)
        except TypeError as exc:
            return dict(result, failed=True, msg="enforce: %s" % exc)
        play_hosts = list(task_vars.get("ansible_play_hosts", []))
        check_mode = bool(task_vars.get("ansible_check_mode", False))
        views = self.resolved(task_vars, options["hosts"])
        run = {host: entry(host, view, play_hosts, options, check_mode) for host, view in views.items()}
        catalog = task_vars.get("infertune_knobs")
        for host, view in views.items():
            if run[host]["verify"]:
                run[host]["expected"]["knobs"] = judged(catalog, view)
        argv = [sys.executable, "-m", "infertune.verify", "--dir", options["dir"],
                "--tests", ",".join(options.get("tests") or []), "--fleet", ",".join(options["fleet"]),
                "--catalog", json.dumps(report.catalog_rows(plain(task_vars.get("infertune_knobs"))))]
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
        result["verified"] = [host for host, entry in run.items() if entry["verify"]]
        result["fail"] = failures(run, views, play_hosts, enforce, options["dir"], result["hosts"])
        result["summary"] = fleet["run_summary"]
        result["summary_key"] = report.summary_key(task_vars.get("awx_job_id", task_vars.get("tower_job_id")))
        return result
