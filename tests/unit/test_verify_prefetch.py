"""tests/verify asks each host for every command its checks read in one ssh round (probes.py,
fleet.Fleet.prefetch): each ssh command costs the control node an ssh client, which a fleet
multiplies. A host whose round fails still gets each command on its own; one ssh cannot reach is
asked once, and named with ssh's reason."""
import json
import os
import shlex
import subprocess
import sys
from types import SimpleNamespace

import pytest

from fakehost import REPO
from infertune import specs
from verifycheck import load

# The suite's own modules (verifycheck puts tests/verify on the path).
from fleet import RUNNER, Fleet

# pytest on tests/verify in this process's interpreter, every command testinfra runs recorded.
RECORDING = """
import json, sys
import pytest
from testinfra.backend import base

calls = []
run_local = base.BaseBackend.run_local


def recorded(self, command, *args):
    calls.append(self.quote(command, *args))
    return run_local(self, command, *args)


base.BaseBackend.run_local = recorded
pytest.main(sys.argv[2:])
with open(sys.argv[1], "w") as out:
    json.dump(calls, out)
"""


def suite_commands(tmp_path, *selection):
    """Every command a run of tests/verify on this machine (local://) had testinfra run, with
    the roles' defaults as the expected values. Read-only here: the checks fail (no GPU)."""
    expected = tmp_path / "expected.json"
    expected.write_text(json.dumps({"this-host": specs.role_defaults()}))
    calls = tmp_path / "calls.json"
    env = dict(os.environ, INFERTUNE_VERIFY_EXPECTED=str(expected), PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")
    subprocess.run([sys.executable, "-c", RECORDING, str(calls), str(REPO / "tests" / "verify"), "-q",
                    "-p", "no:cacheprovider", "-p", "testinfra.plugin", "--hosts=local://", *selection],
                   cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False)
    return json.loads(calls.read_text())


def batched(commands):
    """The commands of each prefetch round among `commands` (python3 -c RUNNER JSON)."""
    rounds = []
    for command in commands:
        argv = shlex.split(command)
        if argv[:3] == ["python3", "-c", RUNNER]:
            rounds.append(json.loads(argv[3]))
    return rounds


def test_the_whole_suite_reads_a_host_in_one_command(tmp_path):
    commands = suite_commands(tmp_path)
    # The local backend names the host with `hostname`; every check's read is in the one round.
    assert len([c for c in commands if c != "hostname"]) == 1
    rounds = batched(commands)
    assert len(rounds) == 1 and len(rounds[0]) == 8
    reads = "\n".join(rounds[0])
    for read in ("nvidia-smi --query-gpu", "/proc/sys/kernel/numa_balancing", "nvidia-smi topo -p2p",
                 "systemctl show sglang.service", "cpufreq/scaling_governor", "/proc/cmdline",
                 "/sys/module/nvidia_uvm/parameters/uvm_disable_hmm"):
        assert read in reads


def test_a_selection_asks_only_for_what_its_tests_read(tmp_path):
    rounds = batched(suite_commands(tmp_path, "-k", "sysctl"))
    assert len(rounds) == 1 and len(rounds[0]) == 1 and "/proc/sys/kernel/numa_balancing" in rounds[0][0]


def test_the_runner_returns_each_command_s_status_and_bytes():
    commands = ["printf 'a\\377b'", "echo oops >&2; exit 3", "cat"]
    done = subprocess.run([sys.executable, "-c", RUNNER, json.dumps(commands)], capture_output=True, text=True,
                          check=True, timeout=60)
    answers = json.loads(done.stdout)
    assert [(rc, out.encode("latin-1"), err) for rc, out, err in answers] == [
        (0, b"a\xffb", ""), (3, b"", "oops\n"), (0, b"", "")]


class Backend:
    NAME = "fake"

    @staticmethod
    def quote(command, *args):
        return command % tuple(shlex.quote(a) for a in args) if args else command

    @staticmethod
    def encode(text):
        return text.encode()

    @staticmethod
    def result(rc, command, stdout, stderr):
        return SimpleNamespace(rc=rc, command=command, stdout=stdout.decode(), stderr=stderr.decode())


class Host:
    """Answers the prefetch round by running nothing: each command's answer names the host."""

    def __init__(self, name, round_fails=False, unreachable=False):
        self.name, self.round_fails, self.unreachable, self.backend, self.calls = name, round_fails, unreachable, Backend(), []

    def run(self, command, *args):
        self.calls.append(self.backend.quote(command, *args))
        if self.unreachable:
            # testinfra's ssh backend on ssh's exit status 255: the CommandResult as the exception.
            raise RuntimeError(SimpleNamespace(rc=255, stdout="", stderr="Warning: Permanently added 'lost'\r\n"
                                               "ssh: connect to host 10.0.0.8 port 22: No route to host\r\n"))
        if command == "python3 -c %s %s":
            if self.round_fails:  # no python3 on the host
                return SimpleNamespace(rc=127, stdout="", stderr="sh: 1: python3: not found")
            answers = [[0, f"{self.name}: {c}", ""] for c in json.loads(args[1])]
            return SimpleNamespace(rc=0, stdout=json.dumps(answers), stderr="")
        return SimpleNamespace(rc=0, stdout=f"{self.name} alone: {self.backend.quote(command, *args)}", stderr="")


PLAN = [("sh -c %s", ("cat /proc/cmdline",)), ("python3 -c %s", ("print(1)",))]


def test_prefetched_answers_are_kept_and_nothing_runs_again():
    one, two = Host("one"), Host("two")
    fleet = Fleet([one, two])
    fleet.prefetch({one: PLAN, two: PLAN})
    assert len(one.calls) == len(two.calls) == 1
    assert fleet.run(two, "sh -c %s", "cat /proc/cmdline").stdout == "two: sh -c 'cat /proc/cmdline'"
    assert fleet.run(one, "python3 -c %s", "print(1)").stdout == "one: python3 -c 'print(1)'"
    assert len(one.calls) == len(two.calls) == 1


def test_a_host_whose_round_fails_runs_each_command_alone():
    fine, lost = Host("fine"), Host("lost", round_fails=True)
    fleet = Fleet([fine, lost])
    fleet.prefetch({fine: PLAN, lost: PLAN})
    assert fleet.run(lost, "sh -c %s", "cat /proc/cmdline").stdout == "lost alone: sh -c 'cat /proc/cmdline'"
    # The host that answered in its round is not asked again.
    assert len(fine.calls) == 1 and len(lost.calls) == 2


def test_a_host_ssh_cannot_reach_is_asked_once_and_named_with_sshs_reason():
    """Every check of it fails naming the host and ssh's reason (not testinfra's CommandResult),
    and a command the other hosts answer alone never fails them for it."""
    fine, lost = Host("fine"), Host("lost", unreachable=True)
    fleet = Fleet([fine, lost], name=lambda host: host.name)
    fleet.prefetch({fine: PLAN, lost: PLAN})
    for _ in range(2):
        with pytest.raises(pytest.fail.Exception, match=r"^lost: unreachable: ssh: connect to host 10.0.0.8 port 22:"
                                                        r" No route to host$"):
            fleet.run(lost, "sh -c %s", "cat /proc/cmdline")
    assert len(lost.calls) == 1
    assert fleet.run(fine, "sh -c %s", "uname -r").stdout == "fine alone: sh -c 'uname -r'" and len(lost.calls) == 1


def test_a_round_the_control_node_cannot_start_falls_back_too():
    host = Host("big")

    def run(command, *args):
        if command == "python3 -c %s %s":
            raise OSError(7, "Argument list too long")
        return SimpleNamespace(rc=0, stdout="alone", stderr="")

    host.run = run
    fleet = Fleet([host])
    fleet.prefetch({host: PLAN})
    assert fleet.answers == {} and fleet.run(host, "sh -c %s", "cat /proc/cmdline").stdout == "alone"


def test_an_answer_that_does_not_parse_is_not_kept():
    host = Host("odd")
    host.run = lambda command, *args: SimpleNamespace(rc=0, stdout="Welcome to odd\n[]", stderr="")
    fleet = Fleet([host])
    fleet.prefetch({host: PLAN})
    assert fleet.answers == {}


@pytest.mark.parametrize("users, expected", [({"test_sysctl"}, 1), ({"basics", "cpu"}, 2), (set(), 0)])
def test_planned_takes_the_probes_of_the_selected_users(users, expected):
    from probes import planned

    # tests/verify's modules register their probes when imported.
    for module in ("conftest", "test_cpu_power", "test_nvidia", "test_pcie_fabric", "test_services", "test_sysctl"):
        load(module)
    assert len(planned(users, specs.role_defaults())) == expected


def test_a_probe_that_cannot_be_built_is_left_to_its_test():
    from probes import planned

    load("test_sysctl")
    assert planned({"test_sysctl"}, {"sysctl_file": "/etc/sysctl.d/x.conf"}) == []
