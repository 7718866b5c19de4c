"""infertune rollout | verify | drift: run the collection's site, verify or drift playbook for
scripts, CI and schedules.

Live progress on stderr, a per-host table on stdout. rollout and verify: optionally a JSON
summary; the exit status is non-zero when any host failed, was unreachable or was left out by a
rollout that stopped, or ansible itself failed. drift: exit status as Terraform's
-detailed-exitcode, 0 no drift, 2 drift on at least one host, 1 an error (bad input, a host
unreachable or failing its read, ansible itself failed).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from . import COLLECTION, FQCN, drift, runner
from .progress import Progress
from .summary import RunSummary

# The collection's playbooks/<name>.yml per command.
PLAYBOOKS = {
    "rollout": ("site", "converge the hosts (tuning, reboots, sglang), then verify them"),
    "verify": ("verify", "check the hosts without changing them"),
    "drift": ("drift", "read every host, change none, publish the drift; exit 0 no drift, 2 drift, 1 error"),
}
COLUMNS = (("host", "HOST"), ("result", "RESULT"), ("stage", "STAGE"), ("drained", "DRAINED"),
           ("reboots", "REBOOTS"), ("knobs_changed", "KNOBS CHANGED"), ("failure_reason", "FAILURE REASON"))
DRIFT_COLUMNS = (("host", "HOST"), ("checked", "READ"), ("pending", "PENDING KNOBS"), ("reboot_pending", "REBOOT"),
                 ("last_read", "LAST READ"), ("error", "ERROR"))
# The drift playbook's writer: its result carries the run's exit status and hosts.
DRIFT_ACTION = "infertune.fleet.infertune_drift"
OUTPUT_TAIL_LINES = 40


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="infertune", description=__doc__.partition("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    for name, (_playbook, help_text) in PLAYBOOKS.items():
        sub = commands.add_parser(name, help=help_text, description=help_text)
        sub.add_argument("-i", "--inventory", action="append", default=[],
                         help="inventory path or host list; repeatable (default: ansible.cfg's)")
        sub.add_argument("-l", "--limit", help="host pattern, as ansible-playbook --limit")
        sub.add_argument("-e", "--extra-vars", action="append", default=[],
                         help="KEY=VALUE, JSON or @FILE; repeatable; reaches ansible-playbook as a private "
                              "file, never on its command line")
        sub.add_argument("--vault-password-file", metavar="FILE",
                         help="decrypt Ansible Vault files (e.g. the inventory's vault.yml) with this password")
        sub.add_argument("-v", "--verbose", action="count", default=0,
                         help="ansible-playbook's verbosity (-v to -vvvv), in the kept output (--artifacts)")
        sub.add_argument("--artifacts", metavar="DIR",
                         help="keep ansible-runner's data (full output, events) in DIR")
        if name == "drift":
            sub.add_argument("--verify", action="store_true",
                             help="run the verification (tests/verify) after the read too")
            sub.add_argument("--textfile-dir", metavar="DIR",
                             help="node_exporter's textfile directory for infertune_drift.prom; '' writes none "
                                  f"(default: report_drift_textfile_dir, {drift.TEXTFILE_DIR})")
            continue
        sub.add_argument("-C", "--check", action="store_true", help="change nothing, report what would change")
        sub.add_argument("-D", "--diff", action="store_true", help="show file and setting differences")
        sub.add_argument("--json", metavar="FILE", help="write the summary as JSON to FILE")
    return parser.parse_args(argv)


def _cell(value) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list):
        return ", ".join(value) or "-"
    return "-" if value in (None, "") else str(value)


def table(rows, columns=COLUMNS) -> str:
    cells = [[title for _key, title in columns]]
    cells += [[_cell(row[key]) for key, _title in columns] for row in rows]
    widths = [max(len(line[i]) for line in cells) for i in range(len(columns))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(line, widths)).rstrip() for line in cells)


def totals_line(totals: dict) -> str:
    return ", ".join(f"{value} {key.replace('_', ' ')}" for key, value in totals.items())


def locate(name: str, root: Path) -> tuple[Path, str]:
    """Where ansible-playbook runs, and the playbook it is given, for playbooks/<name>.yml of the
    collection at root.

    A source tree (the checkout) runs in itself, by path, under its own ansible.cfg (the lab's
    inventory, the collection link). An installed collection (MANIFEST.json) runs by FQCN in the
    current directory, as `ansible-playbook infertune.fleet.<name>` would: the user's ansible.cfg,
    reports/ there.
    """
    if not (root / "playbooks" / f"{name}.yml").is_file():
        raise runner.UsageError(f"playbooks/{name}.yml not found in {root}, nor a collection {FQCN} on Ansible's "
                                f"collections path: install it (ansible-galaxy collection install "
                                f"infertune-fleet-VERSION.tar.gz)")
    if (root / "MANIFEST.json").is_file():
        return Path.cwd(), f"{FQCN}.{name}"
    return root, f"playbooks/{name}.yml"


def run(inv: runner.Invocation, args, watch=None):
    """Run the playbook with live progress, every event to watch(event) too when given; return
    (RunSummary, runner.Outcome)."""
    summary = RunSummary(runner.list_hosts(inv) or ())
    progress = Progress(sys.stderr, f"infertune {args.command}")

    def on_event(event):
        summary.handle(event)
        if watch:
            watch(event)
        if summary.play:  # nothing to say before the first play starts
            progress.update(summary.position, summary.status_line())

    try:
        outcome = runner.run(inv, on_event, artifacts=args.artifacts and str(Path(args.artifacts).resolve()))
    finally:
        progress.close()
    return summary, outcome


def drift_vars(args) -> list:
    """The drift command's options given, as extra variables after the user's (the options win)."""
    chosen = {"report_drift_verify": True} if args.verify else {}
    if args.textfile_dir is not None:
        # Relative to where the command runs, not to the collection ansible runs in.
        chosen["report_drift_textfile_dir"] = args.textfile_dir and str(Path(args.textfile_dir).resolve())
    return [json.dumps(chosen)] if chosen else []


def drift_main(args, root: Path) -> int:
    """infertune drift: the exit status is the drift writer's (0, 2, or 1 for a host not read),
    1 when the run ended without it (bad input, ansible failed, a file could not be written)."""
    written = {}

    def watch(event):
        data = event.get("event_data") or {}
        action = data.get("resolved_action") or data.get("task_action")
        if action == DRIFT_ACTION and event.get("event") in ("runner_on_ok", "runner_on_failed"):
            written.update(data.get("res") or {})

    try:
        with runner.vars_files([runner.absolute(e, "@") for e in args.extra_vars] + drift_vars(args)) as extra_vars:
            project_dir, playbook = locate(PLAYBOOKS["drift"][0], root)
            inv = runner.Invocation(
                project_dir=project_dir, playbook=playbook,
                inventories=[runner.absolute(i) for i in args.inventory], limit=args.limit,
                extra_vars=extra_vars, verbosity=args.verbose,
                vault_password_file=args.vault_password_file and runner.absolute(args.vault_password_file))
            _summary, outcome = run(inv, args, watch)
    except runner.UsageError as err:
        print(f"infertune: {err}", file=sys.stderr)
        return drift.ERROR
    if outcome.artifact_dir:
        print(f"ansible output: {Path(outcome.artifact_dir, 'stdout')}", file=sys.stderr)
    if "exit_status" not in written:
        # No drift published: bad input, an unwritable file, or ansible stopped; show why.
        reason = written.get("msg") or "\n".join(outcome.output.splitlines()[-OUTPUT_TAIL_LINES:])
        print(f"infertune drift: nothing published:\n{reason}", file=sys.stderr)
        return drift.ERROR
    print(table([{"host": host, **entry} for host, entry in written["hosts"].items()], DRIFT_COLUMNS))
    print("\nwritten: " + ", ".join(written["written"]))
    return written["exit_status"]


def main(argv=None, root: Path = COLLECTION) -> int:
    args = parse_args(argv)
    if args.command == "drift":
        return drift_main(args, root)
    try:
        with runner.vars_files([runner.absolute(e, "@") for e in args.extra_vars]) as extra_vars:
            project_dir, playbook = locate(PLAYBOOKS[args.command][0], root)
            inv = runner.Invocation(
                project_dir=project_dir, playbook=playbook,
                inventories=[runner.absolute(i) for i in args.inventory], limit=args.limit,
                check=args.check, diff=args.diff, extra_vars=extra_vars, verbosity=args.verbose,
                vault_password_file=args.vault_password_file and runner.absolute(args.vault_password_file))
            summary, outcome = run(inv, args)
    except runner.UsageError as err:
        print(f"infertune: {err}", file=sys.stderr)
        return 2

    rows, totals = summary.hosts(), summary.totals()
    if outcome.rc and not summary.any_failed:
        # Ansible stopped without blaming a host (syntax error, bad inventory): show its words.
        sys.stderr.write("\n".join(outcome.output.splitlines()[-OUTPUT_TAIL_LINES:]) + "\n")
    print(table(rows))
    print(f"\n{totals_line(totals)}")
    if outcome.artifact_dir:
        print(f"ansible output: {Path(outcome.artifact_dir, 'stdout')}", file=sys.stderr)

    exit_status = outcome.rc or (2 if summary.any_failed else 0)
    if args.json:
        report = {
            "command": args.command, "playbook": playbook, "check": args.check,
            "status": outcome.status, "rc": outcome.rc, "exit_status": exit_status,
            "totals": totals, "hosts": rows,
        }
        path = Path(args.json)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(report, indent=2) + "\n")
    return exit_status
