"""Run each verification command on every host of the session at once.

Each command is an ssh round trip, and an ssh client on the control node that a fleet
multiplies. Before the first test, prefetch asks every host, in parallel, for all the commands
the session's tests will run there (probes.py), in one ssh round: a small Python runner on the
host runs each and returns its exit status and output. What was not prefetched (a host whose round failed, a command no
probe announced) runs when a test first asks: the same command on every host still waiting for
it, in parallel. The suite only reads, so an answer is kept for the session: a command two tests
need (the PCI config-space probe) runs once per host.

A host ssh cannot reach (testinfra raises RuntimeError with the CommandResult when ssh exits 255)
is asked once: every check of it fails naming the host and ssh's own reason, and no other host's
check fails for it.
"""
import json
from concurrent.futures import ThreadPoolExecutor

import pytest

# Run on the host as `python3 -c RUNNER COMMANDS`: each command through /bin/sh, as ssh runs one;
# stdout and stderr as latin-1 text so that any bytes survive the JSON.
RUNNER = (
    "import json, subprocess, sys\n"
    "answers = []\n"
    "for command in json.loads(sys.argv[1]):\n"
    "    done = subprocess.run(command, shell=True, stdin=subprocess.DEVNULL, capture_output=True)\n"
    "    answers.append([done.returncode, done.stdout.decode('latin-1'), done.stderr.decode('latin-1')])\n"
    "print(json.dumps(answers))\n")


def in_parallel(work, items):
    with ThreadPoolExecutor(max_workers=max(1, min(32, len(items)))) as pool:
        return list(pool.map(work, items))


def ssh_reason(exc):
    """ssh's last line of error output from testinfra's RuntimeError(CommandResult)."""
    result = exc.args[0] if exc.args else None
    try:
        text = result.stderr if hasattr(result, "stderr") else str(exc)
    except UnicodeDecodeError:
        text = str(exc)
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    return lines[-1] if lines else "ssh exited 255"


class Fleet:
    def __init__(self, hosts, name=str):
        self.hosts = list(hosts)
        self.answers = {}
        self.name = name  # the host's name in failure messages
        self.lost = {}  # {host: ssh's reason}: not reached, not asked again

    def attempt(self, host, command, *args):
        """host.run, or None for a host ssh could not reach (kept in lost)."""
        if host in self.lost:
            return None
        try:
            return host.run(command, *args)
        except RuntimeError as exc:
            self.lost.setdefault(host, ssh_reason(exc))
            return None

    def prefetch(self, plans):
        """plans: {host: [(command, args)]}. Each host answers all of its commands in one ssh
        round; the answers are kept as `run` keeps them. A host whose round fails (no python3, a
        lost connection, an answer that does not parse) keeps none: its tests run each command."""
        def ask(host):
            commands = plans[host]
            try:
                result = self.attempt(host, "python3 -c %s %s", RUNNER,
                                      json.dumps([host.backend.quote(command, *args) for command, args in commands]))
                answers = json.loads(result.stdout) if result is not None and result.rc == 0 else None
            except (ValueError, OSError):  # OSError: an argument list past the OS's limit
                answers = None
            return host, commands, answers

        for host, commands, answers in in_parallel(ask, [host for host in plans if plans[host]]):
            if not isinstance(answers, list) or len(answers) != len(commands):
                continue
            for (command, args), (rc, out, err) in zip(commands, answers):
                quoted = host.backend.encode(host.backend.quote(command, *args))
                self.answers.setdefault((command, args), {})[host] = host.backend.result(
                    rc, quoted, out.encode("latin-1"), err.encode("latin-1"))

    def run(self, host, command, *args):
        """host.run(command, *args), answered from one parallel round over the fleet, once."""
        waiting = self.answers.setdefault((command, args), {})
        if host not in waiting and host not in self.lost:
            others = [h for h in self.hosts if h is not host and h not in waiting and h not in self.lost] \
                if host in self.hosts else []
            asked = [host] + others
            answers = zip(asked, in_parallel(lambda h: self.attempt(h, command, *args), asked))
            waiting.update((h, answer) for h, answer in answers if answer is not None)
        if host not in waiting:
            pytest.fail(f"{self.named(host)}: unreachable: {self.lost[host]}", pytrace=False)
        return waiting[host]

    def named(self, host):
        try:
            return self.name(host)
        except RuntimeError:  # a name asked of the host itself
            return host.backend.get_pytest_id()
