"""infertune_rollout: the documentation of the action plugin plugins/action/infertune_rollout.py, which runs on the
controller (ansible-doc reads it here)."""

DOCUMENTATION = r"""
module: infertune_rollout
short_description: Decide, before each serial batch, whether the rollout goes on
description:
  - Runs on the control node only, once per serial batch of the rollout play (C(run_once)).
  - Counts the failures so far (hosts that failed their plan, and hosts of earlier batches that did not
    converge, failed or lost), names the canary (the first O(canary_count) hosts that passed their plan
    and have changes pending) and stops the rollout when a canary host did not converge or when more
    hosts failed than O(max_failures) allows.
  - A host counts as converged once the rollout play set its C(rollout_converged) fact.
options:
  hosts:
    description: Every host of the run, within C(--limit), in inventory order.
    type: list
    elements: str
    required: true
  planned:
    description: The hosts that passed their plan.
    type: list
    elements: str
    required: true
  canary_count:
    description: How many hosts make the canary, the first batch.
    type: int
    required: true
  max_failures:
    description: Failures the rollout allows, a count or C(N%) of O(hosts) rounded down.
    type: str
    required: true
  slice_max_failures:
    description:
      - Failures each slice of a sliced apply may have; on a slice of the fleet (the inventory's C(gpu_nodes)
        fewer than O(fleet_size)) it replaces O(max_failures) when set.
    type: str
    default: ""
  fleet_size:
    description: The hosts of the whole fleet's C(gpu_nodes) (C(infertune_fleet_size)); 0 when not declared.
    type: int
    default: 0
author: infertune developers (@infertune)
"""

EXAMPLES = r"""
- name: Decide whether the rollout goes on
  infertune.fleet.infertune_rollout:
    hosts: "{{ ansible_play_hosts_all }}"
    planned: "{{ groups['infertune_pending'] | default([]) }}"
    canary_count: 1
    max_failures: 10%
  run_once: true
  register: rollout_decision
"""

RETURN = r"""
failures:
  description: The hosts failed so far.
  returned: always
  type: list
  elements: str
canary:
  description: The canary hosts.
  returned: always
  type: list
  elements: str
limit:
  description: The failures O(max_failures) allows.
  returned: always
  type: int
stop:
  description: The reason to stop; empty to go on.
  returned: always
  type: str
left_out:
  description: The hosts a stop leaves out, this batch and every later one.
  returned: always
  type: list
  elements: str
msg:
  description: The decision in one line.
  returned: always
  type: str
"""
