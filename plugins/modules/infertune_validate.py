"""infertune_validate: the documentation of the action plugin plugins/action/infertune_validate.py, which runs on the
controller (ansible-doc reads it here)."""

DOCUMENTATION = r"""
module: infertune_validate
short_description: Check every infertune variable on the controller before any change
description:
  - Reads the variables the host sees, templates the ones the roles declare (their
    C(meta/argument_specs.yml)) and checks each against its rule, as Ansible gets it from C(-e) too
    (strings for integers and booleans).
  - "Fails with one line per problem, naming the host, the variable and the rule, for example
    C(host gpu-07: gpu_gate_expected_count: must be 1-1024, got -1). A secret's value is never shown."
  - Also fails when the host is the control node itself, unless C(infertune_allow_control_node) is true.
  - Runs on the control node only, with no connection to the host.
options:
  roles:
    description: The roles (and C(rollout)) whose variables are checked; by default all of them.
    type: list
    elements: str
  unknown:
    description: Report variables that carry one of those roles' prefixes but that no role declares,
      with the closest declared name.
    type: bool
    default: true
  rollout:
    description:
      - The play's hosts are rolled out next (C(playbooks/rollout.yml)). Then, outside C(--check), an apply on
        a slice of the fleet (AWX job slicing, where the inventory's C(gpu_nodes) holds fewer hosts than
        C(infertune_fleet_size)) is refused unless C(rollout_slice_max_failures) is set, and an apply that an
        AWX workflow runs needs C(infertune_fleet_size).
    type: bool
    default: false
  hosts:
    description:
      - Check each of these hosts with its own variables as this task sees them on it (play variables,
        role defaults, inventory, C(-e)), in this one task, instead of the task's host alone. With
        C(run_once), one worker checks the fleet rather than one worker per host.
      - A run-once task that fails ends every host of the play; Ansible's recap counts the failure on
        the host the task ran on, and the message names each host with a problem.
    type: list
    elements: str
  needs:
    description:
      - Uses of the run whose Python packages the control node must have, in the Python that runs
        ansible-playbook - C(verify) (pytest, pytest-testinfra - the verification runs there) and C(plot)
        (matplotlib - the benchmark's plot). Each use it lacks, or has too old, is a problem naming the
        packages and the pip command that installs the collection's requirements file for it, before
        any host is touched.
    type: list
    elements: str
    choices: [verify, plot]
author: infertune developers (@infertune)
"""

EXAMPLES = r"""
- name: Check every infertune variable of every host, once
  infertune.fleet.infertune_validate:
    hosts: "{{ ansible_play_hosts }}"
  run_once: true
  any_errors_fatal: true

- name: Check every variable and that the control node can run the verification, once
  infertune.fleet.infertune_validate:
    hosts: "{{ ansible_play_hosts }}"
    needs: [verify]
  run_once: true
  any_errors_fatal: true

- name: Check the sglang role's variables only
  infertune.fleet.infertune_validate:
    roles: [sglang]
"""

RETURN = r"""
msg:
  description: One line per problem when one was found, otherwise how many variables were checked.
  returned: always
  type: str
checked:
  description: The declared variables that were set and checked (on any host checked).
  returned: success
  type: list
  elements: str
"""
