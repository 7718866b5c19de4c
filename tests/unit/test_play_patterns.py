"""A healthy run warns of nothing. The plays that act on a group the run fills as it goes
(infertune_pending: hosts with changes; infertune_verify_failed and infertune_drift_unread:
hosts to fail) find no such group on a converged, healthy fleet, and Ansible warns of a host
pattern naming a group that does not exist ("Could not match supplied host pattern") on every
such run. Run by ansible-playbook on this machine: --list-hosts resolves every play's hosts as a
run does, on an inventory where no host has joined those groups."""
import os
import subprocess
import sys

import pytest
import yaml

from fakehost import REPO

MISMATCH = "Could not match supplied host pattern"
# Each playbook and the plays of it that target a group the run fills.
# Each playbook's first play, on the control node, targets a host only when gpu_nodes has none.
GUARD = "Stop when the inventory has no host in gpu_nodes"
FILLED = {"site.yml": [GUARD, "Roll out the hosts with pending changes, canary first, then in batches",
                       "Fail each host that did not converge or whose knobs are off"],
          "drift.yml": [GUARD, "Fail each host of the run that could not be read"]}


def list_hosts(tmp_path, playbook):
    inventory = {"all": {"vars": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable},
                         "children": {"gpu_nodes": {"hosts": {"gpu-01": {}, "gpu-02": {}}}}}}
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump(inventory))
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    return subprocess.run([str(REPO / ".venv" / "bin" / "ansible-playbook"), "-i", str(tmp_path / "hosts.yml"),
                           str(REPO / "playbooks" / playbook), "--list-hosts"],
                          capture_output=True, text=True, cwd=str(REPO), env=env, timeout=120)


def hosts_by_play(stdout):
    """{play name: number of hosts} from ansible-playbook --list-hosts."""
    counts, play = {}, None
    for line in stdout.splitlines():
        line = line.strip()
        if line.startswith("play #"):
            play = line.split("): ", 1)[1].split("\t", 1)[0]
        elif line.startswith("hosts (") and play:
            counts[play] = int(line[len("hosts ("):line.index(")")])
    return counts


@pytest.mark.parametrize("playbook", sorted(FILLED))
def test_a_run_that_fills_no_group_warns_of_no_host_pattern(tmp_path, playbook):
    proc = list_hosts(tmp_path, playbook)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert MISMATCH not in proc.stdout + proc.stderr
    # Those plays target no host, the others every host of gpu_nodes.
    counts = hosts_by_play(proc.stdout)
    assert counts == {play: 0 if play in FILLED[playbook] else 2 for play in counts}, proc.stdout
    assert set(FILLED[playbook]) < set(counts), proc.stdout
