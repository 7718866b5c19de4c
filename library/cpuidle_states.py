#!/usr/bin/python
"""Ansible module cpuidle_states: disable deep idle states on every CPU."""

DOCUMENTATION = r"""
module: cpuidle_states
short_description: Disable idle states whose exit latency exceeds a bound, on all CPUs
description:
  - For every CPU and every /sys/devices/system/cpu/cpuN/cpuidle/stateK, writes disable=1 when the
    state's exit latency is above O(max_latency) and disable=0 when it is at or below it.
  - States are judged by their own name and latency on each CPU; state numbers differ between CPUs.
  - Runtime only; the boot-time re-apply tool repeats it after each boot.
  - A host without a cpuidle driver (current_driver C(none) or absent) changes nothing.
options:
  max_latency:
    description: Highest exit latency in microseconds of a state that stays enabled. A negative value
      disables every state (POLL too when O(keep_poll) is false).
    type: int
    required: true
  keep_poll:
    description: Never disable the POLL state, whatever its latency.
    type: bool
    default: true
author: infertune
"""

EXAMPLES = r"""
- name: Keep only POLL and C1 (latency 1 us)
  cpuidle_states:
    max_latency: 1
"""

RETURN = r"""
before:
  description: Per state name, how many CPUs had it enabled and disabled before.
  returned: always
  type: dict
  sample: {POLL: {enabled: 128, disabled: 0}, C2: {enabled: 128, disabled: 0}}
after:
  description: Same after (predicted under check mode).
  returned: always
  type: dict
  sample: {POLL: {enabled: 128, disabled: 0}, C2: {enabled: 0, disabled: 128}}
driver:
  description: cpuidle current_driver, null when absent.
  returned: always
  type: str
cpus:
  description: Number of CPUs with idle states.
  returned: always
  type: int
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.infertune_module import run_knob
from ansible.module_utils.infertune_node.cpuidle import apply_states


def main():
    module = AnsibleModule(argument_spec={"max_latency": {"type": "int", "required": True},
                                          "keep_poll": {"type": "bool", "default": True}},
                           supports_check_mode=True)
    run_knob(module, apply_states, module.params["max_latency"], module.params["keep_poll"])


if __name__ == "__main__":
    main()
