#!/usr/bin/python
"""Ansible module host_identity: the host's machine-id and addresses, to tell it from the control node."""

DOCUMENTATION = r"""
module: host_identity
short_description: Read the host's /etc/machine-id, its interface addresses and its host name
description:
  - Reads C(/etc/machine-id) and every local IPv4 (C(/proc/net/fib_trie)) and IPv6 (C(/proc/net/if_inet6))
    address, loopback included. The control node compares them with its own (C(infertune/control_node.py))
    to refuse converging itself.
  - Read-only; runs the same in check mode and never reports a change. A missing or empty machine-id is
    returned as null, not an error.
options: {}
author: infertune
"""

EXAMPLES = r"""
- name: Read who this host is
  host_identity:
  register: identity
"""

RETURN = r"""
machine_id:
  description: The content of /etc/machine-id, or null.
  returned: always
  type: str
  sample: 3d1219c7c4c5404aaa1f6d2a48adfda4
addresses:
  description: The host's addresses, IPv4 first, loopback included.
  returned: always
  type: list
  elements: str
  sample: [10.77.213.11, 127.0.0.1, "::1"]
hostname:
  description: The host name the kernel reports.
  returned: always
  type: str
"""

import socket

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.infertune_node.identity import addresses, machine_id


def main():
    module = AnsibleModule(argument_spec={}, supports_check_mode=True)
    module.exit_json(changed=False, machine_id=machine_id("/"), addresses=addresses("/"),
                     hostname=socket.gethostname())


if __name__ == "__main__":
    main()
