#!/usr/bin/python
"""Ansible module pcie_mrrs: PCIe Max Read Request Size of GPU endpoints."""

DOCUMENTATION = r"""
module: pcie_mrrs
short_description: Set the PCIe Max Read Request Size of GPU endpoints
description:
  - Selects endpoints under /sys/bus/pci/devices whose vendor is O(vendor) and whose class
    (upper 16 bits of the class file) is in O(classes); bridges and the GPU audio function are never touched.
  - Reads Device Control from the PCI Express capability in the config file and writes only with
    C(setpci -s BDF CAP_EXP+8.w=N:7000), a masked write of bits 14:12 that leaves Function-Level Reset,
    Max Payload and error bits alone, then reads back and verifies.
  - Fails naming the device when it has no PCI Express capability or its config space reads as all 0xff,
    and says so explicitly when kernel lockdown (integrity or confidentiality) refuses the write.
  - The value is lost at reboot and device reset; the boot-time re-apply tool restores it.
requirements: [pciutils]
options:
  value:
    description: Max Read Request Size in bytes.
    type: int
    required: true
    choices: [128, 256, 512, 1024, 2048, 4096]
  vendor:
    description: PCI vendor id of the devices to change.
    type: str
    default: "0x10de"
  classes:
    description: PCI classes (base class and subclass) of the devices to change.
    type: list
    elements: str
    default: ["0x0300", "0x0302"]
author: infertune
"""

EXAMPLES = r"""
- name: MaxReadReq 4096 on every NVIDIA GPU
  pcie_mrrs:
    value: 4096
"""

RETURN = r"""
before:
  description: MaxReadReq in bytes per BDF before.
  returned: always
  type: dict
  sample: {"0000:41:00.0": 512}
after:
  description: MaxReadReq in bytes per BDF after (read back; predicted under check mode).
  returned: always
  type: dict
  sample: {"0000:41:00.0": 4096}
devices:
  description: Number of matching devices.
  returned: always
  type: int
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.infertune_module import run_knob
from ansible.module_utils.infertune_node.pcie import VALUES, apply_mrrs


def main():
    module = AnsibleModule(argument_spec={"value": {"type": "int", "required": True, "choices": list(VALUES)},
                                          "vendor": {"type": "str", "default": "0x10de"},
                                          "classes": {"type": "list", "elements": "str",
                                                      "default": ["0x0300", "0x0302"]}},
                           supports_check_mode=True)
    params = module.params
    run_knob(module, apply_mrrs, params["value"], params["vendor"], params["classes"])


if __name__ == "__main__":
    main()
