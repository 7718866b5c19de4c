"""The report's before → after says what each value is (infertune/values.py), for every kind of knob
the catalog names and the rollout's own rows."""
import pytest

from infertune import report, values

UNIT_BEFORE, UNIT_AFTER = {"enabled": "disabled", "active": "inactive"}, {"active": "active", "enabled": "enabled"}
CPUS = {"governor": {"powersave": 128}, "epp": {"balance_performance": 120, "performance": 8}}


@pytest.mark.parametrize("kind, subject, before, after, said", [
    ("systemd_unit", "sglang.service", UNIT_BEFORE, UNIT_AFTER, "sglang.service: disabled, inactive → enabled, active"),
    ("sysctl", None, {"kernel.numa_balancing": "1", "vm.swappiness": "60"}, {"kernel.numa_balancing": "0", "vm.swappiness": "10"},
     "kernel.numa_balancing: 1 → 0; vm.swappiness: 60 → 10"),
    ("sysctl", None, {"kernel.numa_balancing": "0"}, {"kernel.numa_balancing": "0", "vm.swappiness": "10"},
     "vm.swappiness: — → 10"),
    ("sysctl", None, {"vm.swappiness": "10"}, {"vm.swappiness": "10"}, "vm.swappiness: 10 live; sysctl.d file rewritten"),
    ("pcie_mrrs", None, {"0000:41:00.0": 4096, "0000:42:00.0": 512, "0000:43:00.0": 512},
     dict.fromkeys(("0000:41:00.0", "0000:42:00.0", "0000:43:00.0"), 4096),
     "512 bytes on 2 devices, 4096 bytes on 1 device → 4096 bytes on 3 devices"),
    ("pcie_acs", None, {"0000:10:01.1": "0x001d"}, {"0000:10:01.1": "0x0011"},
     "redirect on (0x001d) on 1 port → redirect off (0x0011) on 1 port"),
    ("cpufreq_policy", None, CPUS, {"governor": {"performance": 128}, "epp": {"performance": 128}},
     "governor powersave on 128 CPUs; EPP balance_performance on 120 CPUs, performance on 8 CPUs"
     " → governor performance on 128 CPUs; EPP performance on 128 CPUs"),
    ("cpuidle_states", None, {"POLL": {"enabled": 2, "disabled": 0}, "C2": {"enabled": 2, "disabled": 0}},
     {"POLL": {"enabled": 2, "disabled": 0}, "C2": {"enabled": 0, "disabled": 2}},
     "POLL, C2 enabled on 2 CPUs → POLL enabled on 2 CPUs; C2 disabled on 2 CPUs"),
    ("amd_pstate", None, "passive", "active", "mode passive → mode active"),
    ("kernel_cmdline", None, "quiet iommu=pt", "iommu=pt processor.max_cstate=1",
     "added processor.max_cstate=1; removed quiet"),
    ("modprobe_options", None, "", "# written by infertune\noptions nvidia_uvm uvm_disable_hmm=1\n",
     "no options file → options nvidia_uvm uvm_disable_hmm=1"),
    ("deb_package", None, None, "6.14.11-4-pve (installed by apt)", "not installed → 6.14.11-4-pve (installed by apt)"),
    ("apt_hold", None, "none held", "proxmox-default-kernel", "none held → held: proxmox-default-kernel"),
    ("boot_kernel", None, "Proxmox VE, 6.8.12-4-pve", "Proxmox VE, 6.14.11-4-pve",
     "default entry Proxmox VE, 6.8.12-4-pve → default entry Proxmox VE, 6.14.11-4-pve"),
    ("drain", "sglang.service", "active", "stopped", "sglang.service: active → stopped"),
    ("reboot", None, "command line; default boot entry", "rebooted",
     "reboot needed: command line; default boot entry → rebooted"),
])
def test_each_kind_says_what_its_values_are(kind, subject, before, after, said):
    assert values.change(kind, before, after, subject) == said


def test_an_unchanged_knob_says_its_value_once():
    result = {"changed": False, "before": UNIT_AFTER, "after": UNIT_AFTER, "applied": True}
    assert report.change(result, False, "systemd_unit", "nvidia-persistenced.service") == (
        "nvidia-persistenced.service: enabled, active (unchanged)")
    assert report.change({"changed": False, "after": "not rebooted"}, False, "reboot") == "not rebooted (unchanged)"
    assert report.change({"changed": False, "after": ""}, False, "reboot") == "no reboot needed (unchanged)"


def test_a_file_alone_changing_says_whether_it_was_created():
    result = {"changed": True, "applied": True, "before": {"kernel.numa_balancing": "0"},
              "after": {"kernel.numa_balancing": "0"}, "differs": "/etc/sysctl.d/60-infertune-numa.conf created"}
    assert report.change(result, False, "sysctl") == (
        "kernel.numa_balancing: 0 live; /etc/sysctl.d/60-infertune-numa.conf created")


def test_the_drain_row_names_the_hooks_that_ran():
    drained = {"changed": True, "applied": True, "before": "active", "after": "stopped",
               "hooks": ["before_drain", "after_serve"]}
    said = report.change(drained, False, *report.kinds()["drain"])
    assert said == "sglang.service: active → stopped; hooks: before_drain, after_serve"
    assert report.clip(said) == said  # whole in fleet.md's cell
    assert report.change(dict(drained, hooks=[]), False, "drain", "sglang.service") == "sglang.service: active → stopped"


def test_the_catalog_names_each_knobs_kind_and_what_it_sets():
    kinds = report.kinds()
    assert kinds["sglang"] == ("systemd_unit", "sglang.service")
    assert kinds["nvidia_persistence"] == ("systemd_unit", "nvidia-persistenced.service")
    assert kinds["sysctl"] == ("sysctl", None)
    assert kinds["pcie_mrrs"] == ("pcie_mrrs", None) and kinds["drain"] == ("drain", "sglang.service")
