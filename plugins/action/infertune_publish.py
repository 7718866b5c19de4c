"""infertune_publish: the one way a role publishes into the run's record (infertune/publish.py):
the stage a host reached (infertune_reached), knob results merged into infertune_results, the
reason the host was ended (infertune_failure), the GPUs the gate read (infertune_gpus).

Runs on the control node only, no connection to the host. Options: reached, results, update,
failure, gpus (at least one). The host's infertune_results now is read from its variables and
the publication merged into it (infertune.publish.host_vars).

Returns add_host, as the plan's action does (plugins/action/infertune_host_plan.py): the strategy
sets the values as the host's variables, like the plan's own record, so that every writer of a
name has the same precedence and no fact cache carries the record into a later run. The task
needs changed_when: false (the strategy calls a host whose variables it set changed). The same
under --check (the record is the control node's, never the host's); bad input fails the task.
"""
from __future__ import annotations

from ansible.plugins.action import ActionBase
from ansible.template import trust_as_template

from ansible_collections.infertune.fleet.infertune import publish
from ansible_collections.infertune.fleet.infertune.plain import plain


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False
    _supports_check_mode = True  # the record lives on the control node
    _VALID_ARGS = frozenset(publish.OPTIONS)

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        result["changed"] = False
        options = {k: plain(v) for k, v in self._task.args.items()}
        current = None
        if "results" in options or "update" in options:
            templar = self._templar.copy_with_new_env(available_variables=task_vars)
            current = plain(templar.evaluate_expression(trust_as_template(f"{publish.RESULTS} | default(none)")))
        try:
            values = publish.host_vars(current, **options)
        except publish.PublishError as exc:
            result.update(failed=True, msg=f"infertune_publish: {exc}")
            return result
        result["add_host"] = publish.published(task_vars["inventory_hostname"], values)
        return result
