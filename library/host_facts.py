#!/usr/bin/python
"""Ansible module host_facts: read-only hardware facts for infertune."""

DOCUMENTATION = r"""
module: host_facts
short_description: Gather CPU, cpufreq, cpuidle, kernel, PCI GPU and NVIDIA module facts
description:
  - Reads /proc and /sys only and changes nothing, so it runs under C(--check).
  - Sets C(ansible_facts.infertune_hw). Files a host lacks (no cpufreq in a VM, no cpuidle
    driver, no lockdown file) are reported as null or empty, never as an error.
options: {}
author: infertune
"""

EXAMPLES = r"""
- name: Read the hardware facts
  host_facts:

- name: Show the cpufreq driver
  ansible.builtin.debug:
    var: ansible_facts.infertune_hw.cpufreq.driver
"""

RETURN = r"""
ansible_facts:
  description: C(infertune_hw) with keys cpu, cpufreq, cpuidle, kernel, lockdown,
    numa_balancing, pci_gpus and module_params.
  returned: always
  type: dict
  sample:
    infertune_hw:
      cpu: {vendor: AuthenticAMD, family: 26, model_name: AMD EPYC 9555 64-Core Processor,
            sockets: 2, count: 256, numa_nodes: 2}
      cpufreq: {driver: amd-pstate-epp, governor: performance, governors_available: [performance, powersave],
                epp: performance, epp_available: [default, performance], amd_pstate_status: active}
      cpuidle: {driver: acpi_idle, states: [{name: POLL, latency: 0}, {name: C1, latency: 1}]}
      kernel: {release: 6.12.95+deb12-amd64, cmdline: "BOOT_IMAGE=... amd_pstate=active", boot_id: "..."}
      lockdown: none
      numa_balancing: 0
      pci_gpus: [{bdf: "0000:41:00.0", vendor: "0x10de", device: "0x2bb5", class: "0x0300",
                  max_read_request: 4096}]
      module_params: {nvidia_uvm: {uvm_disable_hmm: "Y"}}
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.infertune_node.facts import collect


def main():
    module = AnsibleModule(argument_spec={}, supports_check_mode=True)
    module.exit_json(changed=False, ansible_facts={"infertune_hw": collect("/")})


if __name__ == "__main__":
    main()
