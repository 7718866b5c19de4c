"""infertune_report_start: the documentation of the action plugin plugins/action/infertune_report_start.py, which runs on the
controller (ansible-doc reads it here)."""

DOCUMENTATION = r"""
module: infertune_report_start
short_description: Mark the fleet report an earlier run left as not current
description:
  - At a run's start, marks the C(fleet.json) and C(fleet.md) an earlier run left in O(dir) as not current,
    so that they never read as this run's.
  - Runs on the control node only; use it with C(run_once). The C(infertune.fleet.infertune_report)
    callback reads its result to write this run's report should the playbook end before its verify play.
options:
  dir:
    description: The reports directory.
    type: path
    required: true
  hosts:
    description: The hosts the run's report covers.
    type: list
    elements: str
    required: true
author: infertune developers (@infertune)
"""

EXAMPLES = r"""
- name: Mark the earlier fleet report as not current
  infertune.fleet.infertune_report_start:
    dir: "{{ report_dir }}"
    hosts: "{{ ansible_play_hosts_all }}"
  run_once: true
"""

RETURN = r"""
dir:
  description: The reports directory.
  returned: always
  type: str
hosts:
  description: The hosts the run's report covers.
  returned: always
  type: list
  elements: str
started:
  description: When this run started (UTC, ISO 8601).
  returned: always
  type: str
  sample: "2026-12-03T10:00:00+00:00"
marked:
  description: Whether there was an earlier report to mark.
  returned: always
  type: bool
catalog:
  description: What the report reads of this run's knob catalog (C(infertune_knobs)), one row per knob
    (name, label, verify, module, unit); null in a play without the catalog.
  returned: always
  type: list
  elements: dict
"""
