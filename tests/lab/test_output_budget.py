"""What a run prints fits a job log: a no-op run on the converged lab prints at most BUDGET bytes
per host at -v, and as much under the minimal callback (which prints every task's whole result,
as AWX stores it in a job event), and no task's arguments or result carry the boot-time tool's
or its library's source.
"""
import os
import subprocess

import pytest

from helpers import BIN, ROOT, recap

pytestmark = pytest.mark.lab

BUDGET = 20_000
LIBRARY = ROOT / "plugins" / "module_utils" / "infertune_node"
TOOL = ROOT / "roles" / "tuning_persistence" / "files" / "infertune-apply"


def source_marks():
    """A line of each file the boot-time oneshot installs (its first def), as the output would show it."""
    marks = {}
    for path in [TOOL, *sorted(LIBRARY.glob("*.py"))]:
        defs = [line.strip() for line in path.read_text().splitlines() if line.startswith("def ")]
        if defs:
            marks[path.name] = defs[0]
    return marks


def run(hosts, *args, env=None):
    proc = subprocess.run([str(BIN / "ansible-playbook"), "site.yml", "--limit", ",".join(hosts), *args], cwd=ROOT,
                          env={**os.environ, **(env or {})}, capture_output=True, text=True, check=False)
    return proc.returncode, proc.stdout + proc.stderr


@pytest.fixture(scope="module")
def converged(lab):
    # Two hosts: a run's output common to every host (the plan's table header, the run_once
    # tasks, the recap's frame) then weighs more per host than on a bigger fleet.
    hosts = lab.healthy_hosts()[:2]
    rc, out = run(hosts)
    assert rc == 0, out[-6000:]
    return hosts


@pytest.mark.parametrize("how", ["-v", "minimal"])
def test_a_no_op_run_prints_little_per_host_and_no_source(converged, how):
    env = {"ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.minimal"} if how == "minimal" else None
    rc, out = run(converged, *(["-v"] if how == "-v" else []), env=env)
    assert rc == 0, out[-6000:]
    if how == "-v":  # the minimal callback prints no recap
        assert all(r["changed"] == 0 for r in recap(out).values()) and sorted(recap(out)) == converged
    per_host = len(out.encode()) / len(converged)
    assert per_host <= BUDGET, f"{per_host:.0f} bytes per host ({len(out.encode())} for {len(converged)} hosts)"
    shown = [name for name, mark in source_marks().items() if mark in out]
    assert shown == [], f"the output carries the source of {shown}"
