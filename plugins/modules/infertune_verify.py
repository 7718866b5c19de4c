"""infertune_verify: the documentation of the action plugin plugins/action/infertune_verify.py, which runs on the
controller (ansible-doc reads it here)."""

DOCUMENTATION = r"""
module: infertune_verify
short_description: Verify the run's hosts with the collection's testinfra suite and write the fleet report
description:
  - Runs on the control node only (C(run_once)). Runs the verification suite the collection ships
    (C(tests/verify), one pytest-testinfra run for every host to verify) and writes C(fleet.json) and
    C(fleet.md) in O(dir).
  - A host is verified when it is in the play, did not fail and was not left out by a stopped rollout;
    it is checked against the values it was tuned to and reached with its O(connection) variables, none
    when it has one of O(secrets), which are never handed over.
  - The values it was tuned to are the documented inputs of O(roles) (the options of their argument
    specs, less those marked C(no_log)) as Ansible resolves them for that host in this play, the play's
    role defaults under the host's inventory variables, facts and extra vars, templated in its context.
  - Fails when the verification itself broke, not when a knob is off (the report says so).
options:
  dir:
    description: The reports directory.
    type: path
    required: true
  hosts:
    description: Every host of the run.
    type: list
    elements: str
    required: true
  fleet:
    description: Every host of the inventory group, for the targets file.
    type: list
    elements: str
    required: true
  tests:
    description: The verification tests to run; empty runs them all.
    type: list
    elements: str
    default: []
  roles:
    description: The roles whose inputs the hosts are verified against (roles of this collection).
    type: list
    elements: str
    required: true
  connection:
    description: Names of the connection variables handed to testinfra.
    type: list
    elements: str
    required: true
  secrets:
    description: Names of variables (a password, for instance) whose presence keeps a host's connection
      variables from being handed over; testinfra then reads the inventory itself.
    type: list
    elements: str
    required: true
  enforce:
    description: Name the hosts whose knobs are off in RV(fail), besides those the plan or the rollout ended
      (C(report_enforce); false under C(--check), where nothing was applied).
    type: bool
    default: true
author: infertune developers (@infertune)
"""

EXAMPLES = r"""
- name: Verify every host and write the fleet report
  infertune.fleet.infertune_verify:
    dir: reports
    hosts: "{{ ansible_play_hosts_all }}"
    fleet: "{{ groups['gpu_nodes'] }}"
    tests: []
    roles: [cpu_power, sysctl, pcie, gpu_gate]
    connection: [ansible_host, ansible_port, ansible_user]
    secrets: [ansible_password, ansible_ssh_pass]
  run_once: true
"""

RETURN = r"""
rc:
  description: The verification's exit code.
  returned: always
  type: int
stdout:
  description: The verification's output.
  returned: always
  type: str
stdout_lines:
  description: The verification's output, line by line.
  returned: always
  type: list
  elements: str
hosts:
  description: Per host, its C(result) (pass, fail, not verified), C(off), the details of its checks that
    failed or broke, and C(failing), the knobs they belong to.
  returned: success
  type: dict
verified:
  description: The hosts it verified; they reached the verify stage.
  returned: success
  type: list
  elements: str
fail:
  description: Per host of the play to fail, why; those the plan or the rollout ended (stage and reason) and,
    with O(enforce), those whose knobs are off (the checks that failed or broke). A later play fails them by name.
  returned: success
  type: dict
summary:
  description: The run's summary (C(run_summary) in C(fleet.json)), published with C(set_stats).
  returned: success
  type: dict
summary_key:
  description: The C(set_stats) key the summary is published under, C(infertune_summary_awx_<awx_job_id>) under
    AWX, else C(infertune_summary_run_<time>_<random>).
  returned: success
  type: str
"""
