"""plugins/callback/infertune_report.py, run by ansible-playbook on this machine: a serial
batch whose only host is lost mid-stage ends the playbook before the verify play (Ansible's
PlaybookExecutor), yet the run ends with a report of its own, and the report an earlier run
left is never left looking current."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from infertune import report

REPO = Path(__file__).resolve().parents[2]

# gpu-b's reason to stop, as the plan publishes it (a host variable its action returns as add_host
# does: publish_plan below stands in for it), as add_host itself does, as the rollout's rescue
# does (infertune_publish) and as a fact.
BY_PLAN = """    - name: The plan's reason
      publish_plan:
      changed_when: false
"""
PUBLISH_PLAN = """from ansible.plugins.action import ActionBase


class ActionModule(ActionBase):
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        host = task_vars["inventory_hostname"]
        host_vars = {"infertune_check_mode": False}
        if host == "gpu-b":
            host_vars["infertune_failure"] = "gpu-b: GPU gate: 0 GPUs"
        return {"changed": False, "add_host": {"host_name": host, "groups": [], "host_vars": host_vars}}
"""
# The plan's own answer reaches callbacks censored below -vvv (its record is as large as the
# host): the callback reads what it published from the inventory.
BY_PLAN_CENSORED = """    - name: The plan's reason
      infertune_host_plan:
      changed_when: false
"""
BY_ADD_HOST = """    - name: The plan's reason
      ansible.builtin.add_host:
        name: "{{ item }}"
        infertune_failure: "{{ 'gpu-b: GPU gate: 0 GPUs' if item == 'gpu-b' else omit }}"
        infertune_check_mode: false
      loop: "{{ ansible_play_hosts }}"
      run_once: true
"""
BY_PUBLISH = """    - name: The rescue's reason
      infertune.fleet.infertune_publish:
        failure: "gpu-b: GPU gate: 0 GPUs"
      changed_when: false
      when: inventory_hostname == 'gpu-b'
    - name: Not in check mode
      ansible.builtin.set_fact:
        infertune_check_mode: false
"""
BY_SET_FACT = """    - name: The plan's reason
      ansible.builtin.set_fact:
        infertune_failure: "gpu-b: GPU gate: 0 GPUs"
        infertune_check_mode: false
      when: inventory_hostname == 'gpu-b'
"""

# The plan marks the earlier report; gpu-a then goes first, alone, and is lost in its runtime
# stage (ssh to a closed port: unreachable); gpu-b failed its plan; gpu-c never gets its batch.
PLAY = """- name: Plan
  hosts: gpu_nodes
  gather_facts: false
  tasks:
    - name: Mark the earlier report
      ansible.builtin.import_role:
        name: infertune.fleet.report
        tasks_from: start
    - name: The engine, whose catalog the plan play holds
      ansible.builtin.import_role:
        name: infertune.fleet.infertune
        tasks_from: show_plan
      when: false
{reason}
- name: Roll out
  hosts: gpu-a,gpu-c
  gather_facts: false
  serial: 1
  tasks:
    - name: Record the runtime stage
      infertune.fleet.infertune_publish:
        reached: runtime
      changed_when: false
    - name: Apply the runtime knobs
      ansible.builtin.ping:
      vars:
        ansible_connection: ssh
        ansible_host: 127.0.0.1
        ansible_port: 1
        ansible_ssh_common_args: -o ConnectTimeout=5

- name: Verify
  hosts: gpu_nodes
  gather_facts: false
  tasks:
    - name: Verify and report
      ansible.builtin.import_role:
        name: infertune.fleet.infertune
        tasks_from: verify
"""


def run_lost_batch(tmp_path, reason=BY_PLAN, **env):
    """The play above after an earlier run's passing report; returns (reports dir, rc, output)."""
    reports = tmp_path / "reports"
    # An earlier run's report: every host passed.
    (reports / "hosts").mkdir(parents=True)
    earlier = {h: {"verify": True, "results": None, "rollout": {"stage": "verify"}} for h in ("gpu-a", "gpu-b", "gpu-c")}
    report.write(reports, list(earlier), earlier, verified=False)
    (reports / "verify").mkdir()
    (reports / "verify" / "fleet.xml").write_text(
        '<testsuites><testsuite name="pytest">' + "".join(
            f'<testcase classname="t" name="test_gpu_count[ansible://{h}]"/>' for h in earlier) + "</testsuite></testsuites>")
    inventory = {"all": {"vars": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable},
                         "children": {"gpu_nodes": {"hosts": {"gpu-a": {}, "gpu-b": {}, "gpu-c": {}}}}}}
    (tmp_path / "inventory.yml").write_text(yaml.safe_dump(inventory))
    (tmp_path / "play.yml").write_text(PLAY.replace("{reason}", reason))
    (tmp_path / "action_plugins").mkdir()
    (tmp_path / "action_plugins" / "publish_plan.py").write_text(PUBLISH_PLAN)
    (tmp_path / "action_plugins" / "infertune_host_plan.py").write_text(PUBLISH_PLAN.replace(
        '"host_vars": host_vars}}', '"host_vars": host_vars}, "_ansible_no_log": True}'))
    argv = [str(Path(sys.executable).parent / "ansible-playbook"), str(tmp_path / "play.yml"),
            "-i", str(tmp_path / "inventory.yml"), "-e", f"report_dir={reports}", "-e", "report_enforce=false"]
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}", **env)
    proc = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    return reports, proc.returncode, proc.stdout + proc.stderr


@pytest.mark.parametrize("reason", [BY_PLAN, BY_PLAN_CENSORED, BY_ADD_HOST, BY_PUBLISH, BY_SET_FACT],
                         ids=["plan", "plan-censored", "add_host", "rescue-publish", "set_fact"])
def test_a_batch_lost_mid_stage_still_ends_with_this_runs_report(tmp_path, reason):
    reports, rc, out = run_lost_batch(tmp_path, reason)
    # Ansible ended the playbook after the lost batch: no verify play.
    assert rc == 4 and "PLAY [Verify]" not in out, out[-3000:]
    assert "is not enabled" not in out
    fleet = json.loads((reports / "fleet.json").read_text())
    assert "not_current" not in fleet, out[-3000:]
    hosts = fleet["hosts"]
    assert hosts["gpu-a"]["result"] == "fail"
    assert hosts["gpu-a"]["reason"].startswith("unreachable in stage runtime: Apply the runtime knobs: "), hosts["gpu-a"]
    assert hosts["gpu-b"]["result"] == "fail" and hosts["gpu-b"]["reason"] == "failed in stage plan: gpu-b: GPU gate: 0 GPUs"
    # The earlier run's verification is not this run's.
    assert hosts["gpu-c"]["result"] == "not verified"
    assert hosts["gpu-c"]["reason"].startswith("the run ended before its verification: every host of a rollout batch"
                                               " was lost"), hosts["gpu-c"]
    text = (reports / "fleet.md").read_text()
    assert "3 hosts: 0 pass, 2 fail (gpu-a in stage runtime, gpu-b in stage plan), 1 not verified." in text
    assert "written after the playbook ended early" in out


def test_without_the_callback_the_run_warns_and_the_earlier_report_is_not_current(tmp_path):
    # A collection user's configuration, whose callbacks_enabled lacks ours.
    reports, rc, out = run_lost_batch(tmp_path, ANSIBLE_CALLBACKS_ENABLED="ansible.posix.timer")
    assert rc == 4 and "written after the playbook ended early" not in out, out[-3000:]
    assert "infertune.fleet.infertune_report is not enabled" in " ".join(out.split()), out[-3000:]
    assert json.loads((reports / "fleet.json").read_text())["not_current"]
