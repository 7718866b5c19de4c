"""roles/report/tasks/verify.yml, run by ansible-playbook on this machine: hosts that dropped
out of the run reach reports/fleet.json with the stage they reached, whether they were
drained or rebooted, and why (no host is verified here, so no check touches this machine)."""
import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]

# Three hosts leave a rollout early: gpu-a failed in its drain (the rescue kept the reason and
# ended the host), gpu-b was lost in its reboot after a drain (unreachable: it drops out of
# the run), and the rollout stopped before gpu-c's batch. The verify playbook then runs for the
# hosts that are left, as site.yml's does.
PLAY = """- name: Roll out
  hosts: gpu_nodes
  gather_facts: false
  tasks:
    - name: What the rollout recorded
      ansible.builtin.set_fact:
        infertune_reached: "{{ {'gpu-a': 'drain', 'gpu-b': 'reboot', 'gpu-c': 'plan'}[inventory_hostname] }}"
        infertune_check_mode: false
        infertune_results:
          drain: {changed: "{{ inventory_hostname == 'gpu-b' }}", applied: true, before: active, after: stopped}
          reboot: {changed: false, applied: false}
    - name: The rescue's reason
      ansible.builtin.set_fact:
        infertune_failure: "Stop unless the in-flight requests could be counted: cannot count"
      when: inventory_hostname == 'gpu-a'
    - name: The stopped rollout's reason
      ansible.builtin.set_fact:
        rollout_stopped: "the rollout stopped before this host's batch: canary host(s) gpu-a did not converge"
      when: inventory_hostname == 'gpu-c'
    - name: Lost
      ansible.builtin.fail:
        msg: dropped
      when: inventory_hostname == 'gpu-b'
    - name: The rescue ends its host
      ansible.builtin.meta: end_host
      when: inventory_hostname == 'gpu-a'

- name: Verify and report, as site.yml does
  ansible.builtin.import_playbook: %s
""" % (REPO / "playbooks" / "verify.yml")


def test_hosts_that_dropped_out_say_how_far_they_got_and_why(tmp_path):
    inventory = {"all": {"vars": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable},
                         "children": {"gpu_nodes": {"hosts": {"gpu-a": {}, "gpu-b": {}, "gpu-c": {}}}}}}
    (tmp_path / "inventory.yml").write_text(yaml.safe_dump(inventory))
    (tmp_path / "play.yml").write_text(PLAY)
    argv = [str(Path(sys.executable).parent / "ansible-playbook"), str(tmp_path / "play.yml"),
            "-i", str(tmp_path / "inventory.yml"), "-e", f"report_dir={tmp_path / 'reports'}",
            "-e", "report_enforce=false"]
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    proc = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    out = proc.stdout + proc.stderr
    assert "Verify every host" in out, out[-3000:]
    hosts = json.loads((tmp_path / "reports" / "fleet.json").read_text())["hosts"]
    assert hosts["gpu-a"]["result"] == "fail"
    assert hosts["gpu-a"]["rollout"] == {"stage": "drain", "drained": False, "rebooted": False}
    assert hosts["gpu-a"]["reason"] == "failed in stage drain: Stop unless the in-flight requests could be counted:" \
                                       " cannot count"
    assert hosts["gpu-b"]["rollout"] == {"stage": "reboot", "drained": True, "rebooted": False}
    # Out of the run without a reason of the rollout's (its rescue keeps one for any failure): lost.
    assert hosts["gpu-b"]["result"] == "fail"
    assert hosts["gpu-b"]["reason"] == "unreachable in stage reboot (the run's output names the task)"
    fleet_md = (tmp_path / "reports" / "fleet.md").read_text()
    assert "**gpu-b** (fail: unreachable in stage reboot" in fleet_md
    assert "3 hosts: 0 pass, 2 fail (gpu-a in stage drain, gpu-b in stage reboot), 1 not verified." in fleet_md
    # Left out, not failed: the host that stopped the rollout fails, after the report.
    assert hosts["gpu-c"]["result"] == "not verified"
    assert hosts["gpu-c"]["reason"] == "the rollout stopped before this host's batch: canary host(s) gpu-a did not converge"
    assert proc.returncode != 0
    said = " ".join(out.split())
    assert ("gpu-a: did not converge (stage drain): Stop unless the in-flight requests could be counted: cannot count"
            in said), out[-3000:]
    recap = {line.split()[0]: line for line in out.splitlines() if "failed=" in line}
    assert "failed=1" in recap["gpu-a"] and "failed=0" in recap["gpu-c"], out[-1500:]


def test_the_run_summary_reaches_ansible_runner_artifacts_under_the_awx_job_id(tmp_path):
    """set_stats (per_host false) is what AWX stores as the job's artifacts: ansible-runner's
    playbook_on_stats event carries it as artifact_data, keyed by the AWX job."""
    import ansible_runner

    inventory = {"all": {"vars": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable},
                         "children": {"gpu_nodes": {"hosts": {"gpu-a": {}, "gpu-b": {}, "gpu-c": {}}}}}}
    (tmp_path / "inventory.yml").write_text(yaml.safe_dump(inventory))
    (tmp_path / "play.yml").write_text(PLAY)
    env = {"ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    (tmp_path / "runner").mkdir()
    run = ansible_runner.run(private_data_dir=str(tmp_path / "runner"), playbook=str(tmp_path / "play.yml"),
                             inventory=str(tmp_path / "inventory.yml"), envvars=env, quiet=True,
                             extravars={"awx_job_id": 42, "report_dir": str(tmp_path / "reports"),
                                        "report_enforce": False})
    stats = [e for e in run.events if e["event"] == "playbook_on_stats"]
    assert len(stats) == 1, run.stdout.read()[-3000:]
    summary = stats[0]["event_data"]["artifact_data"]["infertune_summary_awx_42"]
    assert summary["verdicts"] == {"pass": 0, "fail": 2, "not_verified": 1}
    assert summary["failed"]["gpu-a"] == {"stage": "drain", "reason": "failed in stage drain: Stop unless the"
                                          " in-flight requests could be counted: cannot count"}
    assert summary["failed"]["gpu-b"]["stage"] == "reboot" and summary["drained"] == ["gpu-b"]
    assert summary["not_verified"] == {"gpu-c": "the rollout stopped before this host's batch: canary host(s) gpu-a"
                                                " did not converge"}
