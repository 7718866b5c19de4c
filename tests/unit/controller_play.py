"""Run a playbook of controller-side tasks on an inventory of local hosts (no lab), as the plan's
checks run: the project's ansible.cfg, the default callback, the control node allowed."""
import os
import subprocess
import sys
import textwrap

from fakehost import REPO


def run(tmp_path, playbook, inventory, *extra):
    """(returncode, stdout + stderr) of ansible-playbook PLAYBOOK on INVENTORY (YAML texts)."""
    (tmp_path / "plan.yml").write_text(textwrap.dedent(playbook))
    (tmp_path / "hosts.yml").write_text(textwrap.dedent(inventory))
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_STDOUT_CALLBACK="default",
               ANSIBLE_NOCOLOR="1", ANSIBLE_PYTHON_INTERPRETER=sys.executable)
    proc = subprocess.run([str(REPO / ".venv" / "bin" / "ansible-playbook"), "-i", "hosts.yml", "plan.yml",
                           "-e", "infertune_allow_control_node=true", *extra],
                          capture_output=True, text=True, cwd=str(tmp_path), env=env, timeout=120)
    return proc.returncode, proc.stdout + proc.stderr
