"""infertune_report_start: at a run's start, mark the fleet report an earlier run left as not
current (infertune.report.mark_earlier), so that it never reads as this run's.

Runs on the control node only (run_once, in the plan play). Options: dir (reports directory),
hosts (the hosts the run's report covers). Returns dir, hosts, started (when this run started,
UTC) and marked (whether there was a report to mark); the infertune_report callback reads
them to write this run's report should the playbook end before its verify play.
"""
from __future__ import annotations

from datetime import datetime, timezone

from ansible.plugins.action import ActionBase

from ansible_collections.infertune.fleet.infertune.report import mark_earlier


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False
    _supports_check_mode = True
    _VALID_ARGS = frozenset(("dir", "hosts"))

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        directory, hosts = str(self._task.args["dir"]), [str(h) for h in self._task.args["hosts"]]
        started = datetime.now(timezone.utc).isoformat(timespec="seconds")
        result.update(changed=False, dir=directory, hosts=hosts, started=started,
                      marked=mark_earlier(directory, started))
        return result
