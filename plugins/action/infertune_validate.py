"""infertune_validate: check every infertune variable on the controller before any change.

Runs on the control node only (no connection to the host). Reads the variables the host
sees, templates the ones it checks, and fails with one line per problem:

    host gpu-07: gpu_gate_expected_count: must be 1-1024, got -1

Options:
  roles: list of role names (and "rollout") whose variables are checked; default: all of them.
  unknown: report variables that carry one of those roles' prefixes but that no role declares
           (with the closest declared name); default true.
  rollout: the play's hosts are rolled out next (playbooks/rollout.yml); default false. Then,
           outside --check, an apply on a slice of the fleet (AWX job slicing) is refused
           unless rollout_slice_max_failures is set (infertune/slicing.py), with the
           variables' problems.
  hosts: check these hosts, each with its own variables as this task sees them (play, role
         defaults, inventory, -e), in one task run once, instead of the task's host alone: one
         worker for the fleet rather than one per host. A run-once task that fails fails every
         host of the play.
  needs: uses of the run whose Python needs the control node must have, in the Python that
         runs ansible-playbook (infertune/needs.py: verify, plot); each one it lacks is a problem
         naming the packages and the pip command that installs the collection's set for it.
         Checked once, before any host is touched.

Returns changed: false and, when a problem was found, failed: true and msg with one line per
problem (nothing else, so the failure output stays readable); otherwise msg with the count and
checked, the names of the variables that were set and checked (for every host checked).
Rules: infertune/validation.py.
"""
from __future__ import annotations


from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.action import ActionBase

from ansible_collections.infertune.fleet.infertune import control_node, needs, slicing, specs, validation
from ansible_collections.infertune.fleet.infertune.plain import plain


def _first_line(exc):
    text = str(getattr(exc, "message", None) or exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:200]


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False
    _VALID_ARGS = frozenset(("roles", "unknown", "rollout", "hosts", "needs"))

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        result["changed"] = False
        task_vars = task_vars or {}
        host = task_vars.get("inventory_hostname", "?")
        lines, checked, hosts = [], set(), [host]
        try:
            if "hosts" in self._task.args:
                hosts = self._hosts(self._templar.template(self._task.args["hosts"]))
            for name in hosts:
                found, names = self._host(name, host, task_vars)
                lines += found
                checked.update(names)
            if "needs" in self._task.args:
                lines += self._needs(self._templar.template(self._task.args["needs"]))
        except Exception as exc:  # noqa: BLE001 - one readable line, never a traceback
            lines.append("host %s: validation could not run: %s" % (host, _first_line(exc)))
        if lines:
            # Only the lines: the default callback prints the whole result of a failed task.
            result["failed"] = True
            result["msg"] = "\n".join(lines)
        else:
            result["checked"] = sorted(checked)
            where = "host %s" % host if hosts == [host] else "%d hosts" % len(hosts)
            result["msg"] = "%s: %d variables checked, no problem" % (where, len(checked))
        return result

    @staticmethod
    def _needs(uses):
        """The control node's own needs for the run's uses (the verification's pytest, the plot's
        matplotlib), in this Python: the one that runs ansible-playbook."""
        if isinstance(uses, str):
            uses = [uses]
        if not isinstance(uses, (list, tuple)) or not all(isinstance(u, str) for u in uses):
            raise ValueError("infertune_validate: needs must be a list of uses (%s)" % ", ".join(needs.NEEDS))
        return needs.problems([str(u) for u in uses])

    @staticmethod
    def _hosts(hosts):
        if isinstance(hosts, str):
            hosts = [hosts]
        if not isinstance(hosts, (list, tuple)) or not all(isinstance(h, str) for h in hosts):
            raise ValueError("infertune_validate: hosts must be a list of host names")
        return list(dict.fromkeys(str(h) for h in hosts))

    def _host(self, name, own, task_vars):
        """NAME's problems and checked names, from its variables as this task sees them: the task's
        own for the task's host, else what the strategy would hand this task on NAME."""
        try:
            if name == own:
                return self._check(task_vars, name, self._templar)
            manager = self._task.get_variable_manager()
            # ansible-core keeps the inventory on the variable manager; the host object carries its
            # groups, which the variables' layering needs.
            target = manager._inventory.get_host(name)  # pylint: disable=protected-access
            if target is None:
                return ["host %s: not in the inventory" % name], []
            variables = manager.get_vars(play=self._task.get_play(), host=target, task=self._task)
            return self._check(variables, name, self._templar.copy_with_new_env(available_variables=variables))
        except Exception as exc:  # noqa: BLE001 - one readable line per host, never a traceback
            return ["host %s: validation could not run: %s" % (name, _first_line(exc))], []

    def _check(self, task_vars, host, templar):
        args = self._task.args
        roles = args.get("roles")
        if roles is not None:
            roles = templar.template(roles)
            if isinstance(roles, str):
                roles = [roles]
            if not isinstance(roles, (list, tuple)) or not all(isinstance(r, str) for r in roles):
                return ["host %s: infertune_validate: roles must be a list of role names" % host], []
            roles = [str(r) for r in roles]
        unknown, error = validation.convert(args.get("unknown", True), "bool")
        if error:
            return ["host %s: infertune_validate: unknown %s" % (host, error)], []
        rollout, error = validation.convert(templar.template(args.get("rollout", False)), "bool")
        if error:
            return ["host %s: infertune_validate: rollout %s" % (host, error)], []

        declared = specs.declared()
        defaults = specs.role_defaults()
        role_specs = specs.load_specs()
        chosen = [n for r, spec in role_specs.items() if roles is None or r in roles for n in spec.options]
        values, lines = {}, []
        for name in chosen:
            if name not in task_vars or name in values:
                continue
            raw = task_vars[name]
            # A role's own templated default (e.g. one built from role_path) is not user input.
            if isinstance(raw, str) and "{{" in raw and raw == defaults.get(name):
                continue
            try:
                values[name] = plain(templar.template(raw))
            except Exception as exc:  # noqa: BLE001
                detail = "(value hidden)" if declared[name].secret else _first_line(exc)
                lines.append("host %s: %s: cannot be templated: %s" % (host, name, detail))
        # Names only: undeclared variables are reported, never templated or shown. Facts a
        # module returned are the host's, not input.
        facts = task_vars.get("ansible_facts")
        facts = facts if isinstance(facts, dict) else {}
        for name in task_vars:
            if isinstance(name, str) and name not in values and name not in declared and name not in facts:
                values[name] = None
        # The catalog's rules as this run's Ansible read them (the engine role's vars), where the
        # play has them: no second reading of the file in every worker.
        lines += validation.report(values, host=host, roles=roles, check_unknown=unknown,
                                   catalog=plain(task_vars.get("infertune_knobs")))
        if rollout and not self._task.check_mode:
            lines += self._slice(task_vars, values, host)
        lines += self._control_node(task_vars, host, templar)
        checked = sorted(n for n in values if n in declared)
        return lines, checked

    @staticmethod
    def _slice(task_vars, values, host):
        """An apply on a slice of the fleet (AWX job slicing) without a per-slice failure budget."""
        inventory = len((task_vars.get("groups") or {}).get("gpu_nodes") or [])
        workflow = next((task_vars[n] for n in slicing.WORKFLOW_JOB_ID if task_vars.get(n) not in (None, "")), None)
        problems = slicing.guard(inventory, values.get(slicing.FLEET_SIZE, 0), values.get(slicing.SLICE_BUDGET, ""),
                                 None if workflow is None else plain(workflow))
        return [problem.line(host) for problem in problems]

    @staticmethod
    def _control_node(task_vars, host, templar):
        """The machine that runs Ansible is never a target unless infertune_allow_control_node."""
        if boolean(templar.template(task_vars.get("infertune_allow_control_node", False)), strict=False):
            return []
        address = templar.template(task_vars.get("ansible_host", host))
        connection = templar.template(task_vars.get("ansible_connection", "ssh"))
        why = control_node.reason(str(address), connection=str(connection))
        if why is None:
            return []
        return ["host %s: is the control node (%s); set infertune_allow_control_node: true to tune it"
                % (host, why)]
