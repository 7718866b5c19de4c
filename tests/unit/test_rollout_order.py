"""playbooks/rollout.yml's rollout play takes its batches in inventory order, whatever order the
hosts joined infertune_pending in: the plan's action publishes each host's group as its answer
arrives, and the canary is the first batch. Run by ansible-playbook on this machine, with the
rollout play's own host pattern."""
import os
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
HOSTS = ["gpu-01", "gpu-02", "gpu-03", "gpu-04"]

# The hosts join the group last first, gpu-03 not at all (converged), then the rollout play's
# pattern in batches of one.
PLAY = """- name: Join in the reverse order
  hosts: gpu_nodes
  gather_facts: false
  tasks:
    - name: Join infertune_pending
      ansible.builtin.add_host:
        name: "{{{{ item }}}}"
        groups: infertune_pending
      loop: "{{{{ ansible_play_hosts | reverse | reject('eq', 'gpu-03') }}}}"
      run_once: true

- name: Roll out
  hosts: "{pattern}"
  gather_facts: false
  serial: 1
  tasks:
    - name: Say the batch
      ansible.builtin.debug:
        msg: "BATCH {{{{ ansible_play_batch | join(',') }}}}"
"""


def rollout_pattern():
    plays = yaml.safe_load((REPO / "playbooks" / "rollout.yml").read_text())
    return next(p["hosts"] for p in plays if p["name"].startswith("Roll out"))


def test_the_rollout_batches_follow_the_inventory_not_the_order_hosts_joined(tmp_path):
    inventory = {"all": {"vars": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable},
                         "children": {"gpu_nodes": {"hosts": {h: {} for h in HOSTS}}}}}
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump(inventory))
    (tmp_path / "play.yml").write_text(PLAY.format(pattern=rollout_pattern()))
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_STDOUT_CALLBACK="default",
               ANSIBLE_NOCOLOR="1")
    proc = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", "hosts.yml", "play.yml"],
                          capture_output=True, text=True, cwd=str(tmp_path), env=env, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    batches = [line.split("BATCH ", 1)[1].strip().strip('"') for line in proc.stdout.splitlines() if "BATCH " in line]
    assert batches == ["gpu-01", "gpu-02", "gpu-04"], proc.stdout
