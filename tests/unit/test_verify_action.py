"""plugins/action/infertune_verify.py: what it hands infertune.verify per host, and what it
reads back from the fleet report for the assert that fails hosts."""
import importlib.util
import os
from pathlib import Path

SPEC = importlib.util.spec_from_file_location(
    "infertune_verify_action", Path(__file__).resolve().parents[2] / "plugins" / "action" / "infertune_verify.py")
action = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(action)

OPTIONS = {"expected": ["pcie_max_read_request", "kernel_release"], "connection": ["ansible_host", "ansible_user"],
           "secrets": ["ansible_password"]}


def test_a_tuned_host_is_verified_against_its_own_values():
    facts = {"pcie_max_read_request": 2048, "ansible_host": "10.0.0.7", "ansible_user": "ops",
             "infertune_reached": "verify",
             "infertune_results": {"drain": {"changed": True, "applied": True}, "reboot": {"changed": True,
                                                                                          "applied": False}}}
    got = action.entry("gpu-1", facts, ["gpu-1"], OPTIONS, False)
    assert got["verify"] is True
    assert got["expected"] == {"pcie_max_read_request": 2048}
    assert got["connection"] == {"ansible_host": "10.0.0.7", "ansible_user": "ops"}
    assert got["address"] == "10.0.0.7"
    # Applied and changed: drained; a reboot only planned (check mode) is not one.
    assert got["rollout"] == {"stage": "verify", "drained": True, "rebooted": False, "failure": "", "stopped": "",
                              "lost": False}


def test_failed_stopped_and_absent_hosts_are_not_verified():
    assert action.entry("a", {"infertune_failure": "gate"}, ["a"], OPTIONS, False)["verify"] is False
    assert action.entry("b", {"rollout_stopped": "limit"}, ["b"], OPTIONS, False)["verify"] is False
    # Not in the play any more (unreachable): reported, not verified; stage defaults to plan.
    lost = action.entry("c", {}, ["a"], OPTIONS, True)
    assert lost["verify"] is False and lost["rollout"]["stage"] == "plan" and lost["check_mode"] is True
    assert lost["rollout"]["lost"] is True
    # A host the rollout ended or left out has its reason: not lost.
    assert action.entry("e", {"infertune_failure": "gate"}, [], OPTIONS, False)["rollout"]["lost"] is False


def test_a_host_with_a_password_hands_over_no_connection():
    facts = {"ansible_host": "h", "ansible_password": "hidden"}
    got = action.entry("d", facts, ["d"], OPTIONS, False)
    assert got["connection"] is None
    assert "hidden" not in repr(got)


def test_outcome_lists_the_checks_that_failed_or_broke_and_their_knobs():
    report = {"result": "fail", "failing": ["pcie_mrrs", "cpufreq"], "knobs": {
        "pcie_mrrs": {"checks": {"pcie_mrrs": {"status": "fail", "detail": "512 on 0000:01:00.0"}}},
        "cpufreq": {"checks": {"cpufreq_governor": {"status": "pass", "detail": ""},
                               "cpufreq_epp": {"status": "error", "detail": "unreadable"}}}}}
    assert action.outcome(report) == {"result": "fail", "off": ["512 on 0000:01:00.0", "unreadable"],
                                      "failing": ["pcie_mrrs", "cpufreq"]}
    assert action.outcome({"result": "not verified"}) == {"result": "not verified", "off": [], "failing": []}


def test_the_verification_reads_the_configuration_and_inventory_of_the_run():
    env = action.child_env({"ansible_inventory_sources": ["/inv/a", "/inv/b"], "ansible_config_file": "/proj/ansible.cfg"},
                           {"PATH": "/usr/bin", "HOME": "/root"})
    # testinfra runs in the collection: without ANSIBLE_CONFIG it would read no configuration, or
    # the ansible.cfg of the directory it runs in instead of the run's.
    assert (env["ANSIBLE_CONFIG"], env["ANSIBLE_INVENTORY"], env["HOME"]) == ("/proj/ansible.cfg", "/inv/a,/inv/b", "/root")
    assert env["PATH"].endswith(os.pathsep + "/usr/bin")
    assert "ANSIBLE_CONFIG" not in action.child_env({"ansible_config_file": None}, {"PATH": "/usr/bin"})


def outcomes(**results):
    return {host: {"result": result, "off": [f"{host}: EPP: expected performance, found powersave"]
                   if result == "fail" else [], "failing": []} for host, result in results.items()}


def test_the_hosts_to_fail_are_named_with_their_reason_in_play_order():
    views = {"a": {"infertune_failure": "Stop: cannot count", "infertune_reached": "drain"}, "b": {},
             "c": {"rollout_stopped": "stopped"}, "d": {}, "e": {}}
    run = {h: {} for h in views}
    found = action.failures(run, views, ["e", "a", "b", "c"], True, "reports", outcomes(a="fail", b="pass", c="not verified",
                                                                                   d="fail", e="fail"))
    # e: knobs off; a: ended by the rollout, with its stage; b passed; c was left out by the stopped
    # rollout; d is out of the play (failed or unreachable earlier: Ansible already failed it).
    assert found == {"e": "e: EPP: expected performance, found powersave; fleet report: reports/fleet.md",
                     "a": "a: did not converge (stage drain): Stop: cannot count; fleet report: reports/fleet.md"}
    assert list(found) == ["e", "a"]
    # Under --check (enforce false) a host whose knobs are off is reported, not failed.
    assert action.failures(run, views, ["e", "a"], False, "reports", outcomes(a="fail", e="fail")) == {
        "a": "a: did not converge (stage drain): Stop: cannot count; fleet report: reports/fleet.md"}
    # A host that reached no stage failed in its plan.
    assert action.failures({"f": {}}, {"f": {"infertune_failure": "GPU gate"}}, ["f"], True, "r",
                           outcomes(f="fail"))["f"].startswith("f: did not converge (stage plan): GPU gate")


def test_a_verified_host_reached_the_verify_stage():
    # No task records the stage on each host: the verification is where it got to.
    assert action.entry("g", {"infertune_reached": "sglang"}, ["g"], OPTIONS, False)["rollout"]["stage"] == "verify"
    assert action.entry("h", {"infertune_reached": "drain", "infertune_failure": "x"}, ["h"], OPTIONS,
                        False)["rollout"]["stage"] == "drain"


class View:
    """A host's variables as the action's Resolved sees them: templates rendered on the way out."""

    def __init__(self, variables):
        self.variables = variables

    def render(self, value):
        if isinstance(value, str) and value.startswith("{{ ") and value.endswith(" }}"):
            name, _, test = value[3:-3].partition(" | ")
            found = self.variables[name]
            return len(found) > 0 if test == "length > 0" else found
        return {k: self.render(v) for k, v in value.items()} if isinstance(value, dict) else value


def test_the_entries_whose_kind_verifies_itself_go_to_the_verification_rendered():
    catalog = [{"name": "sysfs", "module": "sysfs", "args": {"settings": "{{ sysctl_sysfs_settings }}"},
                "enabled": "{{ sysctl_sysfs_settings | length > 0 }}"},
               {"name": "sysctl", "module": "sysctl", "args": {"settings": "{{ sysctl_settings }}"}}]
    settings = [{"path": "/sys/kernel/mm/transparent_hugepage/enabled", "value": "never"}]
    got = action.judged(catalog, View({"sysctl_sysfs_settings": settings, "sysctl_settings": []}))
    assert got == {"sysfs": {"module": "sysfs", "args": {"settings": settings}}}
    assert action.judged(catalog, View({"sysctl_sysfs_settings": [], "sysctl_settings": []})) == {}


def test_a_host_ssh_cannot_reach_fails_once_with_sshs_reason():
    """Its checks fail alike, in a fixture (pytest's wrapper around our message) or a test: the
    reason to fail it says so once."""
    lost = "gpu-8: unreachable: ssh: connect to host 10.0.0.8 port 22: No route to host"
    report = {"result": "fail", "failing": ["sysctl", "cpufreq"], "knobs": {
        "sysctl": {"checks": {"sysctl": {"status": "fail", "detail": lost}}},
        "cpufreq": {"checks": {"cpufreq_governor": {"status": "error", "detail": f'failed on setup with "Failed: {lost}"'},
                               "cpufreq_epp": {"status": "error", "detail": 'failed on setup with "KeyError: 3"'}}}}}
    got = action.outcome(report)
    assert got["off"] == [lost, lost, 'failed on setup with "KeyError: 3"']
    assert action.failures({"gpu-8": {}}, {"gpu-8": {}}, ["gpu-8"], True, "r", {"gpu-8": got}) == {
        "gpu-8": f'{lost}; failed on setup with "KeyError: 3"; fleet report: r/fleet.md'}
