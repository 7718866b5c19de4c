"""bench/fleet_timing.py's own arithmetic and its play_cpu callback (no lab: the callback is run
on a local playbook). No wall time is asserted; a play's CPU is compared with CPU time that a task
is made to burn (time.process_time, not the clock)."""
import json
import subprocess
import sys

from bench import fleet_timing

PLAN, BATCHES, VERIFY, FAIL_VERIFIED = (name for name, phase in fleet_timing.PHASES.items()
                                        if phase in ("plan", "batches", "verify"))


def test_every_play_of_the_verify_playbook_is_the_verification():
    # Its last play fails the hosts the verification named: verification time, not a phase of its own.
    assert fleet_timing.phase_of(FAIL_VERIFIED) == "verify" != fleet_timing.phase_of(PLAN)


def test_play_cpu_charges_each_play_up_to_the_next_mark():
    marks = [{"play": PLAN, "cpu": 1.5}, {"play": BATCHES, "cpu": 4.0}, {"play": BATCHES, "cpu": 4.5},
             {"play": VERIFY, "cpu": 5.25}, {"play": None, "cpu": 6.0}]
    startup, phases = fleet_timing.play_cpu(marks)
    assert startup == 1.5
    # Serial batches are plays of one name: they add up into their phase.
    assert phases == {"plan": 2.5, "batches": 1.25, "verify": 0.75}


def test_play_cpu_keeps_a_play_outside_the_phases_under_its_name():
    _, phases = fleet_timing.play_cpu([{"play": "Something else", "cpu": 0.5}, {"play": None, "cpu": 0.75}])
    assert phases == {"Something else": 0.25}


def test_per_host_divides_by_the_hosts_reached():
    assert fleet_timing.per_host({"plan": 6.4, "verify": 1.0}, 64) == {"plan": 0.1, "verify": 0.016}


def test_hosts_answered_counts_only_hosts_the_module_ran_on():
    output = """lab-gpu-01 | SUCCESS => {
    "ansible_facts": {"a": 1}
}
lab-gpu-02 | UNREACHABLE! => {
    "msg": "ssh: connect to host 10.77.213.12 port 22: Connection refused"
}
lab-gpu-03 | FAILED! => {
    "msg": "lab-gpu-09 | SUCCESS inside a message is no host line"
}
lab-gpu-04 | CHANGED => {
}
"""
    assert fleet_timing.hosts_answered(output) == ["lab-gpu-01", "lab-gpu-04"]


def test_timing_env_adds_play_cpu_to_the_configured_callbacks(monkeypatch, tmp_path):
    monkeypatch.delenv("ANSIBLE_CALLBACKS_ENABLED", raising=False)
    env = fleet_timing.timing_env(tmp_path / "cpu.json")
    # The variable replaces ansible.cfg's list: the fleet report's callback must stay on.
    assert env["ANSIBLE_CALLBACKS_ENABLED"] == "infertune.fleet.infertune_report,play_cpu"
    assert env["ANSIBLE_CALLBACK_PLUGINS"] == str(fleet_timing.CALLBACK_DIR)
    assert env["INFERTUNE_BENCH_PLAY_CPU"] == str(tmp_path / "cpu.json")
    monkeypatch.setenv("ANSIBLE_CALLBACKS_ENABLED", "ansible.posix.profile_tasks")
    env = fleet_timing.timing_env(tmp_path / "cpu.json")
    assert env["ANSIBLE_CALLBACKS_ENABLED"] == "ansible.posix.profile_tasks,play_cpu"


def test_a_timed_run_takes_the_strategy_unless_told_not_to(monkeypatch, tmp_path):
    monkeypatch.setattr(fleet_timing, "STRATEGY_ENV", {"ANSIBLE_STRATEGY": "mitogen_linear",
                                                       "ANSIBLE_STRATEGY_PLUGINS": str(tmp_path)})
    monkeypatch.delenv("ANSIBLE_STRATEGY", raising=False)
    assert fleet_timing.timing_env(tmp_path / "cpu.json")["ANSIBLE_STRATEGY"] == "mitogen_linear"
    # The converge from fresh hosts runs under Ansible's own linear (docs/mitogen.md).
    assert "ANSIBLE_STRATEGY" not in fleet_timing.timing_env(tmp_path / "cpu.json", strategy=False)


BURN = "import time\nwhile time.process_time() < 1.0:\n    pass\n"


def test_play_cpu_callback_charges_a_workers_cpu_to_its_own_play(tmp_path):
    """The burning task is its play's last: its worker must be reaped (and counted) before the
    next play starts, not when that play forks its first worker."""
    playbook = tmp_path / "plays.yml"
    playbook.write_text(json.dumps([
        {"name": "burn", "hosts": "localhost", "gather_facts": False,
         "tasks": [{"ansible.builtin.command": {"argv": [sys.executable, "-c", BURN]}}]},
        {"name": "idle", "hosts": "localhost", "gather_facts": False,
         "tasks": [{"ansible.builtin.debug": {"msg": "idle"}}]},
    ]))
    cpu_file = tmp_path / "cpu.json"
    env = fleet_timing.timing_env(cpu_file)
    env.pop("ANSIBLE_STDOUT_CALLBACK")
    proc = subprocess.run([str(fleet_timing.BIN / "ansible-playbook"), "-i", "localhost,", "-c", "local",
                           "-e", f"ansible_python_interpreter={sys.executable}",
                           str(playbook)], cwd=fleet_timing.ROOT, env=env, capture_output=True, text=True,
                          check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    marks = json.loads(cpu_file.read_text())
    assert [m["play"] for m in marks] == ["burn", "idle", None]
    assert [m["cpu"] for m in marks] == sorted(m["cpu"] for m in marks)
    _, phases = fleet_timing.play_cpu(marks)
    assert phases["burn"] >= 1.0
    assert phases["idle"] < 1.0


def test_rounds_run_every_kind_once_per_round_in_order():
    calls = []
    kinds = {kind: (lambda kind=kind: calls.append(kind) or {"seconds": len(calls)}) for kind in ("setup", "noop", "drift")}
    results = fleet_timing.rounds(kinds, 3)
    # Interleaved: the baseline is timed beside the runs, not all before them.
    assert calls == ["setup", "noop", "drift"] * 3
    assert [r["seconds"] for r in results["drift"]] == [3, 6, 9]


def test_median_is_the_middle_run_by_seconds():
    runs = [{"seconds": 9.0, "n": 1}, {"seconds": 4.0, "n": 2}, {"seconds": 5.5, "n": 3}]
    assert fleet_timing.median(runs) == {"seconds": 5.5, "n": 3}


def test_merge_fleets_replaces_only_the_sizes_and_strategy_just_measured():
    kept = [{"hosts": 8, "x": "old"}, {"hosts": 32, "x": "old"}, {"hosts": 8, "strategy": "mitogen_linear", "x": "m"}]
    new = [{"hosts": 8, "strategy": "linear", "x": "new"}]
    assert fleet_timing.merge_fleets(kept, new) == [{"hosts": 32, "x": "old"},
                                                    {"hosts": 8, "strategy": "mitogen_linear", "x": "m"},
                                                    {"hosts": 8, "strategy": "linear", "x": "new"}]


def test_strategy_env_names_mitogens_plugins_or_says_how_to_install_it(tmp_path):
    assert fleet_timing.strategy_env("linear") == {}
    plugins = tmp_path / "ansible_mitogen" / "plugins" / "strategy"
    try:
        fleet_timing.strategy_env("mitogen_linear", tmp_path)
    except SystemExit as exc:
        assert "pip install --target" in str(exc)
    else:
        raise AssertionError("a missing Mitogen must stop the bench")
    plugins.mkdir(parents=True)
    (plugins / "mitogen_linear.py").write_text("")
    assert fleet_timing.strategy_env("mitogen_linear", tmp_path) == {
        "ANSIBLE_STRATEGY": "mitogen_linear", "ANSIBLE_STRATEGY_PLUGINS": str(plugins)}


def test_a_verify_run_reached_the_hosts_it_verified():
    """verify.yml runs no task per host: its stats list the run-once host alone."""
    verify = {"stats": {"h1": {"unreachable": 0}},
              "plays": [{"tasks": [{"hosts": {"h1": {"verified": ["h1", "h2", "h3"], "changed": False}}}]}]}
    assert fleet_timing.reached_hosts(verify) == 3
    plan = {"stats": {"h1": {"unreachable": 0}, "h2": {"unreachable": 1}}, "plays": [{"tasks": [{"hosts": {"h1": {}}}]}]}
    assert fleet_timing.reached_hosts(plan) == 1


def test_the_inventory_guard_play_counts_with_the_start_up():
    """Each playbook's first play, which targets no host of a healthy inventory, is no phase."""
    assert fleet_timing.GUARD not in fleet_timing.PHASES
    marks = [{"play": fleet_timing.GUARD, "cpu": 1.0}, {"play": PLAN, "cpu": 1.2}, {"play": None, "cpu": 3.0}]
    assert fleet_timing.play_cpu(marks) == (1.2, {"plan": 1.8})
