"""infertune_publish: the documentation of the action plugin plugins/action/infertune_publish.py, which runs on the
controller (ansible-doc reads it here)."""

DOCUMENTATION = r"""
module: infertune_publish
short_description: Publish into the run's record - the stage a host reached, knob results, the reason it ended
description:
  - The one way a role publishes into the run's record, which the rollout's later stages, the fleet report, the
    C(infertune.fleet.infertune_report) callback and C(infertune run)'s summary read.
  - O(reached) sets C(infertune_reached); O(results) replaces knobs' results in C(infertune_results), the other
    knobs kept; O(update) merges fields into knobs' results, their other fields kept (applied after O(results));
    O(failure) sets C(infertune_failure); O(gpus) sets C(infertune_gpus).
  - Publishes the values as add_host does, as the host's variables, the way the plan
    (M(infertune.fleet.infertune_host_plan)) publishes the host's record - so never set these names with
    C(ansible.builtin.set_fact), whose value would outrank every later publication. Nothing reaches a fact cache.
  - Set C(changed_when) to false - the strategy reports a host whose variables it set as changed.
  - Runs on the control node only, without a connection to the host; the same in check mode.
options:
  reached:
    description: The stage the host reached.
    type: str
    choices: [plan, boot config, drain, reboot, runtime, sglang, verify]
  results:
    description: Knob (or stage) name to its result, which replaces the knob's result in C(infertune_results).
    type: dict
  update:
    description: Knob name to fields merged into its result in C(infertune_results) (a result is created where missing).
    type: dict
  failure:
    description: Why the rollout ended the host.
    type: str
  gpus:
    description: The GPUs the gate read.
    type: list
    elements: dict
author: infertune developers (@infertune)
"""

EXAMPLES = r"""
- name: Record the drain stage
  infertune.fleet.infertune_publish:
    reached: drain
  changed_when: false

- name: Publish the reboot
  infertune.fleet.infertune_publish:
    results:
      reboot:
        changed: "{{ __myrole_rebooted is changed }}"
        applied: "{{ not ansible_check_mode }}"
  changed_when: false

- name: Publish the package's result into the plan's entry
  infertune.fleet.infertune_publish:
    update:
      kernel_package:
        changed: "{{ __myrole_installed is changed }}"
  changed_when: false
"""

RETURN = r"""
add_host:
  description:
    - The publication as add_host answers - C(host_name) (the task's host), C(groups) (none) and C(host_vars)
      (the names it sets, with C(infertune_results) merged).
  returned: success
  type: dict
"""
