"""plugins/action/infertune_drift.py: each host's reading of the drift run, from its variables."""
import importlib.util
from pathlib import Path

from infertune import drift

SPEC = importlib.util.spec_from_file_location(
    "infertune_drift_action", Path(__file__).resolve().parents[2] / "plugins" / "action" / "infertune_drift.py")
action = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(action)

CATALOG = {"cpufreq", "pcie_mrrs", "kernel_cmdline"}
PLAN = {"pending": ["cpufreq"], "reboot_reasons": ["command line"],
        "results": {"cpufreq": {"changed": True, "differs": "epp: balance_power -> performance"},
                    "pcie_mrrs": {"changed": False, "msg": "4096 on 8 GPUs"},
                    "kernel_cmdline": {"changed": False, "reboot_required": True, "msg": "waits for a reboot"},
                    "backend": {"changed": False, "after": "supported"}}}


def test_a_host_read_has_its_catalog_knobs_what_differs_and_why_it_must_reboot():
    got = action.reading("gpu-1", {"infertune_plan": PLAN}, CATALOG)
    assert got == drift.read_ok(["cpufreq", "pcie_mrrs", "kernel_cmdline"],
                                {"cpufreq": "epp: balance_power -> performance"}, ["command line"])


def test_knobs_the_verification_found_off_count_as_pending():
    verified = {"result": "fail", "failing": ["pcie_mrrs", "gpus"]}
    got = action.reading("gpu-1", {"infertune_plan": PLAN}, CATALOG, verified)
    assert got["pending"] == {"cpufreq": "epp: balance_power -> performance", "pcie_mrrs": "its verification failed"}


def test_a_host_not_read_says_why():
    unreachable = action.reading("gpu-1", {"infertune_unreachable": "No route to host\nmore"}, CATALOG)
    stopped = action.reading("gpu-1", {"infertune_plan": PLAN, "infertune_failure": "gpu-1: GPU gate: 7 GPUs"},
                             CATALOG)
    lost = action.reading("gpu-1", {}, CATALOG)
    assert unreachable == drift.read_failed("unreachable: No route to host")
    assert stopped == drift.read_failed("stopped by the plan: gpu-1: GPU gate: 7 GPUs")
    assert lost == drift.read_failed(action.LOST)


def test_the_gpus_health_goes_with_the_reading_also_when_the_plan_stopped_the_host():
    health = {"read": True, "boot_id": "b", "gpus": [{"index": 0, "bus_id": "00000000:18:00.0", "uuid": "GPU-0",
                                                      "class": "rma", "signals": {"remap": ["rma", "failed"]},
                                                      "counters": {}, "xids": {}, "flags": {"remap_failure": 1},
                                                      "not_applicable": [], "serial": "1"}]}
    plan = dict(PLAN, gpus={"gpus": [], "problems": [], "health": health})
    stopped = action.reading("gpu-1", {"infertune_plan": plan, "infertune_failure": "gpu-1: GPU health: GPU 0"}, CATALOG)
    assert stopped["checked"] is False and stopped["gpus"]["gpus"][0]["class"] == "rma"
    assert "serial" not in stopped["gpus"]["gpus"][0]  # drift.json keeps what the metrics need
    assert action.reading("gpu-1", {"infertune_plan": plan}, CATALOG)["gpus"]["read"] is True
