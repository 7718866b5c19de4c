"""infertune_host_plan: the documentation of the action plugin plugins/action/infertune_host_plan.py, which runs
on the controller and reads the host through M(infertune.fleet.infertune_plan) (ansible-doc reads it here)."""

DOCUMENTATION = r"""
module: infertune_host_plan
short_description: Plan one host in one task - the read, the unit files compared, the host's record and group
description:
  - Runs M(infertune.fleet.infertune_plan) on the host with O(read), then resolves on the control node the
    variables named by O(compare), O(second) and O(record), with the reads' answers bound -
    C(infertune_plan) (the first read's plan), C(infertune_units_in_place) (O(compare) resolved) and, after a
    second read, C(infertune_units_plan) (C(plan), the second read's plan).
  - Reads a second time, with the options O(second) resolves to, only when a unit knob's rendered files or
    state differ from what the first read found.
  - The record names the group the host joins (none when the record has problems: the plan stops the host);
    the caller adds the hosts to their groups, in inventory order.
  - Controller-only catalog keys (C(doc), C(rules)) are never sent to the host.
  - Never changes the host, in or out of check mode.
options:
  read:
    description: Options of M(infertune.fleet.infertune_plan) for the first read.
    type: dict
    required: true
  compare:
    description: Name of the variable that tells, per unit knob, whether its files and state are as asked.
    type: str
    required: true
  second:
    description: Name of the variable holding the options of M(infertune.fleet.infertune_plan) for the second
      read.
    type: str
    required: true
  record:
    description: Name of the variable holding the host's record - a mapping with C(problems) (a list, the
      reasons the plan stops the host) and C(group) (the group the host joins), and whatever else the role
      publishes.
    type: str
    required: true
author: infertune developers (@infertune)
"""

EXAMPLES = r"""
- name: Plan the host
  infertune.fleet.infertune_host_plan:
    read:
      knobs: "{{ infertune_selected_knobs | rejectattr('module', 'eq', 'systemd_unit') }}"
    compare: infertune_units_compared
    second: infertune_plan_second_read
    record: infertune_plan_record
  register: infertune_planned
"""

RETURN = r"""
record:
  description: The variable O(record) names, resolved after the reads.
  returned: success
  type: dict
"""
