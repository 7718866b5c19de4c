"""plugins/action/infertune_rollout.py: the rollout's decision before each serial batch
(failures so far, canary, limit, stop reason, hosts left out)."""
import importlib.util
from pathlib import Path

import pytest

SPEC = importlib.util.spec_from_file_location(
    "infertune_rollout_action", Path(__file__).resolve().parents[2] / "plugins" / "action" / "infertune_rollout.py")
action = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(action)

FLEET = [f"gpu-{n:02}" for n in range(1, 9)]


def decide(batch, converged=(), planned=FLEET, hosts=FLEET, play_hosts=None, canary=1, max_failures="25%"):
    play_hosts = [h for h in hosts if h in planned] if play_hosts is None else play_hosts
    return action.decide(hosts, planned, play_hosts, batch, converged, canary, max_failures)


@pytest.mark.parametrize("spec, hosts, allowed", [
    ("25%", 8, 2), ("25%", 5, 1), ("10%", 5, 0), ("12.5%", 8, 1), ("29%", 100, 29), ("100%", 3, 3),
    ("0%", 300, 0), ("0", 8, 0), (3, 8, 3), ("3", 8, 3), (" 50 % ", 3, 1)])
def test_failure_limit_rounds_a_percentage_down_exactly(spec, hosts, allowed):
    assert action.failure_limit(spec, hosts) == allowed


def test_a_host_that_failed_its_plan_is_a_failure_never_the_canary():
    # gpu-03 failed its plan (an H100 whose backend cannot run NVFP4): the canary is the first
    # host that passed its plan, and one failure of 8 is within 25 %.
    planned = [h for h in FLEET if h != "gpu-03"]
    first = decide(["gpu-01"], planned=planned)
    assert first["canary"] == ["gpu-01"] and first["failures"] == ["gpu-03"] and first["stop"] == ""
    later = decide(["gpu-04", "gpu-05"], converged=["gpu-01", "gpu-02"], planned=planned)
    assert later["stop"] == "" and later["left_out"] == []


def test_a_failed_canary_stops_before_every_other_host():
    got = decide(["gpu-02", "gpu-03"])
    assert got["stop"] == "canary host(s) gpu-01 did not converge"
    assert got["left_out"] == FLEET[1:]
    assert got["msg"] == "rollout stopped before " + ", ".join(FLEET[1:]) + ": canary host(s) gpu-01 did not converge"


def test_the_stop_names_every_host_it_leaves_out_not_only_the_next_batch():
    # Batches 1, 2, 2, 3: two of the second batch lost; the stop before the third batch leaves
    # out the third and the fourth.
    got = decide(["gpu-04", "gpu-05"], converged=["gpu-01"], max_failures=1)
    assert got["failures"] == ["gpu-02", "gpu-03"]
    assert got["stop"] == ("2 host(s) failed (gpu-02, gpu-03), more than rollout_max_failures allows (1 of 8)")
    assert got["left_out"] == ["gpu-04", "gpu-05", "gpu-06", "gpu-07", "gpu-08"]


def test_failures_at_the_limit_go_on():
    got = decide(["gpu-06"], converged=["gpu-01", "gpu-02", "gpu-03"], max_failures="25%")
    assert got["failures"] == ["gpu-04", "gpu-05"] and got["limit"] == 2 and got["stop"] == ""


def test_plan_failures_alone_can_stop_before_the_canary():
    planned = ["gpu-01", "gpu-02", "gpu-03", "gpu-04", "gpu-05"]
    got = decide(["gpu-01"], planned=planned)
    assert got["failures"] == ["gpu-06", "gpu-07", "gpu-08"]
    assert got["stop"].startswith("3 host(s) failed (gpu-06, gpu-07, gpu-08)")
    assert got["left_out"] == planned


def test_canary_one_of_one():
    got = decide(["gpu-01"], hosts=["gpu-01"])
    assert got == {"failures": [], "canary": ["gpu-01"], "limit": 0, "stop": "", "left_out": [],
                   "msg": "0 failure(s) so far, 0 allowed; batch: gpu-01"}


def test_every_host_failing_its_plan_leaves_no_rollout():
    got = decide([], planned=[])
    assert got["failures"] == FLEET and got["canary"] == [] and got["left_out"] == []


def test_only_the_hosts_within_limit_count():
    # --limit gpu-05,gpu-06,gpu-07,gpu-08: the others are neither failures nor the denominator.
    hosts = FLEET[4:]
    got = decide(["gpu-06"], converged=["gpu-05"], hosts=hosts, planned=hosts, max_failures="25%")
    assert got["failures"] == [] and got["limit"] == 1 and got["canary"] == ["gpu-05"]
    lost = decide(["gpu-06"], hosts=hosts, planned=hosts)
    assert lost["stop"] == "canary host(s) gpu-05 did not converge" and lost["left_out"] == FLEET[5:]


def test_a_larger_canary_and_a_converged_host_between_them():
    # gpu-02 converged in the plan (nothing pending): not in the rollout, never a canary.
    play = [h for h in FLEET if h != "gpu-02"]
    got = decide(["gpu-04"], converged=["gpu-01"], play_hosts=play, canary=2)
    assert got["canary"] == ["gpu-01", "gpu-03"]
    assert got["stop"] == "canary host(s) gpu-03 did not converge"


class FakeTask:
    def __init__(self, args):
        self.args = args


def test_the_action_reads_the_converged_marks_of_earlier_batches_only(monkeypatch):
    class HostVars(dict):
        def __getitem__(self, host):
            assert host in ("gpu-01", "gpu-02"), f"read {host}'s variables"
            return dict.__getitem__(self, host)
    monkeypatch.setattr(action.ActionBase, "run", lambda self, tmp=None, task_vars=None: {})
    plugin = action.ActionModule.__new__(action.ActionModule)
    plugin._task = FakeTask({"hosts": FLEET[:4], "planned": FLEET[:4], "canary_count": "1", "max_failures": "0"})
    hostvars = HostVars({"gpu-01": {"rollout_converged": True}, "gpu-02": {}})
    got = plugin.run(task_vars={"hostvars": hostvars, "ansible_play_hosts_all": FLEET[:4],
                                "ansible_play_batch": ["gpu-03", "gpu-04"]})
    # "failed" would fail the task: the failed hosts are "failures".
    assert got["changed"] is False and "failed" not in got and got["failures"] == ["gpu-02"]
    assert got["stop"].startswith("1 host(s) failed (gpu-02)") and got["left_out"] == ["gpu-03", "gpu-04"]
    # The rollout play's hosts: those the plan sent into the rollout (the runner's summary reads them).
    assert got["pending"] == FLEET[:4]
