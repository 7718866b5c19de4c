"""The plan's line per pending knob: what differs, the differing elements first and never cut."""
from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node import differs
from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node.cpufreq import apply_policy
from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node.cpuidle import apply_states
from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node.gate import Gate
from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node.knobs import predict
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

from fakehost import REPO, write

CPU = "/sys/devices/system/cpu/"


def test_one_cpu_of_128_whose_epp_drifted_is_named(amd128):
    for n in range(128):
        write(amd128, CPU + "cpu%d/cpufreq/scaling_governor" % n, "performance\n")
        write(amd128, CPU + "cpu%d/cpufreq/energy_performance_preference" % n, "performance\n")
    write(amd128, CPU + "cpu3/cpufreq/energy_performance_preference", "balance_performance\n")
    result = apply_policy(amd128, "performance", "performance", Gate(check_mode=True))
    assert result["differs"] == "cpu3 epp balance_performance -> performance (127 others ok)"


def test_one_disabled_c_state_of_128_cpus_is_named(amd128):
    apply_states(amd128, 1, True, Gate())
    write(amd128, CPU + "cpu100/cpuidle/state1/disable", "1\n")
    result = apply_states(amd128, 1, True, Gate(check_mode=True))
    assert result["differs"] == "cpu100 C1 disabled -> enabled (127 others ok)"


def test_every_cpu_grouped_and_a_long_list_bounded(amd128):
    result = apply_policy(amd128, "performance", "performance", Gate(check_mode=True))
    assert result["differs"] == ("cpu0-127 governor powersave -> performance; "
                                 "cpu0-127 epp balance_performance -> performance")
    changes = [("cpu%d" % n, "epp", "p%d" % n, "performance") for n in range(10)]
    assert differs.elements(changes, 128) == ("cpu0 epp p0 -> performance; cpu1 epp p1 -> performance; "
                                              "cpu2 epp p2 -> performance; +7 more (118 others ok)")


def test_any_knob_gets_a_summary_of_what_differs():
    before = {"0000:%02x:00.0" % n: 4096 for n in range(8)}
    assert differs.summarize(before, dict(before, **{"0000:05:00.0": 512})) == "0000:05:00.0: 4096 -> 512 (7 others ok)"
    assert differs.summarize("quiet splash " + "x=1 " * 40, "quiet " + "x=1 " * 40 + "processor.max_cstate=1") == (
        "-splash +processor.max_cstate=1")
    assert differs.summarize("options nvidia a=1\noptions nvidia_uvm b=2\n", "options nvidia a=2\n") == (
        "-options nvidia a=1; -options nvidia_uvm b=2; +options nvidia a=2")
    assert differs.summarize("passive", "active") == "passive -> active"
    assert differs.summarize({"enabled": "disabled", "active": "active"},
                             {"enabled": "enabled", "active": "active"}) == "enabled: disabled -> enabled (1 other ok)"
    assert differs.summarize({"a": 1}, {"a": 1}) == "" and differs.summarize(None, "x") == "none -> x"


def test_predict_publishes_it(cpu4):
    write(cpu4, CPU + "cpu3/cpuidle/state1/disable", "1\n")
    result = predict([{"name": "cpuidle", "module": "cpuidle_states", "args": {"max_latency": 1}}], cpu4)["cpuidle"]
    assert result["differs"] == ("cpu0-3 C2 enabled -> disabled; cpu0-3 C3 enabled -> disabled; "
                                 "cpu3 C1 disabled -> enabled")


def test_the_plan_prints_it_whole():
    differ = "cpu3 epp balance_performance -> performance (127 others ok)"
    plan = {"drain": True, "reboot": False, "reboot_reasons": [], "pending": ["cpufreq"],
            "results": {"cpufreq": {"changed": True, "differs": differ, "msg": "",
                                    "before": {"epp": {"performance": 127, "balance_performance": 1}},
                                    "after": {"epp": {"performance": 128}}}}}
    variables = {"ansible_play_hosts": ["gpu-07"], "ansible_play_hosts_all": ["gpu-07"], "ansible_check_mode": True,
                 "groups": {"infertune_pending": ["gpu-07"]}, "hostvars": {"gpu-07": {"infertune_plan": plan}}}
    source = (REPO / "roles/infertune/templates/plan.txt.j2").read_text()
    text = Templar(loader=DataLoader(), variables=variables).template(trust_as_template(source))
    assert "  cpufreq: " + differ in text.splitlines()


def test_the_plan_counts_the_hosts_it_stopped_apart():
    # The plan play ends no host (a meta task per host costs every host a round in Ansible's main
    # process): the table leaves the hosts the plan stopped out of its count and names them.
    variables = {"ansible_play_hosts": ["gpu-01", "gpu-02"], "ansible_play_hosts_all": ["gpu-01", "gpu-02"],
                 "ansible_check_mode": False, "groups": {"infertune_converged": ["gpu-01"]},
                 "hostvars": {"gpu-01": {"infertune_plan": {"results": {}}}, "gpu-02": {"infertune_failure": "gpu-02: GPU gate: found 8, expected 4"}}}
    source = (REPO / "roles/infertune/templates/plan.txt.j2").read_text()
    lines = Templar(loader=DataLoader(), variables=variables).template(trust_as_template(source)).splitlines()
    assert lines[0] == "2 host(s) planned: 0 with pending changes, 1 stopped by the plan, 1 converged"
    assert "gpu-02: stopped by the plan: gpu-02: GPU gate: found 8, expected 4" in lines
