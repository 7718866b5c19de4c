"""The pinned control-node tooling prints nothing but what it was asked: no Python warning on
every command (cryptography 51 deprecates DSA, which ansible-core 2.19's ssh-agent support
imports at start-up, so every ansible command printed a CryptographyDeprecationWarning into the
user's terminal, CI log and AWX job output)."""
import os
import subprocess

import pytest

from fakehost import REPO

BIN = REPO / ".venv" / "bin"


@pytest.mark.parametrize("command", [["ansible", "--version"], ["ansible-playbook", "--version"]])
def test_an_ansible_command_prints_no_python_warning(command):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS"}
    proc = subprocess.run([str(BIN / command[0]), *command[1:]], capture_output=True, text=True, env=env, check=True)
    assert "Warning" not in proc.stderr, proc.stderr
    assert proc.stdout.startswith(command[0])
