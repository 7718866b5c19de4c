"""The infertune CLI runner: event folding on synthetic streams, then real ansible-runner runs.

Synthetic events copy the shape ansible-runner's display callback sends (event, event_data
with play_uuid, task, resolved_action, host, res); the end-to-end tests run ansible-runner on
tests/unit/fixtures/runner (three local hosts, serial 2, node-c fails).
"""
import io
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import yaml

import infertune
from infertune import cli, runner
from infertune.progress import Progress
from infertune.summary import RunSummary

FIXTURE = Path(__file__).parent / "fixtures" / "runner"
PLAY = "0242ac11-0001-aaaa-bbbb-000000000004"


def play_start(name="Tune", uuid=PLAY):
    return {"event": "playbook_on_play_start", "event_data": {"name": name, "play": name, "play_uuid": uuid}}


def task_start(task):
    return {"event": "playbook_on_task_start", "event_data": {"task": task}}


def result(outcome, host, task="t", action="ansible.builtin.command", changed=False, **extra):
    res = {"changed": changed, **extra.pop("res", {})}
    data = {"host": host, "task": task, "task_action": action, "resolved_action": action, "res": res, **extra}
    return {"event": f"runner_on_{outcome}", "event_data": data}


def stats(**counts):
    return {"event": "playbook_on_stats", "event_data": counts}


def fold(events, expected=()):
    summary = RunSummary(expected)
    for event in events:
        summary.handle(event)
    return summary


def by_host(summary):
    return {row["host"]: row for row in summary.hosts()}


# --- event folding -------------------------------------------------------------------

def test_serial_batches_count_and_finished_hosts_progress():
    summary = fold([play_start(), task_start("Set governor"),
                    result("ok", "a"), result("ok", "b"),
                    play_start(uuid=PLAY + "_1"), task_start("Set governor")],
                   expected=["a", "b", "c", "d"])
    assert summary.batch == 2
    assert summary.status_line() == "Tune | batch 2 | hosts 2/4 done | Set governor"


def test_a_new_play_restarts_batches_and_keeps_failed_hosts_finished():
    summary = fold([play_start(), result("failed", "a"), result("ok", "b"),
                    play_start("Deploy", uuid="0242ac11-0001-aaaa-bbbb-000000000099")],
                   expected=["a", "b"])
    assert (summary.play, summary.batch) == ("Deploy", 1)
    assert summary.status_line() == "Deploy | batch 1 | hosts 1/2 done"


def item(host, action, changed):
    return {"event": "runner_item_on_ok", "event_data": {"host": host, "resolved_action": action,
                                                          "res": {"changed": changed}}}


def test_knobs_and_reboots_count_only_changed_results_of_tuning_modules():
    summary = fold([
        # One knob loop: two of its three items changed; the loop's own result repeats them.
        item("a", "infertune.fleet.knob", True), item("a", "infertune.fleet.knob", True),
        item("a", "infertune.fleet.knob", False), item("a", "knob", True),  # a bare name is not ours
        result("ok", "a", action="infertune.fleet.knob", changed=True, res={"results": [{"changed": True}] * 2}),
        result("ok", "a", action="ansible.builtin.apt", changed=True),
        result("ok", "a", action="ansible.builtin.template", changed=True),
        result("ok", "a", action="ansible.builtin.reboot", changed=True),
        result("skipped", "a", action="ansible.builtin.reboot"),
        item("b", "infertune.fleet.knob", False),
        result("ok", "b", action="infertune.fleet.knob", changed=False, res={"results": [{"changed": False}]}),
    ])
    rows = by_host(summary)
    assert (rows["a"]["knobs_changed"], rows["a"]["reboots"], rows["a"]["result"]) == (3, 1, "changed")
    assert (rows["b"]["knobs_changed"], rows["b"]["reboots"], rows["b"]["result"]) == (0, 0, "ok")
    assert summary.totals()["knobs_changed"] == 3


def test_failure_reason_is_task_name_and_first_line_of_message():
    summary = fold([result("failed", "a", task="Set MaxReadReq",
                           res={"msg": "kernel lockdown refuses config writes\ndetail"})])
    assert by_host(summary)["a"]["failure_reason"] == "Set MaxReadReq: kernel lockdown refuses config writes"
    assert summary.any_failed


def test_failed_loop_names_the_failed_item_message():
    res = {"msg": "One or more items failed",
           "results": [{"failed": False, "msg": "fine"}, {"failed": True, "msg": "cpu7: EBUSY"}]}
    summary = fold([result("failed", "a", task="Set EPP", res=res)])
    assert by_host(summary)["a"]["failure_reason"] == "Set EPP: cpu7: EBUSY"


def test_ignored_failure_does_not_fail_the_host():
    summary = fold([result("failed", "a", ignore_errors=True, res={"msg": "tolerated"})])
    assert by_host(summary)["a"]["result"] == "ok"
    assert not summary.any_failed


def test_unreachable_host_reports_connection_message():
    summary = fold([result("unreachable", "a", task="Read facts",
                           res={"msg": "Failed to connect to the host via ssh: timed out"})])
    row = by_host(summary)["a"]
    assert row["result"] == "unreachable"
    assert row["failure_reason"] == "Read facts: Failed to connect to the host via ssh: timed out"


def test_recap_overrides_events_for_a_rescued_failure():
    summary = fold([result("failed", "a", res={"msg": "first try"}),
                    result("ok", "a", changed=True),
                    stats(processed={"a": 1}, ok={"a": 2}, changed={"a": 1}, failures={}, dark={},
                          rescued={"a": 1})])
    assert by_host(summary)["a"] == {"host": "a", "result": "changed", "stage": "plan", "drained": False,
                                     "reboots": 0, "knobs_changed": 0, "failure_reason": ""}
    assert not summary.any_failed


def test_hosts_never_reached_are_not_run():
    summary = fold([play_start(), result("failed", "a"),
                    stats(processed={"a": 1}, failures={"a": 1})], expected=["a", "b"])
    assert by_host(summary)["b"]["result"] == "not run"
    assert summary.totals() == {"hosts": 2, "ok": 0, "changed": 0, "failed": 1, "unreachable": 0,
                                "stopped": 0, "not_run": 1, "reboots": 0, "knobs_changed": 0}


def fact(host, **facts):
    return result("ok", host, task="Record", action="ansible.builtin.set_fact", res={"ansible_facts": facts})


def record(host, **values):
    """A publication into the run's record (infertune_publish answers as add_host does)."""
    return result("ok", host, task="Record", action="infertune.fleet.infertune_publish",
                  res={"changed": False, "add_host": {"host_name": host, "groups": [], "host_vars": values}})


def drained(host, applied=True):
    return record(host, infertune_results={"drain": {"changed": True, "applied": applied, "after": "stopped"}})


def published(groups):
    """The plan's answer for each host (its action publishes it as add_host does): the host's record
    as host variables, and the group it joins ({host: group}, none for a host the plan stopped)."""
    return [result("ok", host, task="Read every knob, gate the GPUs, find sglang and decide what the host needs",
                   action="infertune.fleet.infertune_host_plan",
                   res={"changed": False, "add_host": {"host_name": host, "groups": [group] if group else [],
                                                       "host_vars": {"infertune_check_mode": False}}})
            for host, group in groups.items()]


def test_a_host_lost_in_its_reboot_names_the_stage_and_that_it_was_drained():
    summary = fold([play_start("Plan"), *published({"a": "infertune_pending", "b": "infertune_pending"}),
                    play_start("Roll out", uuid="0242ac11-0001-aaaa-bbbb-000000000077"),
                    record("a", infertune_reached="boot config"), record("a", infertune_reached="drain"), drained("a"),
                    record("a", infertune_reached="reboot"),
                    result("unreachable", "a", task="Reboot the host into the target kernel and command line",
                           action="ansible.builtin.reboot", res={"msg": "Timed out waiting for the host\nmore"}),
                    record("b", infertune_reached="boot config"), record("b", infertune_reached="drain"),
                    result("failed", "b", task="Stop unless the in-flight requests could be counted",
                           res={"msg": "host b: cannot count sglang's in-flight requests"}),
                    stats(processed={"a": 1, "b": 1}, dark={"a": 1}, failures={"b": 1})])
    rows = by_host(summary)
    assert rows["a"] == {"host": "a", "result": "unreachable", "stage": "reboot", "drained": True, "reboots": 0,
                         "knobs_changed": 0, "failure_reason": "Reboot the host into the target kernel and command"
                                                               " line: Timed out waiting for the host"}
    assert (rows["b"]["result"], rows["b"]["stage"], rows["b"]["drained"]) == ("failed", "drain", False)
    assert rows["b"]["failure_reason"].endswith("cannot count sglang's in-flight requests")


def test_a_stage_set_as_a_fact_still_counts():
    """Facts (a set_fact's) and host variables (infertune_publish's) are read alike."""
    summary = fold([fact("a", infertune_reached="runtime"), fact("a", infertune_results={"drain": {"changed": True,
                                                                                              "applied": True}})])
    assert (by_host(summary)["a"]["stage"], by_host(summary)["a"]["drained"]) == ("runtime", True)


def test_a_check_run_never_counts_a_drain():
    summary = fold([record("a", infertune_reached="drain"), drained("a", applied=False)])
    assert by_host(summary)["a"]["drained"] is False


def test_a_pending_host_the_rollout_stopped_before_did_not_converge():
    summary = fold([play_start("Plan"), *published({"a": "infertune_pending", "b": "infertune_pending",
                               "c": "infertune_converged"}),
                    play_start("Roll out", uuid="0242ac11-0001-aaaa-bbbb-000000000077"),
                    record("a", infertune_reached="sglang"), fact("a", rollout_converged=True),
                    record("a", infertune_reached="verify"), record("c", infertune_reached="verify"),
                    stats(processed={"a": 1, "b": 1, "c": 1}, ok={"a": 5, "b": 2, "c": 2}, failures={}, dark={})])
    rows = by_host(summary)
    assert (rows["a"]["result"], rows["a"]["stage"]) == ("ok", "verify")
    assert (rows["c"]["result"], rows["c"]["stage"]) == ("ok", "verify")
    assert rows["b"] == {"host": "b", "result": "stopped", "stage": "plan", "drained": False, "reboots": 0,
                         "knobs_changed": 0, "failure_reason": "the rollout stopped before this host's batch"}
    assert summary.any_failed and summary.totals()["stopped"] == 1


def test_a_pending_host_is_known_from_the_rollouts_decision_when_the_plans_answers_are_censored():
    """Below -vvv the plan's answers reach ansible-runner censored (its record is as large as the
    host); the rollout's decision, once per batch, names the hosts the plan sent into it."""
    censored = {"changed": False, "censored": "the output has been hidden due to the fact that 'no_log: true' was"
                                              " specified for this result"}
    plan = [result("ok", host, task="Read every knob", action="infertune.fleet.infertune_host_plan", res=censored)
            for host in ("a", "b", "c")]
    decision = result("ok", "a", task="Decide whether the rollout goes on", action="infertune.fleet.infertune_rollout",
                      res={"stop": "", "left_out": [], "pending": ["a", "b"]})
    summary = fold([play_start("Plan"), *plan, play_start("Roll out", uuid="0242ac11-0001-aaaa-bbbb-000000000077"),
                    decision, record("a", infertune_reached="sglang"), fact("a", rollout_converged=True),
                    stats(processed={"a": 1, "b": 1, "c": 1}, ok={"a": 5, "b": 2, "c": 2}, failures={}, dark={})])
    rows = by_host(summary)
    assert (rows["a"]["result"], rows["b"]["result"], rows["c"]["result"]) == ("ok", "stopped", "ok")


def test_the_table_names_stage_and_drain():
    rows = [{"host": "a", "result": "unreachable", "stage": "reboot", "drained": True, "reboots": 0,
             "knobs_changed": 2, "failure_reason": "Reboot: timed out"}]
    assert cli.table(rows).splitlines() == [
        "HOST  RESULT       STAGE   DRAINED  REBOOTS  KNOBS CHANGED  FAILURE REASON",
        "a     unreachable  reboot  yes      0        2              Reboot: timed out"]


# --- progress output -------------------------------------------------------------------

class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_progress_in_a_log_writes_one_line_per_position_change():
    log = io.StringIO()
    progress = Progress(log, "infertune rollout")
    progress.update(("Tune", 1, "A"), "Tune | batch 1 | hosts 0/2 done | A")
    progress.update(("Tune", 1, "A"), "Tune | batch 1 | hosts 1/2 done | A")
    progress.update(("Tune", 2, "A"), "Tune | batch 2 | hosts 1/2 done | A")
    progress.close()
    assert log.getvalue().splitlines() == ["infertune rollout: Tune | batch 1 | hosts 0/2 done | A",
                                           "infertune rollout: Tune | batch 2 | hosts 1/2 done | A"]


def test_progress_on_a_terminal_redraws_one_line():
    term = Terminal()
    progress = Progress(term, "p")
    progress.update(1, "one")
    progress.update(1, "two")
    progress.close()
    assert term.getvalue() == "\r\x1b[Kp: one\r\x1b[Kp: two\n"


# --- ansible invocation ----------------------------------------------------------------

def test_options_pass_check_diff_vault_and_extra_vars_through():
    inv = runner.Invocation(FIXTURE, "site.yml", inventories=["/inv"], limit="node-a", check=True, diff=True,
                            extra_vars=["@/tmp/x/extra-vars-0.yml", "@/vars.yml"], vault_password_file="/pw",
                            verbosity=3)
    assert inv.options() == ["-e", "@/tmp/x/extra-vars-0.yml", "-e", "@/vars.yml", "--vault-password-file", "/pw",
                             "--check", "--diff", "-vvv"]
    assert inv.selection() == ["-i", "/inv", "--limit", "node-a"]


def test_inline_extra_vars_become_private_files_removed_afterwards():
    values = ["a=1 b='two words'", '{"nested": {"x": [1, 2]}}', "@/vars.yml", "a=3"]
    with runner.vars_files(values) as files:
        assert files[2] == "@/vars.yml"
        paths = [Path(f[1:]) for f in files if f != "@/vars.yml"]
        assert stat.S_IMODE(paths[0].parent.stat().st_mode) == 0o700
        assert {stat.S_IMODE(p.stat().st_mode) for p in paths} == {0o600}
        assert {p.parent for p in paths} == {paths[0].parent}
        assert [yaml.safe_load(p.read_text()) for p in paths] == [
            {"a": "1", "b": "two words"}, {"nested": {"x": [1, 2]}}, {"a": "3"}]
    assert not paths[0].parent.exists()


def test_an_inline_path_without_at_is_refused_as_ansible_does(capsys):
    assert cli.main(["rollout", "-e", "./vars.yml"], root=FIXTURE) == 2
    assert "prepend" in capsys.readouterr().err


def test_relative_paths_become_absolute_and_other_values_pass(monkeypatch):
    monkeypatch.chdir(FIXTURE)
    assert runner.absolute("inventory.yml") == str(FIXTURE.resolve() / "inventory.yml")
    assert runner.absolute("@inventory.yml", "@") == "@" + str(FIXTURE.resolve() / "inventory.yml")
    assert runner.absolute("node-a,node-b,") == "node-a,node-b,"
    assert runner.absolute("knob_dir=x", "@") == "knob_dir=x"


def test_child_path_starts_with_the_bin_dir_of_our_python_when_it_has_ansible(tmp_path, monkeypatch):
    (tmp_path / "ansible-playbook").touch()
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    monkeypatch.setenv("PATH", "/usr/bin")
    assert runner.child_env()["PATH"] == f"{tmp_path}{os.pathsep}/usr/bin"
    (tmp_path / "ansible-playbook").unlink()
    assert runner.child_env()["PATH"] == "/usr/bin"


def test_list_hosts_asks_ansible_and_honours_limit():
    inv = runner.Invocation(FIXTURE, "playbooks/site.yml", inventories=[str(FIXTURE / "inventory.yml")])
    assert runner.list_hosts(inv) == ["node-a", "node-b", "node-c"]
    inv.limit = "node-a,node-c"
    assert runner.list_hosts(inv) == ["node-a", "node-c"]


# --- end to end through ansible-runner ---------------------------------------------------

def rollout(tmp_path, *extra, command="rollout"):
    out = tmp_path / "summary.json"
    status = cli.main([command, "-i", str(FIXTURE / "inventory.yml"), "-e", f"knob_dir={tmp_path}",
                       "--json", str(out), *extra], root=FIXTURE)
    return status, json.loads(out.read_text())


def test_rollout_with_a_failed_host_exits_non_zero_and_names_it(tmp_path, capsys):
    status, summary = rollout(tmp_path)
    out, err = capsys.readouterr()
    assert status != 0
    failed_row = next(line for line in out.splitlines() if line.startswith("node-c"))
    assert failed_row.split()[1] == "failed"
    assert "Check the host: simulated fault on node-c" in failed_row
    assert "second line" not in out
    assert summary["totals"] == {"hosts": 3, "ok": 0, "changed": 2, "failed": 1, "unreachable": 0,
                                 "stopped": 0, "not_run": 0, "reboots": 0, "knobs_changed": 3}
    assert summary["exit_status"] == status
    assert "infertune rollout: Roll out in batches | batch 2 | hosts 2/3 done | Check the host\n" in err
    assert sorted(p.name for p in tmp_path.glob("node-*.conf")) == ["node-a.conf", "node-b.conf", "node-c.conf"]


def test_secret_extra_vars_never_reach_a_command_line(tmp_path, monkeypatch, capsys):
    canary = "hunter2-canary"
    calls = []
    real_run = subprocess.run

    def spy(argv, *args, **kwargs):
        calls.append(list(argv))
        return real_run(argv, *args, **kwargs)

    monkeypatch.setattr(subprocess, "run", spy)
    status, _ = rollout(tmp_path, "-e", f"sglang_api_key={canary}", "--limit", "node-a",
                        "--artifacts", str(tmp_path / "artifacts"))
    assert status == 0 and (tmp_path / "node-a.conf").exists()  # knob_dir arrived through a file
    list_hosts = next(argv for argv in calls if "--list-hosts" in argv)
    (command,) = tmp_path.glob("artifacts/artifacts/*/command")
    playbook_argv = json.loads(command.read_text())["command"]
    for argv in (list_hosts, playbook_argv):
        assert not any(canary in arg or "knob_dir" in arg for arg in argv)
        vars_files = [arg[1:] for arg in argv if arg.startswith("@")]
        assert len(vars_files) == 2 and not any(Path(f).exists() for f in vars_files)


def test_rollout_of_healthy_hosts_exits_zero(tmp_path, capsys):
    status, summary = rollout(tmp_path, "--limit", "node-a,node-b")
    assert status == 0
    assert summary["totals"]["hosts"] == 2
    assert {row["result"] for row in summary["hosts"]} == {"changed"}


def test_check_mode_reaches_ansible_and_changes_nothing(tmp_path, capsys):
    status, summary = rollout(tmp_path, "--check", "--limit", "node-a")
    assert (status, summary["check"], summary["totals"]["knobs_changed"]) == (0, True, 1)
    assert not list(tmp_path.glob("node-*.conf"))


def test_verify_runs_the_verify_playbook(tmp_path, capsys):
    status, summary = rollout(tmp_path, command="verify")
    assert (status, summary["playbook"], summary["totals"]["ok"]) == (0, "playbooks/verify.yml", 3)


def test_ansible_errors_without_a_host_to_blame_are_shown_and_fail(tmp_path, capsys):
    missing = tmp_path / "missing.yml"
    status = cli.main(["rollout", "-i", str(FIXTURE / "inventory.yml"), "-e", f"@{missing}"], root=FIXTURE)
    assert status != 0
    assert str(missing) in capsys.readouterr().err


def test_missing_playbook_is_an_error(tmp_path, capsys):
    assert cli.main(["verify"], root=tmp_path) == 2
    err = capsys.readouterr().err
    assert "playbooks/verify.yml not found" in err and "ansible-galaxy collection install" in err


# --- an installed collection, from a pip-installed console script -------------------------

def installed_collection(base):
    """The fixture's playbooks as an installed infertune.fleet under base (MANIFEST.json, the
    checkout's plugins): what `ansible-galaxy collection install` leaves."""
    root = base / "ansible_collections" / "infertune" / "fleet"
    (root / "playbooks").mkdir(parents=True)
    (root / "MANIFEST.json").write_text(json.dumps({"collection_info": {"namespace": "infertune", "name": "fleet"}}))
    (root / "plugins").symlink_to(Path(__file__).resolve().parents[2] / "plugins")
    (root / "playbooks" / "site.yml").write_text((FIXTURE / "playbooks" / "site.yml").read_text())
    # Reports default to reports/ under the directory the command runs in, as the report role's do.
    (root / "playbooks" / "verify.yml").write_text("""- name: Verify the fleet
  hosts: fleet
  gather_facts: false
  tasks:
    - name: The run's current directory is the user's
      ansible.builtin.assert:
        that: "'reports' | ansible.builtin.realpath == expected_reports"
""")
    return root


def test_a_package_outside_the_collection_finds_it_on_the_collections_path(tmp_path):
    site_packages = tmp_path / "site-packages"
    site_packages.mkdir()
    assert infertune.find_collection(site_packages, search=[tmp_path / "none"]) is None
    root = installed_collection(tmp_path / "collections")
    assert infertune.find_collection(site_packages, search=[tmp_path / "none", tmp_path / "collections"]) == root
    # The package inside a collection (a checkout, an installed one) belongs to that one.
    assert infertune.find_collection(root, search=[]) == root


def test_the_checkout_runs_in_itself_and_an_installed_collection_by_fqcn_here(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert cli.locate("site", FIXTURE) == (FIXTURE, "playbooks/site.yml")
    root = installed_collection(tmp_path / "collections")
    assert cli.locate("verify", root) == (tmp_path, "infertune.fleet.verify")


def test_an_installed_collection_runs_from_an_empty_directory(tmp_path, monkeypatch, capsys):
    root = installed_collection(tmp_path / "collections")
    monkeypatch.setenv("ANSIBLE_COLLECTIONS_PATH", str(tmp_path / "collections"))
    work = tmp_path / "empty"
    work.mkdir()
    monkeypatch.chdir(work)
    status = cli.main(["verify", "-i", str(FIXTURE / "inventory.yml"), "-e", f"expected_reports={work / 'reports'}",
                       "--json", "summary.json"], root=root)
    summary = json.loads((work / "summary.json").read_text())
    assert (status, summary["playbook"], summary["totals"]["ok"]) == (0, "infertune.fleet.verify", 3), capsys.readouterr()


def test_every_stage_the_playbooks_record_is_one_the_summary_knows():
    from infertune.summary import STAGES
    recorded = set()
    for path in (Path(__file__).resolve().parents[2] / "roles").glob("*/tasks/*.yml"):
        for task in yaml.safe_load(path.read_text()) or []:
            for block in [task] + task.get("block", []) + task.get("rescue", []):
                value = (block.get("infertune.fleet.infertune_publish") or {}).get("reached")
                if value:
                    recorded.add(value)
    # "plan" is what a host reached before any mark; "verify" is the verification's answer (verified).
    assert recorded == set(STAGES) - {"plan", "verify"}


def test_the_hosts_the_verification_verified_reached_the_verify_stage():
    """The verification (one task for the fleet) answers which hosts it verified: no task per host
    records the stage any more. A host it did not verify keeps the stage it reached."""
    summary = fold([play_start("Plan"), *published({"a": None, "b": None}),
                    record("b", infertune_reached="drain"),
                    play_start("Verify", uuid="0242ac11-0001-aaaa-bbbb-000000000099"),
                    result("ok", "a", task="Verify every host and write the fleet report",
                           action="infertune.fleet.infertune_verify", res={"verified": ["a"], "fail": {}})])
    rows = by_host(summary)
    assert (rows["a"]["stage"], rows["b"]["stage"]) == ("verify", "drain")
