"""Fold ansible-runner events into a per-host summary and a progress position.

Pure: no I/O and no ansible import, so recorded event dicts can drive it in tests.
Event names and fields are those of ansible-runner's display callback (awx_display).
"""
from __future__ import annotations

from dataclasses import dataclass

from . import publish
from .host_plan import PENDING_GROUP

# Modules whose changed result means a host knob moved: every catalog knob runs through
# the knob module, one loop item per knob (roles/infertune/tasks/knobs.yml); the kernel
# package through apt. Actions resolve to their FQCN.
KNOB_ACTIONS = frozenset({"infertune.fleet.knob", "ansible.builtin.apt"})
REBOOT_ACTION = "ansible.builtin.reboot"
# The verification (run once for the fleet) answers which hosts it verified: they reached it.
VERIFY_ACTION = "infertune.fleet.infertune_verify"
# The rollout's decision, once per batch, names the hosts the plan sent into the rollout (the
# plan's own answer reaches callbacks censored: its record is as large as the host).
ROLLOUT_ACTION = "infertune.fleet.infertune_rollout"
# "stopped": the plan sent the host into the rollout, which ended before its batch.
BAD_RESULTS = ("failed", "unreachable", "stopped")
# What the playbooks set that the summary reads from set_fact and add_host results: the
# stage a host reached (the rollout's stages in order; "plan" until the first) and the result
# contract (a drain applied), both published by infertune_publish (add_host's answer), the
# rollout's mark of a converged host (a set_fact), the plan's groups.
STAGES = publish.STAGES
STAGE_FACT = publish.STAGE
RESULTS_FACT = publish.RESULTS
CONVERGED_FACT = "rollout_converged"


def added_hosts(res: dict) -> list:
    """The add_host answers of a task's result (a loop's or a single one, add_host's or the plan
    action's): host_name, groups and host_vars of each host the task named."""
    items = res.get("results") or [res]
    return [item["add_host"] for item in items
            if isinstance(item, dict) and isinstance(item.get("add_host"), dict) and item["add_host"].get("host_name")]


def _action(data: dict) -> str:
    action = data.get("resolved_action") or data.get("task_action") or ""
    return action.removeprefix("ansible.legacy.")


def _first_line(value) -> str:
    lines = str(value).strip().splitlines()
    return lines[0] if lines else ""


def _failure_message(res: dict) -> str:
    # A failed loop says only "One or more items failed": the failed item says why.
    for item in res.get("results") or []:
        if isinstance(item, dict) and item.get("failed") and item.get("msg"):
            return _first_line(item["msg"])
    return _first_line(res.get("msg") or res.get("stderr") or "failed")


@dataclass
class HostSummary:
    host: str
    seen: bool = False
    changed: bool = False
    failed: bool = False
    unreachable: bool = False
    reboots: int = 0
    knobs_changed: int = 0
    reason: str = ""
    stage: str = ""
    drained: bool = False
    pending: bool = False  # the plan sent it into the rollout
    converged: bool = False  # the rollout marked it converged
    ended: bool = False  # the recap came

    @property
    def result(self) -> str:
        if self.unreachable:
            return "unreachable"
        if self.failed:
            return "failed"
        if not self.seen:
            return "not run"
        if self.ended and self.pending and not self.converged:
            return "stopped"
        return "changed" if self.changed else "ok"

    def as_dict(self) -> dict:
        bad = self.result in BAD_RESULTS
        reason = self.reason
        if self.result == "stopped":
            reason = "the rollout stopped before this host's batch"
        return {
            "host": self.host,
            "result": self.result,
            "stage": (self.stage or STAGES[0]) if self.seen else "",
            "drained": self.drained,
            "reboots": self.reboots,
            "knobs_changed": self.knobs_changed,
            "failure_reason": reason if bad else "",
        }


class RunSummary:
    """Consume events with handle(); read hosts, totals and the progress position."""

    def __init__(self, expected_hosts=()):
        # Hosts the playbook targets (from --list-hosts); those never reached stay "not run".
        self._hosts = {name: HostSummary(name) for name in expected_hosts}
        self.play = ""
        self.batch = 0
        self.task = ""
        self._play_id = None
        self._batch_hosts: set[str] = set()
        self._finished: set[str] = set()  # finished the current play: earlier batch or dropped out

    def host(self, name: str) -> HostSummary:
        return self._hosts.setdefault(name, HostSummary(name))

    def handle(self, event: dict) -> None:
        kind = event.get("event", "")
        data = event.get("event_data") or {}
        if kind == "playbook_on_play_start":
            self._play_start(data)
        elif kind == "playbook_on_task_start":
            self.task = data.get("task") or ""
        elif kind == "playbook_on_stats":
            self._stats(data)
        elif kind.startswith("runner_on_") and data.get("host"):
            self._host_event(kind.removeprefix("runner_on_"), data)
        elif kind == "runner_item_on_ok" and data.get("host"):
            self._knob_item(data)

    def _play_start(self, data: dict) -> None:
        # Each serial batch re-sends the play start with "_N" appended to the play uuid.
        play_id = str(data.get("play_uuid") or data.get("uuid") or "").partition("_")[0]
        if play_id and play_id == self._play_id:
            self.batch += 1
            self._finished |= self._batch_hosts
        else:
            self._play_id = play_id
            self.batch = 1
            self._finished = {h.host for h in self._hosts.values() if h.result in BAD_RESULTS}
        self._batch_hosts = set()
        self.play = data.get("name") or data.get("play") or ""
        self.task = ""

    def _knob_item(self, data: dict) -> None:
        if (data.get("res") or {}).get("changed") and _action(data) in KNOB_ACTIONS:
            self.host(data["host"]).knobs_changed += 1

    def _host_event(self, outcome: str, data: dict) -> None:
        host = self.host(data["host"])
        host.seen = True
        self._batch_hosts.add(host.host)
        res = data.get("res") or {}
        if outcome == "ok":
            self._progress(host, res.get("ansible_facts") or {})
            for added in added_hosts(res):
                self._progress(self.host(str(added["host_name"])), added.get("host_vars") or {})
            self._published(res)
            if _action(data) == ROLLOUT_ACTION:
                for name in res.get("pending") or []:
                    self.host(str(name)).pending = True
            if _action(data) == VERIFY_ACTION:
                for name in res.get("verified") or []:
                    self.host(str(name)).stage = STAGES[-1]
        if outcome == "ok" and res.get("changed"):
            host.changed = True
            action = _action(data)
            if action == REBOOT_ACTION:
                host.reboots += 1
            elif action in KNOB_ACTIONS and "results" not in res:
                # A loop's own result repeats its items, counted one by one as they came.
                host.knobs_changed += 1
        elif outcome == "failed" and not data.get("ignore_errors"):
            host.failed = True
            host.reason = f"{data.get('task', '')}: {_failure_message(res)}"
        elif outcome == "unreachable":
            host.unreachable = True
            host.reason = f"{data.get('task', '')}: {_first_line(res.get('msg') or 'unreachable')}"
        if host.result in BAD_RESULTS:
            self._finished.add(host.host)

    @staticmethod
    def _progress(host: HostSummary, facts: dict) -> None:
        """What a task set on `host`: facts (set_fact) or host variables (add_host's answer)."""
        if not isinstance(facts, dict):
            return
        if facts.get(STAGE_FACT) in STAGES:
            host.stage = facts[STAGE_FACT]
        results = facts.get(RESULTS_FACT)
        drain = results.get("drain") if isinstance(results, dict) else None
        if isinstance(drain, dict) and drain.get("changed") and drain.get("applied"):
            host.drained = True  # a --check run publishes applied: false
        if facts.get(CONVERGED_FACT):
            host.converged = True

    def _published(self, res: dict) -> None:
        """The plan's answers (host variables and a group, as add_host's): the hosts it sent into the rollout."""
        for added in added_hosts(res):
            if PENDING_GROUP in (added.get("groups") or []):
                self.host(str(added["host_name"])).pending = True

    def _stats(self, data: dict) -> None:
        # The recap is authoritative: a failure later rescued by a block is not a failure.
        for name in set().union(*(data.get(k) or {} for k in ("processed", "ok", "failures", "dark"))):
            host = self.host(name)
            host.seen = True
            host.failed = bool((data.get("failures") or {}).get(name))
            host.unreachable = bool((data.get("dark") or {}).get(name))
            host.changed = bool((data.get("changed") or {}).get(name))
            host.ended = True
            self._finished.add(name)
        self.task = "recap"

    @property
    def position(self) -> tuple:
        return (self.play, self.batch, self.task)

    def status_line(self) -> str:
        total = len(self._hosts)
        parts = [self.play or "starting", f"batch {self.batch}",
                 f"hosts {len(self._finished)}/{total} done"]
        if self.task:
            parts.append(self.task)
        return " | ".join(parts)

    def hosts(self) -> list:
        return [self._hosts[name].as_dict() for name in sorted(self._hosts)]

    def totals(self) -> dict:
        rows = self.hosts()
        totals = {"hosts": len(rows)}
        for result in ("ok", "changed", "failed", "unreachable", "stopped", "not run"):
            totals[result.replace(" ", "_")] = sum(r["result"] == result for r in rows)
        totals["reboots"] = sum(r["reboots"] for r in rows)
        totals["knobs_changed"] = sum(r["knobs_changed"] for r in rows)
        return totals

    @property
    def any_failed(self) -> bool:
        return any(h.result in BAD_RESULTS for h in self._hosts.values())
