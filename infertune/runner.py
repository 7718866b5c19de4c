"""Run one playbook through ansible-runner, feeding every event to a callback."""
from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import ansible_runner
from ansible.parsing.splitter import parse_kv


@dataclass
class Invocation:
    project_dir: Path
    playbook: str  # relative to project_dir, or a collection playbook's FQCN
    inventories: list = field(default_factory=list)
    limit: str | None = None
    check: bool = False
    diff: bool = False
    extra_vars: list = field(default_factory=list)  # "@FILE" each: see vars_files()
    vault_password_file: str | None = None
    verbosity: int = 0

    def options(self) -> list:
        """ansible-playbook options other than -i and --limit (ansible-runner adds those)."""
        opts = []
        for value in self.extra_vars:
            opts += ["-e", value]
        if self.vault_password_file:
            opts += ["--vault-password-file", self.vault_password_file]
        if self.check:
            opts.append("--check")
        if self.diff:
            opts.append("--diff")
        if self.verbosity:
            opts.append("-" + "v" * self.verbosity)
        return opts

    def selection(self) -> list:
        opts = []
        for inventory in self.inventories:
            opts += ["-i", inventory]
        if self.limit:
            opts += ["--limit", self.limit]
        return opts


def absolute(value: str, prefix: str = "") -> str:
    """Make a path given on our command line absolute: ansible runs in project_dir, not here.

    Values that are not existing paths (a "host1,host2," inventory, key=value vars) pass as is.
    """
    path = Path(value.removeprefix(prefix))
    return prefix + str(path.resolve()) if value.startswith(prefix) and path.exists() else value


class UsageError(Exception):
    """A command-line value ansible-playbook would refuse; the message says which."""


def _vars_file_text(value: str) -> str:
    """One inline -e value as the text of an equivalent vars file, parsed as ansible-playbook would."""
    if value[:1] in ("/", "."):
        raise UsageError(f"-e {value}: prepend a vars file's name with @")
    if value[:1] in ("[", "{"):
        return value  # YAML or JSON reads the same from a file
    return json.dumps(parse_kv(value))  # key=value pairs: strings


@contextmanager
def vars_files(extra_vars: list):
    """Yield the -e values as "@FILE" each; inline values go to files removed on exit.

    A secret in `-e sglang_api_key=...` would otherwise sit on ansible-playbook's command
    line, readable by every user of the control node (ps, /proc/PID/cmdline). The files are
    0600 in a private (0700) temporary directory, one per value, in order, so later values
    still override earlier ones.
    """
    with tempfile.TemporaryDirectory(prefix="infertune-vars-") as tmp:
        files = []
        for n, value in enumerate(extra_vars):
            if value.startswith("@"):
                files.append(value)
                continue
            path = os.path.join(tmp, f"extra-vars-{n}.yml")
            with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as handle:
                handle.write(_vars_file_text(value))
            files.append("@" + path)
        yield files


def child_env() -> dict:
    """PATH for ansible: the bin dir of the venv we run from first, so its ansible-playbook runs.
    (The report callback is the collection's, infertune.fleet.infertune_report: ansible-runner's
    own ANSIBLE_CALLBACK_PLUGINS does not hide it.)"""
    bindir = Path(sys.executable).parent
    path = os.environ.get("PATH", os.defpath)
    if (bindir / "ansible-playbook").exists():
        path = f"{bindir}{os.pathsep}{path}"
    return {"PATH": path}


HOSTS_HEADER = re.compile(r"^\s+hosts \(\d+\):$")


def list_hosts(inv: Invocation) -> list | None:
    """Hosts the playbook will target (all plays), from ansible-playbook --list-hosts.

    None when ansible cannot list them (syntax error, bad inventory): the real run reports why.
    """
    env = {**os.environ, **child_env()}
    exe = shutil.which("ansible-playbook", path=env["PATH"])
    if exe is None:
        return None
    proc = subprocess.run([exe, inv.playbook, "--list-hosts", *inv.selection(), *inv.options()],
                          cwd=inv.project_dir, env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        return None
    hosts, in_hosts = [], False
    for line in proc.stdout.splitlines():
        if HOSTS_HEADER.match(line):
            in_hosts = True
        elif in_hosts and line.strip():
            hosts.append(line.strip())
        else:
            in_hosts = False
    return sorted(set(hosts))


@dataclass
class Outcome:
    status: str  # ansible-runner's: successful, failed, timeout, canceled
    rc: int
    output: str  # ansible's own stdout, for runs that die before any host result
    artifact_dir: str | None  # kept only when the caller asked for it


def run(inv: Invocation, on_event, artifacts: str | None = None) -> Outcome:
    """Run the playbook; on_event(event) is called for every event as it happens."""
    with tempfile.TemporaryDirectory(prefix="infertune-runner-") as tmp:
        private = artifacts or tmp
        os.makedirs(private, exist_ok=True)
        result = ansible_runner.run(
            private_data_dir=private,
            project_dir=str(inv.project_dir),
            playbook=inv.playbook,
            inventory=inv.inventories or None,  # None: ansible.cfg's default inventory
            limit=inv.limit,
            cmdline=shlex.join(inv.options()),
            envvars={**child_env(), "ANSIBLE_NOCOLOR": "1"},  # plain text in the kept output
            suppress_env_files=True,  # no copies of extra vars left on disk
            quiet=True,
            event_handler=lambda event: on_event(event) or True,
        )
        output = Path(result.config.artifact_dir, "stdout").read_text(errors="replace")
        return Outcome(result.status, result.rc, output, result.config.artifact_dir if artifacts else None)
