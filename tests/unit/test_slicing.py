"""infertune/slicing.py and its two callers: an apply on a slice of the fleet (AWX job slicing)
is refused before any change unless a per-slice failure budget is set; --check runs may be
sliced; the un-sliced AWX job keeps working; the budget replaces rollout_max_failures on a slice."""
import os
import subprocess
import sys
import textwrap

import pytest

import controller_play
from fakehost import REPO
from infertune import slicing, validation
from test_rollout_decision import action


def lines(problems, host="gpu-01"):
    return [problem.line(host) for problem in problems]


@pytest.mark.parametrize("fleet_size", [8, "8"])  # "8": -e infertune_fleet_size=8
def test_an_apply_on_a_slice_without_a_budget_is_refused_naming_host_variable_and_rule(fleet_size):
    got = lines(slicing.guard(2, fleet_size))
    assert got == ["host gpu-01: rollout_slice_max_failures: must be set for an apply on a slice of the fleet: the"
                   " inventory's gpu_nodes holds 2 of the 8 hosts of infertune_fleet_size (AWX job slicing?), and"
                   " each slice would run its own canary and allow rollout_max_failures by itself; run the apply"
                   " unsliced, or set rollout_slice_max_failures to the failures each slice may have"]


@pytest.mark.parametrize("budget", [0, "0", "1", 2, "25%", " 1 "])
def test_a_per_slice_budget_lets_the_slice_apply(budget):
    assert slicing.guard(2, "8", budget) == []


def test_the_whole_fleet_or_no_declaration_is_no_slice():
    assert slicing.guard(8, 8) == []
    assert slicing.guard(8, "8", "", workflow_job_id=17) == []  # a workflow's apply on the whole fleet
    assert slicing.guard(3, 0) == [] and slicing.guard(3, "0") == []  # plain ansible-playbook, nothing declared
    # Not a valid size: the validation says why, once.
    assert slicing.guard(2, "eight") == [] and slicing.guard(2, -1) == []


def test_an_awx_workflow_apply_needs_the_fleet_size():
    # A standalone job template (awx_job_id, no workflow) cannot be a slice: it keeps working.
    assert slicing.guard(3, 0, workflow_job_id=None) == []
    got = lines(slicing.guard(3, 0, workflow_job_id=17))
    assert got == ["host gpu-01: infertune_fleet_size: must be set for an apply that an AWX workflow runs"
                   " (awx_workflow_job_id 17): a sliced job template runs as a workflow whose jobs each see a share"
                   " of gpu_nodes; set it to the number of hosts in gpu_nodes of the whole inventory (this run sees 3),"
                   " got 0"]


def test_an_inventory_larger_than_the_declared_fleet_is_refused():
    assert lines(slicing.guard(9, "8", "1")) == [
        "host gpu-01: infertune_fleet_size: must be at least the number of hosts in the inventory's gpu_nodes (9);"
        " update it, got 8"]


def test_the_budget_replaces_rollout_max_failures_on_a_slice_only():
    assert slicing.max_failures(2, "8", "25%", "1") == ("1", "rollout_slice_max_failures")
    assert slicing.max_failures(8, "8", "25%", "1") == ("25%", "rollout_max_failures")
    assert slicing.max_failures(2, 0, "25%", "") == ("25%", "rollout_max_failures")


def test_the_rollout_stop_names_the_budget_it_applied():
    # gpu-01 failed its plan; the slice allows none.
    hosts = ["gpu-01", "gpu-05"]
    got = action.decide(hosts, ["gpu-05"], ["gpu-05"], ["gpu-05"], [], 1, "0")
    assert got["stop"] == "1 host(s) failed (gpu-01), more than rollout_max_failures allows (0 of 2)"
    got = action.decide(hosts, ["gpu-05"], ["gpu-05"], ["gpu-05"], [], 1, "0", "rollout_slice_max_failures")
    assert got["stop"] == "1 host(s) failed (gpu-01), more than rollout_slice_max_failures allows (0 of 2)"


# ---------------------------------------------------------------------------- the variables

@pytest.mark.parametrize("values, fragment", [
    ({"infertune_fleet_size": -1}, "must be 0-1000000"),
    ({"infertune_fleet_size": "eight"}, "must be an integer"),
    ({"infertune_fleet_size": 8, "rollout_slice_max_failures": "abc"}, 'or a percentage "N%"'),
    ({"infertune_fleet_size": 8, "rollout_slice_max_failures": "150%"}, "0 <= N <= 100"),
    ({"infertune_fleet_size": 8, "rollout_slice_max_failures": -1}, "count >= 0"),
    ({"rollout_slice_max_failures": "1"}, "needs infertune_fleet_size"),
])
def test_bad_slicing_variables_are_refused(values, fragment):
    got = validation.report(values, host="gpu-01")
    assert len(got) == 1 and fragment in got[0], got
    assert got[0].startswith("host gpu-01: %s" % list(values)[-1])


@pytest.mark.parametrize("values", [
    {"infertune_fleet_size": "8", "rollout_slice_max_failures": "1"},
    {"infertune_fleet_size": 8, "rollout_slice_max_failures": "10%"},
    {"infertune_fleet_size": "0", "rollout_slice_max_failures": ""},
    {"rollout_slice_max_failures": ""},
])
def test_good_slicing_variables_pass(values):
    assert validation.report(values) == []


def test_an_upstream_summary_is_no_unknown_variable():
    # An AWX workflow hands an earlier node's set_stats artifact to the next as extra variables.
    assert validation.report({"infertune_summary_awx_41": {"verdicts": {"pass": 1}}, "infertune_sumary": 1}) == [
        "infertune_sumary: no role declares this variable; did you mean infertune_fleet_size?"]


# ---------------------------------------------------------------------------- infertune_validate

PLAYBOOK = """
- name: Plan
  hosts: gpu_nodes
  gather_facts: false
  tasks:
    - name: Check every infertune variable
      infertune.fleet.infertune_validate:
        rollout: "{{ rollout | default(true) }}"
"""

# A slice of two hosts of a larger fleet, as AWX writes a slice's inventory: every group, only
# the slice's hosts.
INVENTORY = """
all:
  children:
    gpu_nodes:
      hosts:
        gpu-01: {ansible_connection: local}
        gpu-05: {ansible_connection: local}
"""


def run_playbook(tmp_path, *extra):
    return controller_play.run(tmp_path, PLAYBOOK, INVENTORY, *extra)


def test_the_plan_refuses_a_sliced_apply_and_allows_a_sliced_check(tmp_path):
    rc, out = run_playbook(tmp_path, "-e", "infertune_fleet_size=8", "-e", "awx_job_id=42",
                           "-e", "awx_workflow_job_id=40")
    assert rc != 0 and "Traceback" not in out
    for host in ("gpu-01", "gpu-05"):
        assert ("host %s: rollout_slice_max_failures: must be set for an apply on a slice of the fleet: the"
                " inventory's gpu_nodes holds 2 of the 8 hosts" % host) in out, out
    rc, out = run_playbook(tmp_path, "--check", "-e", "infertune_fleet_size=8")
    assert rc == 0, out
    # A play that rolls nothing out (the benchmark's) is not held to the rollout's rule.
    rc, out = run_playbook(tmp_path, "-e", "infertune_fleet_size=8", "-e", "rollout=false")
    assert rc == 0, out


def test_the_plan_takes_a_budget_from_extra_vars(tmp_path):
    rc, out = run_playbook(tmp_path, "-e", "infertune_fleet_size=8", "-e", "rollout_slice_max_failures=1")
    assert rc == 0, out


def test_an_unsliced_awx_job_runs_without_new_settings_and_a_workflow_says_what_to_set(tmp_path):
    rc, out = run_playbook(tmp_path, "-e", "awx_job_id=42")
    assert rc == 0, out
    rc, out = run_playbook(tmp_path, "-e", "awx_job_id=42", "-e", "awx_workflow_job_id=40")
    assert rc != 0
    assert ("host gpu-01: infertune_fleet_size: must be set for an apply that an AWX workflow runs"
            " (awx_workflow_job_id 40)") in out and "(this run sees 2), got 0" in out, out
    rc, out = run_playbook(tmp_path, "-e", "awx_workflow_job_id=40", "-e", "infertune_fleet_size=2")
    assert rc == 0, out


ROLLOUT = """
- name: Roll out
  hosts: gpu_nodes
  gather_facts: false
  tasks:
    - name: Decide whether the rollout goes on
      infertune.fleet.infertune_rollout:
        hosts: [gpu-01, gpu-05, gpu-09]
        planned: [gpu-01, gpu-05]
        canary_count: 1
        max_failures: "50%"
        slice_max_failures: "{{ budget }}"
        fleet_size: "{{ size }}"
      run_once: true
      register: decision
    - name: Say it
      ansible.builtin.debug:
        msg: "STOP={{ decision.stop }}"
      run_once: true
"""


@pytest.mark.parametrize("size, budget, stop", [
    # gpu-09 failed its plan. A slice of 2 of 8 with a budget of none stops; the fleet's 50 % goes on.
    ("8", "0", "STOP=1 host(s) failed (gpu-09), more than rollout_slice_max_failures allows (0 of 3)"),
    ("2", "0", "STOP="),
    ("0", "", "STOP="),
])
def test_the_rollout_applies_the_per_slice_budget_on_a_slice(tmp_path, size, budget, stop):
    (tmp_path / "hosts.yml").write_text(textwrap.dedent(INVENTORY))
    (tmp_path / "rollout.yml").write_text(textwrap.dedent(ROLLOUT))
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_STDOUT_CALLBACK="default",
               ANSIBLE_CALLBACK_RESULT_FORMAT="json", ANSIBLE_NOCOLOR="1", ANSIBLE_PYTHON_INTERPRETER=sys.executable)
    proc = subprocess.run([str(REPO / ".venv" / "bin" / "ansible-playbook"), "-i", "hosts.yml", "rollout.yml",
                           "-e", f"size={size}", "-e", f"budget={budget}"],
                          capture_output=True, text=True, cwd=str(tmp_path), env=env, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f'"msg": "{stop}"' in proc.stdout, proc.stdout
