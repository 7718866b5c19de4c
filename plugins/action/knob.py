"""knob: run the knob module with the content of the files it ships read on the control node.

A unit knob's files may name their source on the control node (`src`, a file of this
collection: the boot-time tool and its library) instead of carrying their content; this action
reads it (infertune/shipped.py) into the arguments the module gets, and the result's invocation
shows the task's own arguments, so neither the task's arguments nor its result (nor a job event
made of them) carries the source. Otherwise the module runs as any module does.
"""
from __future__ import annotations

from ansible.plugins.action import ActionBase

from ansible_collections.infertune.fleet.infertune import shipped


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _supports_check_mode = True

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        args = dict(self._task.args)
        try:
            module_args = dict(args, args=shipped.inline_args(args.get("args")))
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            return dict(result, failed=True, msg="%s: cannot read a file it ships: %s" % (args.get("name"), exc))
        result.update(self._execute_module(module_name="infertune.fleet.knob", module_args=module_args,
                                           task_vars=task_vars))
        if module_args["args"] is not args.get("args") and "invocation" in result:
            result["invocation"] = {"module_args": args}
        return result
