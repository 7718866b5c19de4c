#!/usr/bin/python
"""Ansible module install_files: a set of files in one round trip."""

DOCUMENTATION = r"""
module: install_files
short_description: Install several files (content and mode) in one call
description:
  - Writes each file whose content or mode differs, atomically (temporary file and rename), creating
    parent directories. Files already in place are left alone, so a no-op run costs one round trip
    instead of two per file with M(ansible.builtin.copy) or M(ansible.builtin.template).
  - Render templates on the controller with C(lookup('ansible.builtin.template', ...)) and pass the text.
  - Supports check mode (nothing is written) and diff mode.
options:
  files:
    description: The files to install.
    type: list
    elements: dict
    required: true
    suboptions:
      path:
        description: Absolute path on the host.
        type: path
        required: true
      content:
        description: Full text of the file.
        type: str
        required: true
      mode:
        description: Octal permission bits.
        type: str
        default: "0644"
      validate:
        description: Command run on the new content before it is installed, also in check mode; C(%s) is
          C(/dev/stdin), where the content is fed, so validation writes no file anywhere. Fails the task
          without touching the file when the command fails.
        type: str
      diff:
        description: Show the content in diff mode; false shows the sizes only (shipped code).
        type: bool
        default: true
author: infertune developers (@infertune)
"""

EXAMPLES = r"""
- name: Install the launch script and its unit
  infertune.fleet.install_files:
    files:
      - path: /usr/local/sbin/sglang-launch
        content: "{{ lookup('ansible.builtin.template', 'sglang-launch.sh.j2') }}"
        mode: "0755"
        validate: bash -n %s
      - path: /etc/systemd/system/sglang.service
        content: "{{ lookup('ansible.builtin.template', 'sglang.service.j2') }}"
"""

RETURN = r"""
files:
  description: Paths that were (or in check mode would be) written.
  returned: always
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.infertune.fleet.plugins.module_utils.infertune_module import run_knob
from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node.files import install


def main():
    module = AnsibleModule(
        argument_spec={"files": {"type": "list", "elements": "dict", "required": True, "options": {
            "path": {"type": "path", "required": True},
            "content": {"type": "str", "required": True},
            "mode": {"type": "str", "default": "0644"},
            "validate": {"type": "str"}, "diff": {"type": "bool", "default": True}}}},
        supports_check_mode=True)
    run_knob(module, install, module.params["files"])


if __name__ == "__main__":
    main()
