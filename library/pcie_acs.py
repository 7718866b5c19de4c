#!/usr/bin/python
"""Ansible module pcie_acs: clear ACS P2P redirect on the PCIe ports above the GPUs."""

DOCUMENTATION = r"""
module: pcie_acs
short_description: Clear ACS P2P Request and Completion Redirect on the ports above the GPUs
description:
  - Finds the GPU endpoints (vendor O(vendor), class in O(classes); SR-IOV virtual functions never) and,
    from the sysfs nesting under /sys/devices/pci*, every bridge between each GPU and its root port
    (switch downstream and upstream ports, root ports).
  - On each of those bridges that has the ACS extended capability (ID 0x000D), clears P2P Request Redirect
    (bit 2) and P2P Completion Redirect (bit 3) of ACS Control with the masked write
    C(setpci -s BDF ECAP_ACS+6.w=0000:000c), then reads back and verifies. Every other ACS bit, bridges
    without the capability and bridges that lead to no GPU are left untouched.
  - With the redirect bits set, P2P traffic between GPUs goes up through the root complex (about 50 instead
    of 103 GB/s bidirectional between two GPUs on one switch); switch downstream ports enforce it as well as
    root ports, so both are cleared.
  - Clearing ACS gives up the isolation between the devices behind a port. When a device below a port whose
    redirect would be cleared is bound to vfio-pci (handed to a VM), the module fails naming that device and
    the ports above it, unless O(force) is true; a vfio-pci device elsewhere (below no such port) does not stop it.
  - Root and downstream ports without the capability are named in the result (C(without_acs) and C(msg));
    switch upstream ports never have it and are not listed.
  - The setting is lost at reboot; the boot-time oneshot re-applies it.
requirements: [pciutils]
options:
  vendor:
    description: PCI vendor id of the GPUs whose paths are cleared.
    type: str
    default: "0x10de"
  classes:
    description: PCI classes (base class and subclass) of the GPUs.
    type: list
    elements: str
    default: ["0x0300", "0x0302"]
  force:
    description: Clear ACS redirect even when devices are bound to vfio-pci.
    type: bool
    default: false
author: infertune
"""

EXAMPLES = r"""
- name: Let GPUs talk P2P through their switches
  pcie_acs:
"""

RETURN = r"""
before:
  description: ACS Control per port before, for the ports above the GPUs that have the capability.
  returned: always
  type: dict
  sample: {"0000:10:01.1": "0x001d", "0000:12:00.0": "0x001d"}
after:
  description: ACS Control per port after (read back; predicted under check mode).
  returned: always
  type: dict
  sample: {"0000:10:01.1": "0x0011", "0000:12:00.0": "0x0011"}
ports:
  description: Number of bridges above the GPUs.
  returned: always
  type: int
without_acs:
  description: Root and switch downstream ports above the GPUs without the ACS capability (left untouched);
    switch upstream ports, which never have it, are not listed. C(msg) names them too.
  returned: always
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.infertune_module import run_knob
from ansible.module_utils.infertune_node.pcie_acs import apply_acs


def main():
    module = AnsibleModule(argument_spec={"vendor": {"type": "str", "default": "0x10de"},
                                          "classes": {"type": "list", "elements": "str",
                                                      "default": ["0x0300", "0x0302"]},
                                          "force": {"type": "bool", "default": False}},
                           supports_check_mode=True)
    params = module.params
    run_knob(module, apply_acs, params["vendor"], params["classes"], params["force"])


if __name__ == "__main__":
    main()
