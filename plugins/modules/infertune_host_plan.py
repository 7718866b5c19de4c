"""infertune_host_plan: the documentation of the action plugin plugins/action/infertune_host_plan.py, which runs
on the controller and reads the host through M(infertune.fleet.infertune_plan) (ansible-doc reads it here)."""

DOCUMENTATION = r"""
module: infertune_host_plan
short_description: Plan one host in one task - the read, the unit files compared, the host's record
description:
  - Runs M(infertune.fleet.infertune_plan) on the host with O(read) and, from the catalog the variable
    O(catalog) names, its knobs but the unit knobs (C(module=systemd_unit)) and the fingerprint of the unit
    knobs (their paths and units). Then, on the control node, resolves the unit knobs again with the sglang
    release the read found (C(infertune_plan_backend)) bound, and compares their rendered files and state with
    the read's fingerprint.
  - The catalog is resolved twice per host (before and after the first read), not once per use - each
    resolution renders what it returns anew.
  - Reads a second time only when a unit knob differs - its files diffed, and the backend check the variable
    O(second_backend) names (with C(infertune_units_changed), the unit knobs that differ, bound).
  - Builds the host's record (infertune/host_plan.py) - the plan of both reads, the results, the backend
    verdict, every reason to stop the host (knobs that cannot be applied, the GPU and fabric gates, the
    variable O(problems) names, the model weights, the control node) and the group the host joins, none
    for a stopped host.
  - Publishes the record as add_host does - the strategy sets the host variables C(infertune_plan),
    C(infertune_results), C(infertune_gpus), C(sglang_support), C(infertune_check_mode) and, for a stopped
    host, C(infertune_failure), and adds the host to C(infertune_pending) or C(infertune_converged) as its
    answer arrives. Order the group's hosts by the inventory where order matters (the rollout play
    targets C(gpu_nodes:&infertune_pending)).
  - Below C(-vvv) the answer of a planned host, its whole record, reaches callbacks (the output, job
    events) censored, as Ansible shows a C(no_log) result - it grows with the host's GPUs, links and
    knobs; the plan's table shows what it decided. A failed or unreachable read is shown whole.
  - A unit file may name its source on the control node (C(src), a file of this collection) instead of
    its content - read there, compared and sent to the host as its content.
  - Set C(changed_when) to false - the strategy reports a host whose variables it set as changed.
  - A host that cannot be reached is unreachable, unless the task ignores unreachable hosts - then it is
    published with C(infertune_unreachable), the reason, in no group, and the task succeeds.
  - Controller-only catalog keys (C(doc), C(rules)) are never rendered nor sent to the host.
  - Never changes the host, in or out of check mode.
options:
  read:
    description:
      - Name of the variable holding the options of M(infertune.fleet.infertune_plan) for the first read,
        but C(knobs) and C(fingerprint), which the action sets from O(catalog). Resolved with the catalog
        bound as below.
    type: str
    required: true
  catalog:
    description:
      - Name of the variable holding the run's catalog entries, a selection of O(knobs)' entries.
      - Rendered once for its entries' names; from then on, where those are distinct entry names of O(knobs),
        the catalog's name is bound to those entries, unrendered - every other reference to it (the read's
        options', the variables the later resolutions read) reads them rather than rendering the
        selection again.
    type: str
    required: true
  knobs:
    description: Name of the variable holding every catalog entry, a list of dicts keyed by C(name).
    type: str
    required: true
  second_backend:
    description: Name of the variable holding the second read's backend check options, or none (with
      O(verb=apply), required).
    type: str
  problems:
    description: Name of the variable holding more reasons to stop the host, a list of lines (with
      O(verb=apply), required).
    type: str
  verb:
    description:
      - C(apply) plans the knobs as above. C(revert) plans putting the host back as it was before infertune
        (C(infertune.fleet.revert)) - every entry of O(catalog), the unit knobs among them, read once with the
        verb C(revert), no file compared and no second read; the plan published says C(verb=revert).
    type: str
    choices: [apply, revert]
    default: apply
  allow_control_node:
    description: Plan the control node too (its /etc/machine-id is the host's).
    type: bool
    default: false
author: infertune developers (@infertune)
"""

EXAMPLES = r"""
- name: Plan the host
  infertune.fleet.infertune_host_plan:
    read: infertune_plan_read
    catalog: infertune_selected_knobs
    knobs: infertune_knobs
    second_backend: infertune_plan_second_backend
    problems: infertune_plan_sglang_problems
  vars:
    infertune_plan_read:
      gpu_gate: "{{ infertune_gate_check }}"
  changed_when: false
"""

RETURN = r"""
add_host:
  description:
    - The host's record as add_host answers - C(host_name), C(groups) (C(infertune_pending),
      C(infertune_converged), or none for a host its plan stops or could not reach) and C(host_vars).
  returned: success
  type: dict
"""
