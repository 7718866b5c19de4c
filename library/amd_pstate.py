#!/usr/bin/python
"""Ansible module amd_pstate: switch the amd_pstate driver mode at runtime."""

DOCUMENTATION = r"""
module: amd_pstate
short_description: Set the amd_pstate operating mode at runtime
description:
  - Writes /sys/devices/system/cpu/amd_pstate/status when it differs from O(mode).
  - On a CPU whose vendor is not AuthenticAMD nothing is done and RV(skipped_reason) says why.
  - When the driver is not loaded (no status file; EPYC needs C(amd_pstate=<mode>) on the kernel
    command line) nothing is written and RV(amd_pstate_reboot_required) is true.
options:
  mode:
    description: Driver mode.
    type: str
    required: true
    choices: [active, passive, guided]
author: infertune
"""

EXAMPLES = r"""
- name: Run amd_pstate in active (EPP) mode
  amd_pstate:
    mode: active
"""

RETURN = r"""
before:
  description: Status file content before, null when absent.
  returned: always
  type: str
after:
  description: Status file content after (predicted under check mode), null when absent.
  returned: always
  type: str
amd_pstate_reboot_required:
  description: True when the driver is not loaded and only the kernel command line at next boot can load it.
  returned: always
  type: bool
skipped_reason:
  description: Why nothing applies (non-AMD CPU).
  returned: when skipped
  type: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.infertune_module import run_knob
from ansible.module_utils.infertune_node.amd_pstate import MODES, apply_mode


def main():
    module = AnsibleModule(argument_spec={"mode": {"type": "str", "required": True, "choices": list(MODES)}},
                           supports_check_mode=True)
    run_knob(module, apply_mode, module.params["mode"])


if __name__ == "__main__":
    main()
