"""infertune_report_start: at a run's start, mark the fleet report an earlier run left as not
current (infertune.report.mark_earlier), so that it never reads as this run's.

Runs on the control node only (run_once, in the plan play). Options: dir (reports directory),
hosts (the hosts the run's report covers). Returns dir, hosts, started (when this run started,
UTC), marked (whether there was a report to mark) and catalog (the rows of this run's knob
catalog the report reads); the infertune_report callback reads them to write this run's report
should the playbook end before its verify play. Warns when
that callback is not enabled: the plays are correct without it, but such a run leaves no
report of its own.
"""
from __future__ import annotations

from datetime import datetime, timezone

from ansible import constants as C
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.infertune.fleet.infertune.plain import plain
from ansible_collections.infertune.fleet.infertune.report import catalog_rows, mark_earlier

CALLBACK = "infertune.fleet.infertune_report"


def callback_warning(enabled):
    """The warning for a run whose enabled callbacks (callbacks_enabled) lack ours, else None."""
    if CALLBACK in (enabled or ()):
        return None
    return (f"{CALLBACK} is not enabled (callbacks_enabled in ansible.cfg, or ANSIBLE_CALLBACKS_ENABLED): "
            "should this run end before its verify play, it leaves no fleet report of its own, only the "
            "earlier one marked as not current")


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
                      marked=mark_earlier(directory, started),
                      catalog=catalog_rows(plain(task_vars.get("infertune_knobs"))))
        warning = callback_warning(C.config.get_config_value("CALLBACKS_ENABLED"))
        if warning:
            Display().warning(warning)
        return result
