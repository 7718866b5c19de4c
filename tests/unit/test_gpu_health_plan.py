"""GPU health on the control node (infertune/gpu_health.py) and what it does to a host's plan
(infertune/host_plan.py): a reset-class Xid again after a reboot is rma, counters rising between
reads are warn, an rma GPU stops the host before any batch, a reset-class one is cleared by a reboot
the rollout makes or needs one."""
import pytest

from infertune import gpu_health, host_plan

T1, T2, T3 = "2026-12-07T10:00:00+00:00", "2026-12-07T10:15:00+00:00", "2026-12-07T10:30:00+00:00"
UUID = "GPU-00000000-0000-4000-8000-000000000003"


def gpu(klass="ok", signals=None, xids=None, counters=None, index=3):
    return {"index": index, "bus_id": "00000000:4E:00.0", "uuid": UUID, "serial": "1650000000003", "class": klass,
            "signals": signals or {}, "not_applicable": [], "counters": counters or {}, "xids": xids or {}}


def health(boot, *gpus):
    return {"read": True, "boot_id": boot, "gpus": list(gpus), "other_xids": {}}


XID_79 = dict(klass="reset", signals={"xid": ["reset", "Xid 79"]}, xids={"79": 1})


def test_a_reset_class_xid_again_after_a_reboot_is_rma():
    first, history = gpu_health.judge(health("boot-a", gpu(**XID_79)), {}, 1, T1)
    assert first["gpus"][0]["class"] == "reset"
    again, history = gpu_health.judge(health("boot-b", gpu(**XID_79)), history, 1, T2)
    assert again["gpus"][0]["class"] == "rma"
    assert again["gpus"][0]["signals"]["xid"] == ["rma", "Xid 79 again after 1 reboot(s) that did not clear it"]
    assert again["blocking"] == ["GPU 3 (bus 00000000:4E:00.0, serial 1650000000003, uuid %s): xid: Xid 79 again after "
                                 "1 reboot(s) that did not clear it (rma)" % UUID]
    # The same boot read again is no reboot.
    same, _ = gpu_health.judge(health("boot-a", gpu(**XID_79)), gpu_health.judge(health("boot-a", gpu(**XID_79)), {}, 1, T1)[1], 1, T2)
    assert same["gpus"][0]["class"] == "reset"


def test_a_clean_boot_between_breaks_the_chain_and_the_count_is_the_variable():
    _, history = gpu_health.judge(health("boot-a", gpu(**XID_79)), {}, 2, T1)
    once, history = gpu_health.judge(health("boot-b", gpu(**XID_79)), history, 2, T2)
    assert once["gpus"][0]["class"] == "reset"  # one reboot: not yet two
    twice, _ = gpu_health.judge(health("boot-c", gpu(**XID_79)), history, 2, T3)
    assert twice["gpus"][0]["class"] == "rma"
    _, history = gpu_health.judge(health("boot-a", gpu(**XID_79)), {}, 1, T1)
    _, history = gpu_health.judge(health("boot-b", gpu()), history, 1, T2)
    broken, _ = gpu_health.judge(health("boot-c", gpu(**XID_79)), history, 1, T3)
    assert broken["gpus"][0]["class"] == "reset"


def test_counters_rising_between_reads_are_warn_and_volatile_ones_only_within_a_boot():
    _, history = gpu_health.judge(health("boot-a", gpu(counters={"ecc_corrected_aggregate": 3, "ecc_corrected_volatile": 5})),
                                  {}, 1, T1)
    rose, history = gpu_health.judge(health("boot-a", gpu(counters={"ecc_corrected_aggregate": 7,
                                                                    "ecc_corrected_volatile": 5})), history, 1, T2)
    assert rose["gpus"][0]["class"] == "warn" and rose["gpus"][0]["rising"] == ["ecc_corrected_aggregate"]
    assert rose["gpus"][0]["signals"]["counters"] == ["warn", "rising since the last read: ecc_corrected_aggregate 3 → 7"]
    assert rose["blocking"] == []
    # After a reboot a volatile count starts again: from 0 to 2 on a new boot is not compared.
    _, history = gpu_health.judge(health("boot-b", gpu(counters={"ecc_corrected_aggregate": 7, "ecc_corrected_volatile": 0})),
                                  history, 1, T3)
    after, _ = gpu_health.judge(health("boot-c", gpu(counters={"ecc_corrected_aggregate": 7, "ecc_corrected_volatile": 2})),
                                history, 1, T3)
    assert after["gpus"][0]["class"] == "ok"


def test_a_read_that_did_not_answer_changes_no_history():
    unread = {"read": False, "error": "driver unresponsive: nvidia-smi did not answer within 60 s"}
    assert gpu_health.judge(unread, {"boots": {"x": {}}}, 1, T1) == (unread, {"boots": {"x": {}}})


def test_the_history_is_kept_per_host_on_the_control_node(tmp_path):
    _, history = gpu_health.judge(health("boot-a", gpu(**XID_79)), {}, 1, T1)
    gpu_health.save(tmp_path, "gpu-01", history)
    assert gpu_health.load(tmp_path, "gpu-01") == history and gpu_health.load(tmp_path, "gpu-02") == {}
    assert [p.name for p in tmp_path.iterdir()] == ["gpu-01.json"]


FIRST = {"results": {}, "pending": [], "failed": {}, "reboot": False, "reboot_reasons": [], "drain": False}


def record(gpus, reboot=False, pending=(), reboot_to_reset=False):
    first = dict(FIRST, pending=list(pending), reboot=reboot, reboot_reasons=["command line"] if reboot else [],
                 results={k: {"changed": True} for k in pending}, gpus={"gpus": [], "problems": [], "health": health("b", *gpus)})
    return host_plan.record("gpu-01", [], first, None, {}, {}, [], False, reboot_to_reset=reboot_to_reset)


RMA = gpu("rma", {"remap": ["rma", "row remapping failed (RMA by NVIDIA's policy)"]})
PENDING = gpu("reset", {"remap": ["reset", "row remap pending (applied at the next GPU reset or reboot)"]})


def test_an_rma_gpu_stops_the_host_in_the_plan_naming_gpu_bus_serial_uuid_and_signal():
    got = record([RMA], reboot=True, pending=["kernel_cmdline"])
    assert got["group"] is None  # never pending: no batch, no canary slot, never drained
    assert got["problems"] == [f"gpu-01: GPU health: GPU 3 (bus 00000000:4E:00.0, serial 1650000000003, uuid {UUID}): "
                               "remap: row remapping failed (RMA by NVIDIA's policy) (rma)"]
    assert got["results"]["gpu_health"]["class"] == "rma"


def test_a_reset_gpu_on_a_host_that_reboots_anyway_is_cleared_by_that_reboot():
    got = record([PENDING], reboot=True, pending=["kernel_cmdline"])
    assert got["problems"] == [] and got["group"] == "infertune_pending"
    result = got["results"]["gpu_health"]
    assert result["reboot_required"] is False and got["plan"]["reboot_reasons"] == ["command line"]
    assert result["lines"] == [f"gpu-01: GPU health: GPU 3 (bus 00000000:4E:00.0, serial 1650000000003, uuid {UUID}): "
                               "remap: row remap pending (applied at the next GPU reset or reboot) (reset): the reboot of "
                               "this rollout clears it; the proof after the reboot asks for it cleared before sglang starts"]


def test_a_reset_gpu_on_a_host_with_nothing_pending_needs_a_reboot_which_the_variable_lets_the_rollout_make():
    idle = record([PENDING])
    assert idle["group"] == "infertune_converged" and idle["plan"]["reboot"] is False
    assert idle["results"]["gpu_health"]["after"] == ("1 GPU(s): 1 reset; needs a GPU reset or a reboot "
                                                      "(gpu_gate_health_reboot_to_reset: true lets the rollout reboot it)")
    rebooted = record([PENDING], reboot_to_reset=True)
    assert rebooted["group"] == "infertune_pending"
    assert rebooted["plan"]["reboot"] is True and rebooted["plan"]["drain"] is True
    assert rebooted["plan"]["reboot_reasons"] == ["GPU health"]
    # What kernel_reboot's reasons are made of: the results that wait for a reboot.
    assert rebooted["results"]["gpu_health"]["reboot_required"] is True


def test_warn_is_reported_and_never_blocks():
    slow = gpu("warn", {"clock_events": ["warn", "clocks held down: hw_slowdown"]})
    got = record([slow])
    assert got["problems"] == [] and got["group"] == "infertune_converged"
    assert got["results"]["gpu_health"]["gpus"][0]["class"] == "warn"
    assert got["results"]["gpu_health"]["lines"] == [f"gpu-01: GPU health: GPU 3 (bus 00000000:4E:00.0, serial "
                                                      f"1650000000003, uuid {UUID}): clock_events: clocks held down: "
                                                      "hw_slowdown (warn)"]


@pytest.mark.parametrize("gpus", [[], [gpu()]])
def test_a_healthy_or_gpu_less_read_changes_nothing_in_the_plan(gpus):
    got = record(gpus)
    assert got["group"] == "infertune_converged" and got["problems"] == []
    assert got["results"]["gpu_health"]["gpus"] == []
