"""host_entries: catalog entries as a host needs them, the controller-only keys (doc, rules) left
out before they are rendered, so that a plan's arguments carry neither their size nor their cost."""
from __future__ import annotations

from ansible_collections.infertune.fleet.infertune.host_plan import host_entries

DOCUMENTATION = r"""
name: host_entries
author: infertune developers (@infertune)
short_description: catalog entries without their controller-only keys
description:
  - "Each entry of the knob catalog without C(doc) and C(rules), which only the control node reads
    (the documentation's tables, the input validation). The keys left out are never templated."
options:
  _input:
    description: catalog entries (mappings)
    type: list
    elements: dict
    required: true
"""

EXAMPLES = r"""
- name: Read the knobs
  infertune.fleet.infertune_plan:
    knobs: "{{ infertune_selected_knobs | infertune.fleet.host_entries }}"
"""

RETURN = r"""
_value:
  description: the entries, without C(doc) and C(rules)
  type: list
  elements: dict
"""


class FilterModule:
    def filters(self):
        return {"host_entries": host_entries}
