"""Rollout under faults: the healthy hosts converge and verify, the failed host is
reported with its reason, and a re-run after the fault is cleared converges it
while the converged hosts are left alone (no drain, no reboot)."""
import json

import pytest

from helpers import ROOT, fresh_lab, labctl, on_host, playbook, recap, state_digest

pytestmark = pytest.mark.lab

# After the canary, one batch with the rest: the faults, not the batching, are under test.
ONE_BATCH = ("-e", '{"rollout_batches": ["100%"], "rollout_allow_single_batch": true}')
CANARY = "lab-gpu-01"


def boot_id(host):
    return on_host(host, "cat /proc/sys/kernel/random/boot_id").strip()


def fleet():
    return json.loads((ROOT / "reports" / "fleet.json").read_text())


@pytest.fixture(scope="module")
def hosts(lab):
    fresh_lab()
    playbook("site.yml", *ONE_BATCH, check=True)
    return sorted(lab.hosts())


def assert_resumed(hosts, fixed):
    """Re-run: the fixed host converges; every other host changes nothing and keeps its boot."""
    boots = {h: boot_id(h) for h in hosts if h != fixed}
    rc, out = playbook("site.yml", *ONE_BATCH)
    assert rc == 0, out[-6000:]
    result = recap(out)
    assert all(result[h]["changed"] == 0 for h in boots), out[-4000:]
    assert {h: boot_id(h) for h in boots} == boots
    assert fleet()["hosts"][fixed]["result"] == "pass"


def test_unreachable_host_is_reported_and_the_rest_converge(hosts):
    victim = "lab-gpu-08"
    labctl("stop", victim)
    try:
        rc, out = playbook("site.yml", *ONE_BATCH, "-e", "kernel_reboot_strategy=always")
        assert rc != 0
        result = recap(out)
        assert result[victim]["unreachable"] == 1
        assert all(result[h]["failed"] == 0 and result[h]["unreachable"] == 0 for h in hosts if h != victim)
    finally:
        labctl("start", victim)
    assert_resumed(hosts, victim)


def test_host_that_does_not_come_back_from_reboot(hosts):
    victim = "lab-gpu-07"
    labctl("fault", victim, "no-boot")
    try:
        rc, out = playbook("site.yml", *ONE_BATCH, "--limit", f"{CANARY},{victim}",
                           "-e", "kernel_reboot_strategy=always", "-e", "kernel_reboot_timeout=20")
        assert rc != 0
        result = recap(out)
        assert result[victim]["failed"] + result[victim]["unreachable"] == 1, out[-4000:]
        assert result[CANARY]["failed"] == 0
        assert "Reboot the host" in out
    finally:
        labctl("fault", victim, "no-boot", "--clear")
        labctl("stop", victim)
        labctl("start", victim)
    assert_resumed(hosts, victim)


def test_host_with_wrong_gpus_is_neither_drained_nor_rebooted(hosts):
    victim = "lab-gpu-05"
    labctl("fault", victim, "gpu-lost", "3")
    try:
        playbook("playbooks/reboot.yml", "--limit", victim, check=True)
        before, boot = state_digest(victim), boot_id(victim)
        rc, out = playbook("site.yml", *ONE_BATCH, "-e", "kernel_reboot_strategy=always")
        assert rc != 0
        result = recap(out)
        assert result[victim]["failed"] == 1
        assert "GPU" in out and victim in out
        assert all(result[h]["failed"] == 0 for h in hosts if h != victim)
        assert boot_id(victim) == boot and state_digest(victim) == before
    finally:
        labctl("fault", victim, "gpu-lost", "--clear")
    playbook("playbooks/reboot.yml", "--limit", victim, check=True)
    assert_resumed(hosts, victim)


def test_backend_refused_on_the_canary_touches_nothing_else(hosts, tmp_path):
    # FlashInfer does not declare its CuTe DSL MoE for SM120: refused without the opt-in.
    extra = tmp_path / "canary.yml"
    extra.write_text("gpu_nodes:\n  hosts:\n    %s:\n      sglang_moe_runner_backend: flashinfer_cutedsl\n" % CANARY)
    others = [h for h in hosts if h != CANARY]
    before = {h: (boot_id(h), state_digest(h)) for h in others[:2]}
    rc, out = playbook("site.yml", "-i", "inventory/lab", "-i", str(extra), "-e", "kernel_reboot_strategy=always")
    assert rc != 0
    assert "flashinfer_cutedsl" in out and "sglang_allow_undeclared_backend" in out, out[-4000:]
    # The canary failed its plan: every other host was read, none was changed.
    assert "canary host(s) %s did not converge" % CANARY in out, out[-4000:]
    assert all(r["changed"] == 0 for h, r in recap(out).items() if h != CANARY), out[-4000:]
    assert {h: (boot_id(h), state_digest(h)) for h in before} == before
