"""The pinned control-node tooling prints nothing but what it was asked: no Python warning on
every command (cryptography 51 deprecates DSA, which ansible-core 2.19's ssh-agent support
imports at start-up, so every ansible command printed a CryptographyDeprecationWarning into the
user's terminal, CI log and AWX job output); nor does `make lint` on a fresh checkout."""
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


def lint_commands():
    """`make lint`'s ansible-lint and syntax-check command lines, as make would run them."""
    proc = subprocess.run(["make", "-n", "lint"], cwd=REPO, capture_output=True, text=True, check=True)
    lines = [line for line in proc.stdout.splitlines() if "ansible-lint" in line or "--syntax-check" in line]
    assert len(lines) == 2, proc.stdout
    return lines


@pytest.mark.parametrize("which", ["ansible-lint", "syntax-check"])
def test_make_lint_warns_of_nothing_on_a_clean_tree(which):
    # A newcomer's shell, the virtual environment not on PATH. What warned before: ansible-lint,
    # "PATH altered" and the collection found twice (its installed copy beside the checkout);
    # the syntax check, before the lab's inventory existed, that inventory/lab could not be parsed
    # and that gpu_nodes matched no host.
    line = next(line for line in lint_commands() if which in line)
    path = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if os.path.realpath(p) != str(BIN))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS" and not k.startswith("ANSIBLE_")}
    proc = subprocess.run(["sh", "-c", line], cwd=REPO, capture_output=True, text=True, env=dict(env, PATH=path),
                          check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "WARNING" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr
