#!/usr/bin/python
"""Ansible module kernel_cmdline: the configured kernel command line."""

DOCUMENTATION = r"""
module: kernel_cmdline
short_description: Add, replace and remove kernel command line parameters for the next boot
description:
  - On GRUB hosts computes the effective C(GRUB_CMDLINE_LINUX_DEFAULT) by sourcing /etc/default/grub and the
    other /etc/default/grub.d/*.cfg files, replaces parameters with the same key, removes O(remove) keys, keeps
    everything else in order, and writes the FULL result to O(dropin), so /etc/default/grub is never edited.
  - On systemd-boot hosts (/etc/kernel/cmdline exists, e.g. Proxmox with ZFS) edits that file instead and runs
    C(proxmox-boot-tool refresh) when present.
  - Fails when a drop-in that sorts after O(dropin) changes the variable again.
options:
  params:
    description: Parameters to have, C(key=value) or a bare C(flag).
    type: list
    elements: str
    required: true
  remove:
    description: Keys to remove.
    type: list
    elements: str
    default: []
  dropin:
    description: GRUB drop-in to write (must be a .cfg in /etc/default/grub.d).
    type: path
    default: /etc/default/grub.d/60-infertune.cfg
  update:
    description: Run update-grub (or proxmox-boot-tool refresh) when the file changed.
    type: bool
    default: true
author: infertune
"""

EXAMPLES = r"""
- name: amd_pstate active, deep C-states off, old flag gone
  kernel_cmdline:
    params: [amd_pstate=active, processor.max_cstate=1]
    remove: [intel_pstate]
"""

RETURN = r"""
before:
  description: Configured command line before.
  returned: always
  type: str
after:
  description: Configured command line after.
  returned: always
  type: str
running:
  description: Command line of the running kernel (/proc/cmdline).
  returned: always
  type: str
path:
  description: File that holds the configured command line.
  returned: always
  type: str
kernel_cmdline_reboot_required:
  description: True when the running command line lacks a wanted parameter or still has a removed one.
  returned: always
  type: bool
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.infertune_module import run_knob
from ansible.module_utils.infertune_node.cmdline import apply_cmdline


def main():
    module = AnsibleModule(argument_spec={"params": {"type": "list", "elements": "str", "required": True},
                                          "remove": {"type": "list", "elements": "str", "default": []},
                                          "dropin": {"type": "path",
                                                     "default": "/etc/default/grub.d/60-infertune.cfg"},
                                          "update": {"type": "bool", "default": True}},
                           supports_check_mode=True)
    params = module.params
    run_knob(module, apply_cmdline, params["params"], params["remove"], params["dropin"], params["update"])


if __name__ == "__main__":
    main()
