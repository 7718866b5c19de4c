"""infertune_report callback: every run ends with a fleet report of its own.

Ansible ends the whole playbook when every host of a serial batch fails or is unreachable
(PlaybookExecutor: a batch whose failed and unreachable hosts are all of it breaks out of the
plays): a canary lost mid-stage ends the run right after the unreachable task, and the verify
play, which writes the report, never runs. The rollout's rescue turns every failure into an
ended host, but Ansible's rescue does not see an unreachable one.

This callback watches the run: the report's start (infertune_report_start: the report
directory and hosts, the earlier report already marked as not current), each host's stage
(infertune_reached), the plan's or the rollout's reason for a failed host (infertune_failure)
and the task where a host was lost. The plan's action and infertune_publish set those as host
variables, answering as add_host does (the plan's answer reaches callbacks censored: this one
reads what it published from the inventory); a fact (set_fact) is read alike. When the playbook ends without the verify play's report
(infertune_verify), it writes this run's report: a lost host "unreachable in stage runtime:
<task>: <message>", a failed one with its stage and reason, every other host not verified
because the run ended first. Nothing is verified then, and no earlier verification is read.
"""
from __future__ import annotations

DOCUMENTATION = """
name: infertune_report
type: notification
author: infertune developers (@infertune)
short_description: write the run's fleet report when the playbook ends before its verify play
description:
  - Enabled by C(callbacks_enabled = infertune.fleet.infertune_report) (the checkout's ansible.cfg sets it) or
    E(ANSIBLE_CALLBACKS_ENABLED). Acts only on runs that marked the earlier report at their start
    (M(infertune.fleet.infertune_report_start)) and ended without the verify play's report.
"""

from ansible.plugins.callback import CallbackBase

from ansible_collections.infertune.fleet.infertune import report
from ansible_collections.infertune.fleet.infertune.summary import added_hosts


START = "infertune_report_start"
PLAN = "infertune_host_plan"
VERIFY = "infertune_verify"
ENDED = "the run ended before its verification"


def short_action(task):
    return (task.resolved_action or task.action or "").rsplit(".", 1)[-1]


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "notification"
    CALLBACK_NAME = "infertune_report"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.start = None  # the start action's result
        self.reported = False
        self.hosts = {}  # host -> {"stage", "failure", "unreachable", "check_mode", "drained", "rebooted"}

    def _host(self, name):
        return self.hosts.setdefault(name, {"stage": "plan", "failure": "", "unreachable": "",
                                            "check_mode": False, "drained": False, "rebooted": False})

    def v2_runner_on_ok(self, result):
        action, res = short_action(result.task), result.result
        if action == START:
            self.start = {k: res.get(k) for k in ("dir", "hosts", "started", "catalog")}
        elif action == VERIFY:
            self.reported = True
        added = added_hosts(res)
        if added:
            # infertune_publish publishes the host's record as host variables, as add_host does.
            for item in added:
                self._note(str(item["host_name"]), item.get("host_vars") or {})
            return
        if action == PLAN and res.get("censored"):
            # The plan's answer reaches callbacks censored (its record is as large as the host): the
            # strategy has published it as the host's variables before this callback.
            self._note(result.host.get_name(), self._published(result))
            return
        facts = res.get("ansible_facts") or {}
        if facts and "_ansible_delegated_vars" not in res:
            self._note(result.host.get_name(), facts)

    @staticmethod
    def _published(result):
        """The host's variables in the inventory (the plan's action publishes its record there)."""
        host = result.task.get_variable_manager()._inventory.get_host(result.host.get_name())  # pylint: disable=protected-access
        return host.vars if host is not None else {}

    def _note(self, name, values):
        """What the report needs from the variables a task set on host `name`."""
        host = self._host(name)
        if values.get("infertune_reached"):
            host["stage"] = str(values["infertune_reached"])
        if values.get("infertune_failure"):
            host["failure"] = str(values["infertune_failure"])
        if "infertune_check_mode" in values:
            host["check_mode"] = bool(values["infertune_check_mode"])
        results = values.get("infertune_results")
        for knob, word in (("drain", "drained"), ("reboot", "rebooted")):
            done = results.get(knob) if isinstance(results, dict) else None
            if isinstance(done, dict) and "changed" in done:
                host[word] = bool(done.get("changed") and done.get("applied"))

    def v2_runner_on_unreachable(self, result):
        if result.task.ignore_unreachable:
            return
        msg = report.first_line(result.result.get("msg") or "unreachable")
        self._host(result.host.get_name())["unreachable"] = f"{result.task.get_name()}: {msg}"

    def v2_playbook_on_stats(self, stats):
        if self.start is None or self.reported:
            return
        lost = any(h["unreachable"] for h in self.hosts.values())
        ended = ENDED + (": every host of a rollout batch was lost, and Ansible ends the playbook then"
                         if lost else " (its output says why)")
        run = {}
        for name in self.start["hosts"]:
            host = self._host(name)
            rollout = {k: host[k] for k in ("stage", "drained", "rebooted", "failure", "unreachable")}
            if not host["failure"] and not host["unreachable"]:
                rollout["stopped"] = ended
            run[name] = {"verify": False, "results": None, "check_mode": host["check_mode"], "rollout": rollout}
        line = report.write(self.start["dir"], self.start["hosts"], run, verified=False, catalog=self.start.get("catalog"))
        self._display.display(f"infertune: {line} (written after the playbook ended early)")
