"""infertune_drift: the documentation of the action plugin plugins/action/infertune_drift.py, which runs on the
controller (ansible-doc reads it here)."""

DOCUMENTATION = r"""
module: infertune_drift
short_description: Publish what a drift run read, for scripts and Prometheus
description:
  - Runs on the control node only, once after the read-only plan of C(playbooks/drift.yml) (C(run_once)).
  - Reads each host of the run from its variables (its reachability, the plan's stop, the plan's pending knobs
    and reboot reasons) and, from O(verified), the knobs its verification found off when the run verified, and merges that into
    the state the previous run left, so hosts outside C(--limit) keep their last values and a pending knob keeps
    the time it was first seen.
  - Writes C(drift.json) and the drift section of C(fleet.md) in O(dir), and, when O(textfile_dir) is set, the
    Prometheus textfile C(infertune_drift.prom) for node_exporter's textfile collector, atomically (a temporary
    name that does not end in C(.prom), then a rename).
  - Writes nothing on any managed host; writes on the control node under C(--check) too.
options:
  dir:
    description: The reports directory on the control node.
    type: path
    required: true
  textfile_dir:
    description: node_exporter's textfile directory (C(--collector.textfile.directory)); empty writes no textfile.
    type: path
    default: ""
  hosts:
    description: The hosts of this run (within C(--limit)).
    type: list
    elements: str
    required: true
  fleet:
    description: Every host of the inventory's C(gpu_nodes); each is present in the files.
    type: list
    elements: str
    required: true
  verified:
    description:
      - The run's verification per host (M(infertune.fleet.infertune_verify)'s C(hosts)), when the run verified; a
        host's C(failing) knobs count as pending. Empty when the run did not verify.
    type: dict
    default: {}
author: infertune developers (@infertune)
"""

EXAMPLES = r"""
- name: Publish the drift of every host of the run
  infertune.fleet.infertune_drift:
    dir: "{{ report_dir }}"
    textfile_dir: /var/lib/prometheus/node-exporter
    hosts: "{{ ansible_play_hosts_all }}"
    fleet: "{{ query('ansible.builtin.inventory_hostnames', 'gpu_nodes') }}"
  run_once: true
  register: drift
"""

RETURN = r"""
exit_status:
  description: 0 no drift, 2 a knob or a reboot pending on a host, 1 a host of the run could not be read.
  returned: success
  type: int
hosts:
  description: Per host of the run, C(checked), C(error), C(last_read), C(pending) (knob names) and
    C(reboot_pending).
  returned: success
  type: dict
msg:
  description: One line per host, what drifted.
  returned: always
  type: list
  elements: str
written:
  description: The files written on the control node.
  returned: success
  type: list
  elements: str
"""
