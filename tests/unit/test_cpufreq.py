import pytest
from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node.cpufreq import apply_policy
from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node.gate import Gate, TuningError
from fakehost import read, snapshot, write

CPU0 = "/sys/devices/system/cpu/cpu0/cpufreq/"


def test_applies_to_all_cpus_with_aggregate_report_then_idempotent(amd128):
    result = apply_policy(amd128, "performance", "performance", Gate())
    assert result["changed"] and result["cpus"] == 128
    assert result["before"] == {"governor": {"powersave": 128}, "epp": {"balance_performance": 128}}
    assert result["after"] == {"governor": {"performance": 128}, "epp": {"performance": 128}}
    assert read(amd128, "/sys/devices/system/cpu/cpu127/cpufreq/scaling_governor") == "performance"
    again = apply_policy(amd128, "performance", "performance", Gate())
    assert not again["changed"] and again["before"] == again["after"]


def test_check_mode_predicts_and_changes_nothing(amd128, check_gate):
    before = snapshot(amd128)
    result = apply_policy(amd128, "performance", "performance", check_gate)
    assert result["changed"] and result["after"]["governor"] == {"performance": 128}
    assert snapshot(amd128) == before


def test_unavailable_governor_names_param_cpu_and_choices(amd128):
    write(amd128, "/sys/devices/system/cpu/cpu5/cpufreq/scaling_available_governors", "powersave\n")
    before = snapshot(amd128)
    with pytest.raises(TuningError) as err:
        apply_policy(amd128, "performance", None, Gate())
    assert "governor='performance'" in str(err.value) and "cpu5" in str(err.value)
    assert "scaling_available_governors: powersave" in str(err.value)
    assert snapshot(amd128) == before, "validation happens before any write"


def test_unavailable_epp_names_param_and_choices(amd128):
    with pytest.raises(TuningError) as err:
        apply_policy(amd128, "powersave", "turbo", Gate())
    assert "epp='turbo'" in str(err.value) and "balance_power" in str(err.value)


def test_non_performance_epp_under_performance_governor_fails(amd128):
    with pytest.raises(TuningError, match="fixes EPP to 'performance'"):
        apply_policy(amd128, "performance", "balance_power", Gate())


def test_epp_under_powersave_is_written(amd128):
    result = apply_policy(amd128, "powersave", "power", Gate())
    assert result["after"]["epp"] == {"power": 128}
    assert read(amd128, CPU0 + "energy_performance_preference") == "power"


def test_driver_without_epp_reports_not_applicable(cpu4):
    result = apply_policy(cpu4, "performance", "performance", Gate())
    assert result["epp_applicable"] is False and "acpi-cpufreq" in result["msg"]
    assert result["after"] == {"governor": {"performance": 4}}


def test_host_without_cpufreq_is_not_applicable(tmp_path, gate):
    result = apply_policy(str(tmp_path), "performance", None, gate)
    assert result["cpufreq_applicable"] is False and not result["changed"]
