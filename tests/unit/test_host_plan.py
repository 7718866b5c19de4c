"""infertune/host_plan.py: a host's plan from its reads. A unit knob whose files and state are as
asked is in place and gets no second read; one asked to be stopped that runs, or waits to restart,
is not. The record merges both reads, names every reason to stop the host and its group."""
import hashlib

import pytest

from ansible_collections.infertune.fleet.infertune import host_plan

UNIT_FILE = {"path": "/etc/systemd/system/sglang.service", "content": "[Unit]\n"}
SHA1 = hashlib.sha1(b"[Unit]\n").hexdigest()


def knob(started=True, enabled=True, files=(UNIT_FILE,), secret_files=()):
    return {"name": "sglang", "role": "sglang", "module": "systemd_unit", "paths": [UNIT_FILE["path"]],
            "args": {"unit": "sglang.service", "files": list(files), "enabled": enabled, "started": started},
            "secret_files": list(secret_files)}


def fingerprint(active="active", unit_enabled="enabled", sha1=SHA1, mode="0644"):
    return {"files": {UNIT_FILE["path"]: {"sha1": sha1, "mode": mode}},
            "units": {"sglang.service": {"enabled": unit_enabled, "active": active}}}


def compared(active, started, enabled=True, unit_enabled="enabled"):
    return host_plan.in_place([knob(started, enabled)], fingerprint(active, unit_enabled))["sglang"]


@pytest.mark.parametrize("active, started, in_place", [
    ("active", True, True),
    ("inactive", True, False),
    ("activating", True, False),
    ("inactive", False, True),
    ("failed", False, True),
    ("active", False, False),      # asked stopped, still serving: the plan must see it
    ("activating", False, False),  # waiting to restart after a crash
    ("active", "false", False),    # as -e gives it
])
def test_a_unit_is_in_place_only_in_the_state_asked(active, started, in_place):
    assert compared(active, started) is in_place


def test_the_enablement_counts_too():
    assert compared("active", True, enabled=False) is False
    assert compared("active", True, enabled=False, unit_enabled="disabled") is True
    assert compared("active", True, enabled="no", unit_enabled="disabled") is True


@pytest.mark.parametrize("found", [
    fingerprint(sha1="0" * 40),            # another content
    fingerprint(mode="0600"),               # another mode
    {"files": {}, "units": fingerprint()["units"]},  # not there
])
def test_a_file_that_differs_puts_the_unit_out_of_place(found):
    assert host_plan.in_place([knob()], found) == {"sglang": False}


def test_secret_files_count_and_go_to_the_second_read_apart():
    secret = {"path": "/etc/sglang/secrets.env", "content": "KEY=x\n", "mode": "0600"}
    entry = knob(secret_files=[secret])
    placed = host_plan.in_place([entry], fingerprint())
    assert placed == {"sglang": False}
    knobs, secrets = host_plan.second_read([entry, {"name": "sysctl", "module": "sysctl"}], placed)
    assert [k["name"] for k in knobs] == ["sglang"] and "secret_files" not in knobs[0]
    assert secrets == {"sglang": [secret]}


CATALOG = [{"name": "numa", "role": "numa_balancing", "module": "sysctl", "toggle": "numa_balancing_enabled"},
           knob()]
FIRST = {"pending": ["numa"], "failed": {}, "reboot": False, "drain": False, "machine_id": "abc",
         "results": {"numa": {"changed": True}}, "gpus": {"gpus": [], "problems": []}, "fingerprint": fingerprint()}


def test_a_unit_in_place_joins_the_results_and_the_host_its_group():
    got = host_plan.record("gpu-1", CATALOG, FIRST, None, {"sglang": True}, {}, [], False)
    assert got["plan"]["results"]["sglang"]["msg"] == "sglang.service: files in place"
    assert got["plan"]["pending"] == ["numa"] and got["problems"] == [] and got["group"] == "infertune_pending"
    assert "fingerprint" not in got["plan"]
    converged = host_plan.record("gpu-1", CATALOG, dict(FIRST, pending=[]), None, {"sglang": True}, {}, [], False)
    assert converged["group"] == "infertune_converged"
    rebooting = host_plan.record("gpu-1", CATALOG, dict(FIRST, pending=[], reboot=True), None, {"sglang": True}, {}, [], False)
    assert rebooting["group"] == "infertune_pending"


def test_the_second_read_is_merged_over_the_first():
    second = {"pending": ["sglang"], "failed": {}, "drain": True, "results": {"sglang": {"changed": True}}}
    got = host_plan.record("gpu-1", CATALOG, FIRST, second, {"sglang": False}, {}, [], False)
    assert got["plan"]["pending"] == ["numa", "sglang"] and got["plan"]["drain"] is True
    assert got["plan"]["results"]["sglang"] == {"changed": True} and got["plan"]["machine_id"] == "abc"


def test_every_reason_to_stop_is_named_with_the_host_and_the_host_joins_no_group():
    first = dict(FIRST, failed={"numa": "cannot write"}, gpus={"gpus": [], "problems": ["2 GPUs, expected 8"]},
                 fabric={"failures": ["x16 link at x8"], "msg": "1 failure", "warnings": ["AER"], "aer": {}},
                 weights={"problems": ["shard 3 missing"]},
                 target_kernel={"release": "6.14.11-2-pve", "problem": "target kernel 6.14.11-2-pve is installed, but"})
    second = {"pending": [], "failed": {"sglang": "no unit"}, "results": {}}
    got = host_plan.record("gpu-1", CATALOG, first, second, {"sglang": False}, {}, ["host gpu-1: no sglang"], True)
    assert got["problems"] == [
        "gpu-1: numa (role numa_balancing): cannot write; set numa_balancing_enabled: false to leave it out",
        "gpu-1: sglang (role sglang): no unit",
        "gpu-1: GPU gate: 2 GPUs, expected 8",
        "gpu-1: PCIe fabric (role pcie): x16 link at x8",
        "gpu-1: kernel (role kernel): target kernel 6.14.11-2-pve is installed, but",
        "host gpu-1: no sglang",
        "gpu-1: model weights (sglang_model_path): shard 3 missing",
        "gpu-1: is the control node (its /etc/machine-id is the control node's); set infertune_allow_control_node: true"
        " to tune it"]
    assert got["group"] is None
    assert got["results"]["fabric"]["after"] == "1 failure; AER"


def test_what_the_gpu_gate_found_joins_the_results_also_when_it_failed():
    gpus = {"gpus": [{"name": "NVIDIA H100 80GB HBM3", "compute_capability": "9.0", "driver_version": "580.159.04"}],
            "problems": ["1 GPU(s), expected 8"]}
    got = host_plan.record("gpu-1", CATALOG, dict(FIRST, gpus=gpus), None, {"sglang": True}, {}, [], False)
    assert got["results"]["gpus"]["after"] == (
        "1 × NVIDIA H100 80GB HBM3 (9.0), driver 580.159.04; 1 GPU(s), expected 8")
    assert got["group"] is None
    assert host_plan.gpus_found({"gpus": [], "problems": ["nvidia-smi: driver not loaded"]}) == (
        "no GPU found; nvidia-smi: driver not loaded")
    from infertune import report
    assert report.change(got["results"]["gpus"], False, "gpus") == got["results"]["gpus"]["after"]


def test_the_backend_verdict_joins_the_results_when_judged():
    backend = {"verdict": "supported", "reason": "ok", "findings": [{"resolved_backend": "a"}, {"resolved_backend": "a"},
                                                                   {"resolved_backend": "b"}]}
    got = host_plan.record("gpu-1", CATALOG, FIRST, None, {"sglang": True}, backend, [], False)
    assert got["results"]["backend"] == {"changed": False, "before": None, "msg": "ok", "after": "supported (a, b)"}
    assert "backend" not in host_plan.record("gpu-1", CATALOG, FIRST, None, {"sglang": True}, {}, [], False)["results"]


@pytest.mark.parametrize("host_id, own, same", [("abc", "abc\n", True), ("abc", "def", False), (None, "", False),
                                                ("", "", False)])
def test_the_control_node_is_told_by_its_machine_id(host_id, own, same):
    assert host_plan.is_control_node(host_id, own) is same


def test_controller_only_keys_are_left_out_unread():
    class Entry(dict):
        def __getitem__(self, key):
            assert key not in ("doc", "rules"), f"read {key}"
            return dict.__getitem__(self, key)

    entry = Entry(name="numa", module="sysctl", args={"name": "kernel.numa_balancing"}, doc={"knob": "x"}, rules={})
    assert host_plan.host_entries([entry]) == [{"name": "numa", "module": "sysctl", "args": {"name": "kernel.numa_balancing"}}]
