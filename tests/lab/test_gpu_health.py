"""GPU health in the rollout and the drift watch, with the lab's health faults (lab/README.md).

A remap pending on an H100 host (the RTX PRO 6000 profiles answer [N/A] for remapping) in the
rollout's second batch: the plan says the reboot clears it, the host reboots and passes. The
same fault on a host with nothing pending: the plan says it needs a reboot and the verification
fails the host, until gpu_gate_health_reboot_to_reset lets the rollout reboot it. An Xid 79 that
a reboot does not clear fails the proof after that reboot; at the next plan the GPU is rma and the
host is never drained while the rest of the fleet converges. A hanging nvidia-smi fails its host in
the plan within gpu_gate_timeout. The drift watch, scraped by a real node_exporter, reports each.
"""
import json
import subprocess

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families
from test_drift import exporter  # noqa: F401  (the node_exporter fixture)

from helpers import BIN, ROOT, labctl, on_host, playbook, recap, state_digest

pytestmark = pytest.mark.lab

CANARY, RMA_HOST, H100_HOST, HELPER, HUNG_HOST, SLOW_HOST, OTHER = (
    "lab-gpu-01", "lab-gpu-02", "lab-gpu-03", "lab-gpu-04", "lab-gpu-05", "lab-gpu-06", "lab-gpu-07")
H100_VARS = {"gpu_gate_expected_count": 4, "gpu_gate_compute_capability": "9.0", "sglang_tp": 4,
             "sglang_moe_runner_backend": "auto"}
ONE_BATCH = ("-e", '{"rollout_batches": ["100%"], "rollout_allow_single_batch": true}')
EPP = "/sys/devices/system/cpu/cpu*/cpufreq/energy_performance_preference"
HEALTH_FAULTS = ("remap-pending", "remap-failure", "xid", "hw-slowdown", "nvidia-smi-hang")


def clear(host):
    for name in HEALTH_FAULTS:
        labctl("fault", host, name, "--clear")


def reboot(host):
    labctl("stop", host)
    labctl("start", host)


@pytest.fixture(scope="module")
def inventory(lab, tmp_path_factory):
    """The lab with one xeon-h100 host, converged; the inventory arguments that say what that host
    differs in. Afterwards: faults cleared, the rebooted hosts, the default profiles."""
    labctl("up", "--hosts", "8", "--profile", "seed-epyc-rtxpro6000", "--profile-map", f"{H100_HOST}=xeon-h100")
    for host in (RMA_HOST, H100_HOST, HUNG_HOST, SLOW_HOST):
        clear(host)
    extra = tmp_path_factory.mktemp("inventory") / "h100.yml"
    extra.write_text(yaml.safe_dump({"gpu_nodes": {"hosts": {H100_HOST: H100_VARS}}}))
    args = ("-i", "inventory/lab", "-i", str(extra))
    playbook("site.yml", *args, *ONE_BATCH, check=True)
    yield args
    for host in (RMA_HOST, H100_HOST, HUNG_HOST, SLOW_HOST):
        clear(host)
    for host in (RMA_HOST, HUNG_HOST):
        reboot(host)
    labctl("up", "--profile-map", "")


def boot_id(host):
    return on_host(host, "cat /proc/sys/kernel/random/boot_id").strip()


def host_report(host):
    return json.loads((ROOT / "reports" / "fleet.json").read_text())["hosts"][host]


def said(out):
    return " ".join(out.split())  # the callback folds long lines


def test_a_remap_pending_in_batch_two_is_cleared_by_the_reboot_the_rollout_makes(inventory):
    labctl("fault", H100_HOST, "remap-pending", "3")
    boot = boot_id(H100_HOST)
    rc, out = playbook("site.yml", *inventory, "--limit", f"{CANARY},{HELPER},{H100_HOST}",
                       "-e", "kernel_reboot_strategy=always", "-e", '{"rollout_batches": [2]}')
    assert rc == 0, out[-6000:]
    text = said(out)
    assert (f"{H100_HOST}: GPU health: GPU 3 (bus 00000000:BB:00.0, serial " in text
            and "remap: row remap pending (applied at the next GPU reset or reboot) (reset): the reboot of this"
                " rollout clears it" in text), out[-6000:]
    # The canary alone first; the H100 host in the second batch, with the helper.
    batches = [line for line in out.splitlines() if line.startswith("PLAY [Roll out")]
    assert len(batches) == 2, batches
    assert boot_id(H100_HOST) != boot
    entry = host_report(H100_HOST)
    assert entry["result"] == "pass" and entry["rollout"]["rebooted"] is True, entry
    assert entry["gpu_health"]["class"] == "ok" and entry["knobs"]["gpu_health"]["verify"] == "pass", entry


def test_a_remap_pending_on_a_host_with_nothing_pending_needs_a_reboot_the_variable_lets_the_rollout_make(inventory):
    """Without the reboot the signal stays: the verification fails the host. So the host above passed
    only because its reboot cleared it."""
    labctl("fault", H100_HOST, "remap-pending", "3")
    boot = boot_id(H100_HOST)
    rc, out = playbook("site.yml", *inventory, "--limit", H100_HOST)
    assert rc != 0 and boot_id(H100_HOST) == boot, out[-4000:]
    assert "needs a GPU reset or a reboot (gpu_gate_health_reboot_to_reset: true lets the rollout reboot it)" in said(out)
    entry = host_report(H100_HOST)
    assert entry["result"] == "fail" and entry["failing"] == ["gpu_health"], entry
    assert entry["rollout"] == {"stage": "verify", "drained": False, "rebooted": False}, entry

    rc, out = playbook("site.yml", *inventory, "--limit", H100_HOST, "-e", "gpu_gate_health_reboot_to_reset=true")
    assert rc == 0, out[-6000:]
    assert boot_id(H100_HOST) != boot
    entry = host_report(H100_HOST)
    assert entry["result"] == "pass" and entry["rollout"] == {"stage": "verify", "drained": True, "rebooted": True}, entry


def test_an_xid_a_reboot_does_not_clear_fails_the_proof_then_its_gpu_is_rma_and_never_drained(inventory):
    labctl("fault", RMA_HOST, "xid", "79", "2")  # logged now and at every boot
    rc, out = playbook("site.yml", *inventory, "--limit", f"{CANARY},{RMA_HOST}", "-e", "kernel_reboot_strategy=always")
    assert rc != 0
    entry = host_report(RMA_HOST)
    assert entry["rollout"] == {"stage": "reboot", "drained": True, "rebooted": True}, entry
    assert "after the reboot: GPU health: GPU 2 (bus 00000000:33:00.0, " in entry["reason"], entry
    assert entry["reason"].endswith("xid: Xid 79 (reset)"), entry
    # The next plan has seen Xid 79 before this boot's: rma. The host is never drained; the others converge.
    for host in (HELPER, OTHER):
        on_host(host, f"for f in {EPP}; do echo balance_power > $f; done")
    before = (boot_id(RMA_HOST), state_digest(RMA_HOST))
    rc, out = playbook("site.yml", *inventory, "--limit", f"{RMA_HOST},{HELPER},{OTHER}", "-e", "rollout_max_failures=1")
    assert rc != 0 and "rollout stopped" not in out, out[-4000:]
    result = recap(out)
    assert result[RMA_HOST]["failed"] == 1 and result[RMA_HOST]["changed"] == 0, out[-4000:]
    assert all(result[h]["failed"] == 0 and result[h]["changed"] > 0 for h in (HELPER, OTHER)), out[-4000:]
    assert (boot_id(RMA_HOST), state_digest(RMA_HOST)) == before
    assert on_host(RMA_HOST, "systemctl is-active sglang.service || true").strip() == "active"
    entry = host_report(RMA_HOST)
    assert entry["reason"].startswith(f"failed in stage plan: {RMA_HOST}: GPU health: GPU 2 (bus 00000000:33:00.0, "), entry
    assert entry["reason"].endswith("xid: Xid 79 again after 1 reboot(s) that did not clear it (rma)"), entry
    assert all(host_report(h)["result"] == "pass" for h in (HELPER, OTHER))


def test_a_hanging_nvidia_smi_fails_its_host_in_the_plan_within_the_time_limit(inventory):
    labctl("fault", HUNG_HOST, "nvidia-smi-hang")
    boot = boot_id(HUNG_HOST)
    # A hung play would end here, by the subprocess's own limit, as a failure of this test.
    proc = subprocess.run([str(BIN / "ansible-playbook"), "site.yml", *inventory, "--limit", HUNG_HOST,
                           "-e", "gpu_gate_timeout=5"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and recap(out)[HUNG_HOST]["failed"] == 1, out[-4000:]
    assert f"{HUNG_HOST}: GPU gate: driver unresponsive: nvidia-smi did not answer within 5 s" in said(out), out[-4000:]
    assert boot_id(HUNG_HOST) == boot
    assert host_report(HUNG_HOST)["rollout"] == {"stage": "plan", "drained": False, "rebooted": False}


def gpu_metrics(url):
    """{metric: {(host, gpu, extra label): value}} of the infertune_gpu_ metrics the exporter serves."""
    from urllib.request import urlopen

    out = {}
    for family in text_string_to_metric_families(urlopen(url, timeout=10).read().decode()):
        for sample in family.samples if family.name.startswith("infertune_gpu_") else ():
            labels = dict(sample.labels)
            extra = next((labels[k] for k in ("class", "xid", "reason", "counter") if k in labels), None)
            out.setdefault(sample.name, {})[(labels["host"], labels.get("gpu"), extra)] = sample.value
    return out


def test_the_drift_watch_reports_each_gpu_with_its_metrics(inventory, exporter):  # noqa: F811
    textfiles, url = exporter
    labctl("fault", H100_HOST, "remap-pending", "3")
    labctl("fault", SLOW_HOST, "hw-slowdown", "5")
    # The rma and the hung host keep their faults from the tests above.
    proc = subprocess.run([str(BIN / "infertune"), "drift", *inventory, "--textfile-dir", str(textfiles),
                           "-e", "gpu_gate_timeout=5"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 1, proc.stdout + proc.stderr  # two hosts stopped by their plan
    got = gpu_metrics(url)
    assert got["infertune_gpu_health_class"][(H100_HOST, "3", "reset")] == 1
    assert got["infertune_gpu_remap_pending"][(H100_HOST, "3", None)] == 1
    assert got["infertune_gpu_health_class"][(RMA_HOST, "2", "rma")] == 1
    assert got["infertune_gpu_xids_this_boot"][(RMA_HOST, "2", "79")] == 1
    assert got["infertune_gpu_health_class"][(SLOW_HOST, "5", "warn")] == 1
    assert got["infertune_gpu_clock_event_active"][(SLOW_HOST, "5", "hw_slowdown")] == 1
    assert got["infertune_gpu_clock_event_active"][(SLOW_HOST, "4", "hw_slowdown")] == 0
    assert got["infertune_gpu_health_class"][(CANARY, "0", "ok")] == 1
    # The RTX PRO 6000 answers [N/A] for remapping: no such series for it.
    assert (CANARY, "0", None) not in got["infertune_gpu_remap_pending"]
    assert {host: value for (host, _, _), value in got["infertune_gpu_health_read"].items()} == {
        h: float(h != HUNG_HOST) for h in (CANARY, RMA_HOST, H100_HOST, HELPER, HUNG_HOST, SLOW_HOST, OTHER, "lab-gpu-08")}
    state = json.loads((ROOT / "reports" / "drift.json").read_text())["hosts"]
    assert state[HUNG_HOST]["gpu_health"]["error"] == "driver unresponsive: nvidia-smi did not answer within 5 s"
    check = subprocess.run(["promtool", "check", "metrics"], input=(textfiles / "infertune_drift.prom").read_text(),
                           capture_output=True, text=True)
    assert check.returncode == 0 and not (check.stdout + check.stderr).strip(), check.stdout + check.stderr
