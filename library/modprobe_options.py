#!/usr/bin/python
"""Ansible module modprobe_options: kernel module options file."""

DOCUMENTATION = r"""
module: modprobe_options
short_description: Write kernel module options and report which loaded modules differ
description:
  - Writes one sorted C(options MODULE P=V ...) line per module to O(path), under a header comment.
  - Compares each wanted value with /sys/module/MODULE/parameters/P of a loaded module (Y/N and 1/0 compare
    alike); a loaded module that differs needs a reload or reboot, an unloaded one does not.
options:
  options:
    description: Module name to parameter name to value.
    type: dict
    required: true
  path:
    description: File to write.
    type: path
    default: /etc/modprobe.d/infertune.conf
author: infertune
"""

EXAMPLES = r"""
- name: Disable HMM in the NVIDIA UVM driver
  modprobe_options:
    options:
      nvidia_uvm:
        uvm_disable_hmm: 1
"""

RETURN = r"""
before:
  description: File content before.
  returned: always
  type: str
after:
  description: File content after.
  returned: always
  type: str
live:
  description: Per module, whether it is loaded and which parameters differ from the running value.
  returned: always
  type: dict
  sample: {nvidia_uvm: {loaded: true, differs: {uvm_disable_hmm: {wanted: "1", live: "N"}}}}
modprobe_options_reload_required:
  description: True when a loaded module runs with a value other than the wanted one.
  returned: always
  type: bool
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.infertune_module import run_knob
from ansible.module_utils.infertune_node.modprobe import apply_options


def main():
    module = AnsibleModule(argument_spec={"options": {"type": "dict", "required": True},
                                          "path": {"type": "path", "default": "/etc/modprobe.d/infertune.conf"}},
                           supports_check_mode=True)
    run_knob(module, apply_options, module.params["options"], module.params["path"])


if __name__ == "__main__":
    main()
