"""Every command the suite runs on a host, known before the first test runs.

Each fixture or test that reads a host registers its command here under its own name, as a
function of the host's expected values. Before the first test, the fleet runner asks each host
for the commands of the fixtures and tests the session selected, all in one ssh round
(fleet.Fleet.prefetch); the fixtures and tests then find their answers kept. One ssh command per
host instead of one per check: each costs the control node an ssh client (about 6 ms of CPU)
and the host an sshd session, which a fleet multiplies.
"""

SH = "sh -c %s"
# {fixture or test name: want -> (command, *args) as `run` takes them}
PROBES = {}


def probe(user, shell=True):
    """Register `builder(want)` as the command the fixture or test `user` runs: a shell command
    (its `sh`), or with shell=False the (command, *args) its `run` takes."""
    def register(builder):
        PROBES[user] = (lambda want: (SH, builder(want))) if shell else builder
        return builder
    return register


def planned(users, want):
    """The (command, args) of every registered probe whose user is among `users`, for a host
    with these expected values. A probe that cannot be built for them is left out: its test
    runs the command itself, and fails there with its own message."""
    commands = []
    for user, builder in PROBES.items():
        if user not in users:
            continue
        try:
            command, *args = builder(want)
        except (KeyError, TypeError, ValueError, AttributeError):
            continue
        if (command, tuple(args)) not in commands:
            commands.append((command, tuple(args)))
    return commands
