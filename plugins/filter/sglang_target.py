"""sglang_target: host:port where the fleet reaches a server, the one computation infertune/targets.py
makes for reports/sglang-targets.json, so the sglang role's hooks and the file_sd list agree."""
from __future__ import annotations

from ansible_collections.infertune.fleet.infertune.targets import endpoint

DOCUMENTATION = r"""
name: sglang_target
author: infertune developers (@infertune)
short_description: host:port where the fleet reaches a server listening on an address
description:
  - "The listen address and port, unless the server listens on every address (C(0.0.0.0) or C(::)):
    then the address the host is reached at. An IPv6 address is put in brackets."
options:
  _input:
    description: the address the server listens on
    type: str
    required: true
  port:
    description: the port it listens on
    type: int
    required: true
  reached_at:
    description: the address the host is reached at (its C(ansible_host))
    type: str
    required: true
"""

EXAMPLES = r"""
- name: Say where sglang answers
  ansible.builtin.debug:
    msg: "{{ sglang_host | infertune.fleet.sglang_target(sglang_port, ansible_host) }}"
"""

RETURN = r"""
_value:
  description: host:port, IPv6 in brackets
  type: str
"""


class FilterModule:
    def filters(self):
        return {"sglang_target": endpoint}
