#!/usr/bin/python
"""Ansible module pcie_fabric: read-only gates on the PCIe links, BAR1 and P2P status of the GPUs."""

DOCUMENTATION = r"""
module: pcie_fabric
short_description: Check the PCIe fabric under the GPUs (link width and speed, BAR1, P2P) and report AER counters
description:
  - Read-only; it changes nothing and runs the same in check mode.
  - C(width) gate, for every link from each GPU up to its root port (root port or switch downstream port to the
    device below it), Link Status width against Link Capabilities width; a root port configured narrower than
    the device (BIOS bifurcation, e.g. x4) is named as the cause.
  - C(speed) gate, the fastest speed the link can reach (Link Capabilities 2 supported speeds, capped by the
    Link Control 2 target speed of either end) against what both ends support. The current speed is never
    judged, as GPUs lower it while idle.
  - C(bar1) gate, the BAR1 size (the second assigned region of the sysfs resource file, as NVIDIA numbers
    BARs) of every GPU at least its memory (nvidia-smi memory.total).
  - C(p2p) gate, C(nvidia-smi topo -p2p r) and C(-p2p w) report OK between all GPUs.
  - PCIe AER counters (sysfs aer_dev_correctable, aer_dev_fatal, aer_dev_nonfatal) of the GPUs and the ports
    above them are returned, never judged; counters that are not zero are reported as Ansible warnings.
  - A gate with nothing to check is reported as not applicable (in C(msg) and C(not_applicable)), never as
    passed; C(width) and C(speed) for GPUs on a root bus with no port above them (a VM), C(p2p) with fewer
    than two GPUs.
  - Fails with one message listing every failure, each naming the device and what to fix.
options:
  vendor:
    description: PCI vendor id of the GPUs.
    type: str
    default: "0x10de"
  classes:
    description: PCI classes (base class and subclass) of the GPUs.
    type: list
    elements: str
    default: ["0x0300", "0x0302"]
  gates:
    description: Gates to enforce; facts are returned for all of them.
    type: list
    elements: str
    choices: [width, speed, bar1, p2p]
    default: [width, speed, bar1, p2p]
  nvidia_smi:
    description: The nvidia-smi command (used by the bar1 and p2p gates).
    type: str
    default: nvidia-smi
author: infertune
"""

EXAMPLES = r"""
- name: Links and BAR1 before tuning
  pcie_fabric:
    gates: [width, speed, bar1]

- name: P2P between all GPUs after ACS and the IOMMU are set
  pcie_fabric:
    gates: [p2p]
"""

RETURN = r"""
gpus:
  description: Number of GPUs found.
  returned: always
  type: int
links:
  description: One entry per link on the GPU paths, with the trained width, the widths both ends support,
    the current generation and the highest generation the link can reach.
  returned: always
  type: list
  elements: dict
  sample: [{"upper": "0000:10:01.1", "device": "0000:11:00.0", "width": 16, "width_cap": 16,
            "upper_width_cap": 16, "gen": 5, "gen_reach": 5}]
bar1_mib:
  description: BAR1 size per GPU in MiB.
  returned: always
  type: dict
memory_mib:
  description: Memory per GPU in MiB (nvidia-smi), when the bar1 or p2p gate is enforced.
  returned: when the bar1 or p2p gate is enforced and GPUs were found
  type: dict
p2p:
  description: P2P read and write status per GPU pair ("0-1" -> OK, CNS, NS, ...).
  returned: when the p2p gate is enforced and GPUs were found
  type: dict
aer:
  description: AER error totals (correctable, fatal, nonfatal) per GPU and port that exposes them.
  returned: always
  type: dict
not_applicable:
  description: The enforced gates that had nothing to check, with the reason.
  returned: always
  type: dict
  sample: {"width": "no GPU behind a PCIe port", "speed": "no GPU behind a PCIe port", "p2p": "fewer than two GPUs"}
failures:
  description: One line per failed gate check.
  returned: always
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.infertune_node.gate import TuningError
from ansible.module_utils.infertune_node.pcie_fabric import GATES, check


def main():
    module = AnsibleModule(argument_spec={"vendor": {"type": "str", "default": "0x10de"},
                                          "classes": {"type": "list", "elements": "str",
                                                      "default": ["0x0300", "0x0302"]},
                                          "gates": {"type": "list", "elements": "str", "choices": list(GATES),
                                                    "default": list(GATES)},
                                          "nvidia_smi": {"type": "str", "default": "nvidia-smi"}},
                           supports_check_mode=True)
    params = module.params
    try:
        result = check("/", params["vendor"], params["classes"], params["gates"], params["nvidia_smi"])
    except TuningError as exc:
        module.fail_json(msg=str(exc))
    # Ansible's own warnings channel: a `warnings` key in the result is deprecated (ansible-core 2.19).
    for warning in result.pop("warnings"):
        module.warn(warning)
    if result["failures"]:
        module.fail_json(**result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
