#!/usr/bin/python
"""Ansible module cpufreq_policy: cpufreq governor and EPP on every CPU."""

DOCUMENTATION = r"""
module: cpufreq_policy
short_description: Set the cpufreq governor and energy-performance preference on all CPUs
description:
  - Applies to every /sys/devices/system/cpu/cpuN/cpufreq in one call; the governor is written first.
  - Fails, naming the parameter, the CPU and the available values, when O(governor) or O(epp) is not
    offered by a CPU, and when O(epp) is not C(performance) while O(governor) is C(performance)
    (the kernel pins EPP to performance under that governor).
  - Drivers without EPP (acpi-cpufreq, amd-pstate in passive mode) report RV(epp_applicable) false.
  - A host without cpufreq (many VMs) reports RV(cpufreq_applicable) false and changes nothing.
options:
  governor:
    description: Governor, one of the CPUs' scaling_available_governors.
    type: str
    required: true
  epp:
    description: Energy-performance preference, one of energy_performance_available_preferences.
    type: str
author: infertune
"""

EXAMPLES = r"""
- name: Performance governor with performance EPP
  cpufreq_policy:
    governor: performance
    epp: performance
"""

RETURN = r"""
before:
  description: Number of CPUs per governor and per EPP value before.
  returned: always
  type: dict
  sample: {governor: {powersave: 128}, epp: {balance_performance: 128}}
after:
  description: Same after (predicted under check mode).
  returned: always
  type: dict
  sample: {governor: {performance: 128}, epp: {performance: 128}}
cpus:
  description: Number of CPUs with a cpufreq policy.
  returned: always
  type: int
driver:
  description: Number of CPUs per scaling driver.
  returned: when cpufreq exists
  type: dict
cpufreq_applicable:
  description: False when the host has no cpufreq policy at all.
  returned: always
  type: bool
epp_applicable:
  description: False when the driver offers no energy_performance_preference.
  returned: always
  type: bool
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.infertune_module import run_knob
from ansible.module_utils.infertune_node.cpufreq import apply_policy


def main():
    module = AnsibleModule(argument_spec={"governor": {"type": "str", "required": True},
                                          "epp": {"type": "str"}},
                           supports_check_mode=True)
    run_knob(module, apply_policy, module.params["governor"], module.params["epp"])


if __name__ == "__main__":
    main()
