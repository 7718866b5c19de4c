"""infertune_host_plan: plan one host in one task - the read, the unit files compared, a second
read where they differ, the host's record and the group it joins.

The plan used to be five tasks per host (read, compare, second read, record, group_by), each a
worker process and a round of templating on the control node; this is one, and the decisions are
Python (infertune/host_plan.py). What depends on the roles' templates is resolved by name, with the
reads' answers bound: infertune_plan (the first read's plan), infertune_plan_backend (the installed
sglang release and, after a second read, the backend verdict), infertune_units_changed (the unit
knobs not in place) and infertune_plan_argv_check (the second read's command-line check).

Options: read (the variable holding infertune_plan's options for the first read, but knobs and
fingerprint: the action derives those from the catalog), catalog (the variable holding the run's
catalog entries), knobs (the variable holding every catalog entry, which the run's are selected
from), second_backend (the variable holding the second read's backend check, or none), problems (the
variable holding more reasons to stop the host, such as sglang's checks), allow_control_node, health
(history: the directory on the control node that keeps each host's GPU health across reads, where the
read's health is judged against it and added to it; rma_after_reboots; reboot_to_reset: a host whose
only reason is a reset-class GPU reboots; infertune/gpu_health.py).
The catalog is resolved twice, not once per use: before the first read, its knobs but the unit
knobs (what the read gets), the unit knobs' paths and unit names (the read's fingerprint), every
name (the order) and the read's options; after it, the unit knobs alone, their files rendered
for the release found. Each resolution renders what it returns anew (Ansible compiles every
template each time), which made the catalog the plan's biggest cost on the control node, so
the second sees what the first rendered: the knobs the read got and the unit knobs' paths, bound
over the catalog's entries (the boot-time oneshot's configuration, a unit file, holds the runtime
knobs' arguments; each was compiled twice per host). The
selection itself (which entries this run touches) is rendered once: its names, then the entries
of `knobs` they name, unrendered, bound over the catalog's name (Ansible renders a variable anew
for every reference, and the read's options and the role variables reference it six times). The
read's options are a variable, not task arguments, for the same reason: Ansible would render them
before the action, outside that binding.

With verb revert (infertune.fleet.revert) the plan is what putting the host back would do: every
catalog entry, the unit knobs among them, is read by its kind's revert in the one read (no file is
rendered to compare, no second read), with the read's options (the GPU gate and the other checks
only where asked); the plan says verb revert, which the rollout's stages read.

Returns add_host (host_plan.published): the host's record as its host variables and the group it
joins (none for a host its plan stops), which the strategy applies on the control node as the
answer arrives, as it does add_host's. Publishing it here rather than in a task of its own spares
the fleet a serial task that templated every host's record; the group fills in the order the
hosts answer, so the rollout orders its hosts by the inventory (playbooks/rollout.yml). The task
needs changed_when: false (the strategy calls a host whose variables it set changed). A host that
cannot be read fails here with the module's answer; one that cannot be reached is unreachable,
unless the task ignores unreachable hosts (the drift watch): then it is published with
infertune_unreachable, the reason, so that the run goes on to report it.

A planned host's answer is as large as the host (some 40 KB for eight GPUs, more with each GPU,
link and knob): below -vvv it reaches the strategy alone, which publishes it, and every callback
(the output, ansible-runner's and AWX's job events) gets it censored, so that a job log holds
the plan's table rather than each host's record. A failed or unreachable read is shown whole.
"""
from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timezone

from ansible.errors import AnsibleConnectionFailure
from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.action import ActionBase
from ansible.template import trust_as_template
from ansible.utils.display import Display

from ansible_collections.infertune.fleet.infertune import gpu_health, host_plan, shipped
from ansible_collections.infertune.fleet.infertune.plain import plain

MODULE = "infertune.fleet.infertune_plan"
display = Display()
# The verbosity (-vvv) from which the output shows a planned host's answer, its whole record.
SHOWN_FROM = 3


def variable(name):
    """`name` if it is a variable's name (the options name variables, never hold expressions)."""
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"not a variable name: {name!r}")
    return name


def own_machine_id(path="/etc/machine-id"):
    try:
        with open(path, encoding="ascii") as handle:
            return handle.read().strip()
    except OSError:
        return ""


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _supports_check_mode = True  # reads only
    _VALID_ARGS = frozenset(("read", "catalog", "knobs", "second_backend", "problems", "allow_control_node", "health", "verb"))

    def _read(self, options, task_vars):
        try:
            return self._execute_module(module_name=MODULE, module_args=options, task_vars=task_vars)
        except AnsibleConnectionFailure as exc:
            if not self._task.ignore_unreachable:
                raise
            return {"unreachable": True, "msg": str(exc)}

    def _answer(self, result, read, host, check_mode):
        """The result of a read that failed: the module's answer, or, where the task ignores unreachable
        hosts, an unreachable host published."""
        if read.get("unreachable") and self._task.ignore_unreachable:
            return dict(result, changed=False, msg=f"{host}: unreachable: {read.get('msg', '')}",
                        add_host=host_plan.unreachable(host, read.get("msg"), check_mode))
        return dict(result, **read)

    def _judged(self, host, plan, options):
        """The read's GPU health with the rules of earlier reads applied (infertune/gpu_health.py),
        and this read added to the host's history on the control node (a history that cannot be
        written is said, and the plan goes on without it)."""
        health = (plan.get("gpus") or {}).get("health")
        if not isinstance(health, dict) or not options.get("history"):
            return
        directory = str(options["history"])
        judged, history = gpu_health.judge(health, gpu_health.load(directory, host), int(options.get("rma_after_reboots", 1)),
                                           datetime.now(timezone.utc).isoformat(timespec="seconds"))
        plan["gpus"]["health"] = judged
        try:
            gpu_health.save(directory, host, history)
        except OSError as exc:
            display.warning(f"{host}: GPU health history not kept in {directory}: {exc.strerror}")

    def _evaluate(self, expression, task_vars, bound):
        """A Jinja expression over the task's variables with `bound` over them; host_entries (catalog
        entries without their controller-only keys, which are never rendered) is at hand."""
        templar = self._templar.copy_with_new_env(available_variables={**task_vars, **bound})
        return plain(templar.evaluate_expression(trust_as_template(expression),
                                                 local_variables={"host_entries": host_plan.host_entries}))

    def _resolve(self, name, task_vars, bound):
        """The variable `name` with `bound` over the task's variables."""
        return self._evaluate(variable(name), task_vars, bound)

    def _selection(self, catalog_name, knobs_name, task_vars):
        """The catalog, bound over its own name as the entries of `knobs_name` it selects, unrendered
        and in its order: every later reference to it (the read's options', the role variables')
        reads these instead of rendering the selection anew, which Ansible does for each reference.
        Nothing is bound (each reference renders it) unless every name it selects is a distinct entry
        name of `knobs_name`, a list."""
        names = self._evaluate(f"{catalog_name} | map(attribute='name')", task_vars, {})
        entries = task_vars.get(knobs_name)
        if not isinstance(entries, list):
            return {}
        by_name = {entry.get("name"): entry for entry in entries if isinstance(entry, Mapping)}
        if len(set(names)) != len(names) or len(by_name) != len(entries) or not set(names) <= set(by_name):
            return {}
        return {catalog_name: [by_name[name] for name in names]}

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        args = self._task.args
        host = task_vars["inventory_hostname"]
        check_mode = bool(task_vars.get("ansible_check_mode"))
        catalog_name, knobs_name = variable(args["catalog"]), variable(args["knobs"])
        if args.get("verb", "apply") == "revert":
            return self._revert(result, host, check_mode, catalog_name, args, task_vars)
        selection = self._selection(catalog_name, knobs_name, task_vars)
        # One resolution (a name referenced more than once within it is resolved once), the read's options with it.
        knobs, unit_paths, unit_names, order, read = self._evaluate(
            f"[host_entries({catalog_name} | rejectattr('module', 'eq', 'systemd_unit')),"
            f" {catalog_name} | selectattr('module', 'eq', 'systemd_unit') | map(attribute='paths', default=[]),"
            f" {catalog_name} | selectattr('module', 'eq', 'systemd_unit') | map(attribute='args.unit'),"
            f" {catalog_name} | map(attribute='name'), {variable(args['read'])}]", task_vars, selection)
        paths = host_plan.flat(unit_paths)
        first = self._read(dict(read, knobs=knobs, fingerprint={"files": paths, "units": unit_names}), task_vars)
        if first.get("failed") or first.get("unreachable"):
            return self._answer(result, first, host, check_mode)
        plan = first["plan"]
        health = args.get("health") or {}
        self._judged(host, plan, health)
        rendered = {knob["name"]: knob for knob in knobs}
        # What the first resolution rendered, in place of the entries it came from, where the
        # selection was bound (its entries are then known by distinct names).
        if selection:
            done = dict(rendered)
            done.update((name, {"paths": knob_paths}) for name, knob_paths in zip(
                [name for name in order if name not in rendered], unit_paths))
            selection = {name: host_plan.rendered_over(entries, done)
                         for name, entries in {**selection, knobs_name: task_vars[knobs_name]}.items()}
        bound = {**selection, "infertune_plan": plan, "infertune_plan_backend": plan.get("backend") or {},
                 "infertune_units_changed": [], "infertune_plan_argv_check": {}}
        # The unit knobs' files, with the shipped ones' content read here (their src: infertune/shipped.py).
        rendered.update((knob["name"], dict(knob, args=shipped.inline_args(knob.get("args")))) for knob in self._evaluate(
            f"host_entries({catalog_name} | selectattr('module', 'eq', 'systemd_unit'))", task_vars, bound))
        catalog = [rendered[name] for name in order]
        placed = host_plan.in_place(catalog, plan.get("fingerprint") or {})
        second = None
        if not all(placed.values()):
            second_knobs, secret_files = host_plan.second_read(catalog, placed)
            bound["infertune_units_changed"] = [k["name"] for k in second_knobs]
            answer = self._read({"knobs": second_knobs, "secret_files": secret_files,
                                 "backend": self._resolve(args["second_backend"], task_vars, bound)}, task_vars)
            if answer.get("failed") or answer.get("unreachable"):
                return self._answer(result, answer, host, check_mode)
            second = answer["plan"]
            bound["infertune_plan_backend"] = {**bound["infertune_plan_backend"], **(second.get("backend") or {})}
            bound["infertune_plan_argv_check"] = second.get("backend") or {}
        extra = self._resolve(args["problems"], task_vars, bound)
        control_node = (not boolean(args.get("allow_control_node", False), strict=False)
                        and host_plan.is_control_node(plan.get("machine_id"), own_machine_id()))
        record = host_plan.record(host, catalog, plan, second, placed, bound["infertune_plan_backend"], extra, control_node,
                                  reboot_to_reset=boolean(health.get("reboot_to_reset", False), strict=False))
        result.update(changed=False, add_host=host_plan.published(host, record, check_mode))
        if Display().verbosity < SHOWN_FROM:
            # Only the strategy reads the answer: callbacks get it censored (Ansible's no_log wording).
            result["_ansible_no_log"] = True
        return result

    def _revert(self, result, host, check_mode, catalog_name, args, task_vars):
        """The revert's plan: one read of every entry with the verb revert, the host's record as the
        apply's (its group, its reasons to stop) with the plan's verb."""
        knobs, read = self._evaluate(f"[host_entries({catalog_name}), {variable(args['read'])}]", task_vars, {})
        knobs = [dict(knob, verb="revert") for knob in knobs]
        answer = self._read(dict(read, knobs=knobs), task_vars)
        if answer.get("failed") or answer.get("unreachable"):
            return self._answer(result, answer, host, check_mode)
        plan = dict(answer["plan"], verb="revert")
        control_node = (not boolean(args.get("allow_control_node", False), strict=False)
                        and host_plan.is_control_node(plan.get("machine_id"), own_machine_id()))
        record = host_plan.record(host, knobs, plan, None, {}, {}, [], control_node)
        result.update(changed=False, add_host=host_plan.published(host, record, check_mode))
        return result
