"""Rollout under faults: the healthy hosts converge and verify, the failed host is
reported with its reason, and a re-run after the fault is cleared converges it
while the converged hosts are left alone (no drain, no reboot)."""
import json
import os
import subprocess

import pytest

from helpers import BIN, GPU_MRRS_512, ROOT, fresh_lab, gpu_mrrs, labctl, on_host, playbook, recap, state_digest

pytestmark = pytest.mark.lab

# After the canary, one batch with the rest: the faults, not the batching, are under test.
ONE_BATCH = ("-e", '{"rollout_batches": ["100%"], "rollout_allow_single_batch": true}')
CANARY = "lab-gpu-01"


EPP = "/sys/devices/system/cpu/cpu*/cpufreq/energy_performance_preference"
STANDIN = "/opt/standin"
# sglang.service replaced by the stand-in server (lab/standin/sglang_server.py) started
# without --enable-metrics, so /metrics answers 404 as sglang's does without the flag.
STANDIN_PLAY = """- name: Serve the sglang stand-in as sglang.service, without /metrics
  hosts: {host}
  gather_facts: false
  tasks:
    - name: Create the stand-in's directory
      ansible.builtin.file: {{path: {dir}, state: directory, mode: "0755"}}
    - name: Copy the stand-in
      ansible.builtin.copy: {{src: {src}, dest: {dir}/sglang_server.py, mode: "0644"}}
    - name: Replace sglang.service with the stand-in
      ansible.builtin.copy:
        dest: /etc/systemd/system/sglang.service
        mode: "0644"
        content: |
          [Service]
          ExecStart=/usr/bin/python3 {dir}/sglang_server.py --host 0.0.0.0 --port 30000
    - name: Start it
      ansible.builtin.systemd_service: {{name: sglang.service, state: restarted, daemon_reload: true}}
    - name: Wait until it answers
      ansible.builtin.wait_for: {{port: 30000, timeout: 30}}
"""


def serve_standin_without_metrics(host, tmp_path):
    path = tmp_path / "standin.yml"
    path.write_text(STANDIN_PLAY.format(host=host, dir=STANDIN, src=ROOT / "lab" / "standin" / "sglang_server.py"))
    playbook(str(path), check=True)


def remove_standin(host):
    """Stop the replaced unit; the next run writes the role's unit again and starts it."""
    on_host(host, f"systemctl stop sglang.service; rm -rf {STANDIN}")


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


def test_gpus_lost_at_the_reboot_stop_the_host_before_sglang(hosts):
    """The GPU gate runs again after the reboot: a GPU that does not come back fails the host
    there (its own batch, after the canary), and the report says so. The host served before,
    so it was drained before the reboot."""
    victim = "lab-gpu-03"
    labctl("fault", victim, "gpu-lost", "5")  # read at the next boot: the reboot's
    try:
        rc, out = playbook("site.yml", "--limit", f"{CANARY},{victim}", "-e", "kernel_reboot_strategy=always")
        assert rc != 0
        result = recap(out)
        assert result[victim]["failed"] == 1 and result[CANARY]["failed"] == 0, out[-4000:]
        entry = fleet()["hosts"][victim]
        assert entry["rollout"] == {"stage": "reboot", "drained": True, "rebooted": True}, entry
        assert entry["reason"].startswith("failed in stage reboot: ") and "GPU gate: " in entry["reason"], entry
    finally:
        labctl("fault", victim, "gpu-lost", "--clear")
    playbook("playbooks/reboot.yml", "--limit", victim, check=True)
    assert_resumed(hosts, victim)


def test_lost_hosts_count_across_batches_and_the_rollout_stops_with_a_report(hosts):
    """rollout_max_failures 1, batches of two then four after the canary: a host lost in its
    reboot in the first batch is tolerated; two of the next batch's four never come back, and the
    rollout stops before the next batch, whose host is not touched. The verify play still reports
    every host: the lost ones with their stage and reason, the one left out with why."""
    lost, spared = ["lab-gpu-03", "lab-gpu-05", "lab-gpu-06"], "lab-gpu-08"
    boot = boot_id(spared)
    for host in lost:
        labctl("fault", host, "no-boot")
    try:
        rc, out = playbook("site.yml", "-e", '{"rollout_batches": [2, 4]}', "-e", "rollout_max_failures=1",
                           "-e", "kernel_reboot_strategy=always", "-e", "kernel_reboot_timeout=20")
        assert rc != 0
        result = recap(out)
        assert all(result[h]["failed"] == 1 and result[h]["unreachable"] == 0 for h in lost), out[-4000:]
        assert result[spared]["changed"] == 0 and result[spared]["failed"] == 0, out[-4000:]
        assert boot_id(spared) == boot
        report = fleet()["hosts"]
        assert all(report[h]["result"] == "pass" for h in hosts if h not in lost and h != spared), report
        for host in lost:
            assert report[host]["rollout"]["stage"] == "reboot", report[host]
            assert "unreachable after the reboot" in report[host]["reason"], report[host]
        assert report[spared]["result"] == "not verified"
        assert report[spared]["reason"] == (
            "the rollout stopped before this host's batch: 3 host(s) failed (lab-gpu-03, lab-gpu-05, "
            "lab-gpu-06), more than rollout_max_failures allows (1 of 8)"), report[spared]
    finally:
        for host in lost:
            labctl("fault", host, "no-boot", "--clear")
            labctl("stop", host)
            labctl("start", host)
    # The next test's run (every host, rebooted) converges them: a host lost in its reboot
    # converges on a re-run once it is back.


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


@pytest.fixture
def converged(lab):
    """The lab's hosts as they are (any number), converged, with a report that says pass."""
    playbook("site.yml", *ONE_BATCH, check=True)
    return sorted(lab.hosts())


def drift(host):
    on_host(host, f"for f in {EPP}; do echo balance_power > $f; done")  # a runtime change


def test_a_host_whose_plan_fails_is_a_failure_never_the_canary(converged, tmp_path):
    """FlashInfer does not declare its CuTe DSL MoE for SM120: the first host's plan refuses
    it. That host is never touched and counts as one failure (within rollout_max_failures);
    the canary is the first host that passed its plan, and every other host converges."""
    refused, *others = converged
    extra = tmp_path / "refused.yml"
    extra.write_text("gpu_nodes:\n  hosts:\n    %s:\n      sglang_moe_runner_backend: flashinfer_cutedsl\n" % refused)
    before = (boot_id(refused), state_digest(refused))
    for host in others:
        drift(host)
    rc, out = playbook("site.yml", "-i", "inventory/lab", "-i", str(extra), "-e", "rollout_max_failures=1")
    assert rc != 0
    assert "flashinfer_cutedsl" in out and "sglang_allow_undeclared_backend" in out, out[-4000:]
    assert "rollout stopped" not in out, out[-4000:]
    result = recap(out)
    assert result[refused]["failed"] == 1 and result[refused]["changed"] == 0, out[-4000:]
    assert all(result[h]["failed"] == 0 and result[h]["changed"] > 0 for h in others), out[-4000:]
    assert (boot_id(refused), state_digest(refused)) == before
    report = fleet()
    assert report["hosts"][refused]["result"] == "fail"
    assert report["hosts"][refused]["reason"].startswith("failed in stage plan: "), report["hosts"][refused]
    assert all(report["hosts"][h]["result"] == "pass" for h in others), report["hosts"]
    assert report["summary"]["failed"] == {refused: "plan"}
    assert f"1 fail ({refused} in stage plan)" in (ROOT / "reports" / "fleet.md").read_text()


def test_the_only_host_of_a_batch_lost_mid_stage_gets_this_runs_report(converged):
    """The only host with a change pending is the canary, alone in its batch; stopped while its
    runtime stage runs, it is unreachable, and Ansible ends the playbook before the verify play.
    The run still ends with its own report, and the earlier report's pass is gone."""
    victim, others = converged[0], converged[1:]
    assert fleet()["hosts"][victim]["result"] == "pass"
    drift(victim)
    proc = subprocess.Popen([str(BIN / "ansible-playbook"), "site.yml"], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=dict(os.environ, PYTHONUNBUFFERED="1"))
    lines = []
    try:
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("TASK [") and "Record the runtime stage" in line:
                labctl("stop", victim)
                break
        lines.append(proc.stdout.read())
        proc.wait(timeout=900)
    finally:
        if proc.poll() is None:
            proc.kill()
        labctl("start", victim)
    out = "".join(lines)
    report = fleet()
    assert "not_current" not in report, out[-4000:]
    entry = report["hosts"][victim]
    assert entry["result"] == "fail" and report["summary"]["failed"] == {victim: "runtime"}, entry
    if proc.returncode == 4:
        # Lost in a task of its own: unreachable, and Ansible ended the playbook there.
        assert recap(out)[victim]["unreachable"] == 1, out[-4000:]
        assert entry["reason"].startswith("unreachable in stage runtime: "), entry
        for host in others:
            assert report["hosts"][host]["result"] == "not verified", report["hosts"][host]
            assert report["hosts"][host]["reason"].startswith("the run ended before its verification"), report
    else:
        # Lost in a loop's item: the loop fails, the rescue keeps that the host was unreachable.
        assert proc.returncode == 2, out[-4000:]
        assert entry["reason"].startswith("failed in stage runtime: ") and ": unreachable: " in entry["reason"], entry
    # Back, it converges on a re-run; the others are left alone.
    rc, out = playbook("site.yml")
    assert rc == 0, out[-6000:]
    assert all(recap(out)[h]["changed"] == 0 for h in others), out[-4000:]
    assert fleet()["hosts"][victim]["result"] == "pass"


def test_unreadable_metrics_fail_the_host_before_the_stop(hosts, tmp_path):
    # The victim shares its batch (after the canary) with a host that converges.
    victim, helper = "lab-gpu-06", "lab-gpu-05"
    serve_standin_without_metrics(victim, tmp_path)
    for host in (CANARY, helper, victim):
        on_host(host, GPU_MRRS_512)  # a change that drains
    try:
        rc, out = playbook("site.yml", *ONE_BATCH, "--limit", f"{CANARY},{helper},{victim}")
        assert rc != 0
        assert "cannot count sglang's in-flight requests" in out and "sglang_drain_force" in out, out[-6000:]
        # Left serving, untouched past its boot-time knobs.
        assert on_host(victim, "systemctl is-active sglang.service || true").strip() == "active"
        assert gpu_mrrs(victim) == ["MaxReadReq 512"]
        entry = fleet()["hosts"][victim]
        assert entry["result"] == "fail"
        assert entry["rollout"] == {"stage": "drain", "drained": False, "rebooted": False}
        assert entry["reason"].startswith("failed in stage drain: Stop unless the in-flight requests could be counted")
    finally:
        remove_standin(victim)
    assert_resumed(hosts, victim)


def test_an_installed_target_kernel_without_its_nvidia_module_stops_the_host_in_the_plan(hosts, tmp_path):
    """The image's base kernel as the first host's target, installed, its NVIDIA module package
    withheld: the state a host is in after its module proof failed (the kernel installed, the
    default entry kept on the running kernel). The plan stops it before any drain, so it is no
    canary: the next host is, and the rest of the run converges. Once the package is there a
    re-run boots the host into that kernel."""
    victim, helper = CANARY, "lab-gpu-02"
    release = "cat /proc/sys/kernel/osrelease"
    base = json.loads((ROOT / "lab" / ".state" / "image.json").read_text())["base_kernel_release"]
    # The victim alone gets the other target kernel.
    (tmp_path / "target.yml").write_text(json.dumps({"gpu_nodes": {"hosts": {victim: {
        "kernel_release": base, "kernel_package": f"linux-image-{base}"}}}}))
    target = ("-i", "inventory/lab", "-i", str(tmp_path / "target.yml"))
    labctl("fault", victim, "no-driver-for-kernel", base)
    labctl("stop", victim)
    labctl("start", victim)
    running, boot = on_host(victim, release).strip(), boot_id(victim)
    before = state_digest(victim)
    on_host(helper, f"for f in {EPP}; do echo balance_power > $f; done")
    try:
        # A failed plan counts against rollout_max_failures (25 % of two hosts allows none).
        rc, out = playbook("site.yml", *ONE_BATCH, "--limit", f"{victim},{helper}", "-e", "rollout_max_failures=1",
                           *target)
        assert rc != 0
        result = recap(out)
        assert result[victim]["failed"] == 1 and result[helper]["failed"] == 0, out[-4000:]
        assert "rollout stopped" not in out, out[-4000:]
        text = " ".join(out.split())
        assert (f"{victim}: kernel (role kernel): target kernel {base} is installed, but the NVIDIA module will not"
                f" load on it: no nvidia.ko under /lib/modules/{base}") in text, out[-4000:]
        assert f"fix: install linux-modules-nvidia-" in text and f"the host runs {running}" in text
        assert boot_id(victim) == boot and on_host(victim, release).strip() == running
        assert state_digest(victim) == before
        assert fleet()["hosts"][victim]["rollout"] == {"stage": "plan", "drained": False, "rebooted": False}
        assert fleet()["hosts"][helper]["result"] == "pass"
    finally:
        labctl("fault", victim, "no-driver-for-kernel", "--clear")
        labctl("stop", victim)
        labctl("start", victim)
    rc, out = playbook("site.yml", *ONE_BATCH, "--limit", victim, *target)
    assert rc == 0, out[-6000:]
    assert on_host(victim, release).strip() == base
    # Back to the lab's target kernel for the tests that follow.
    rc, out = playbook("site.yml", *ONE_BATCH, "--limit", victim)
    assert rc == 0 and on_host(victim, release).strip() == running, out[-4000:]


MODEL = "/models/GLM-5-NVFP4"
SHARD = MODEL + "/model-00002-of-00002.safetensors"


@pytest.mark.parametrize("damage, problem", [
    (f"rm {SHARD}", f"1 of 2 shards missing in {MODEL}: model-00002-of-00002.safetensors"),
    (f"truncate -s -10 {SHARD}", f"{SHARD} is "),
])
def test_incomplete_weights_stop_the_host_in_the_plan_undrained(hosts, damage, problem):
    victim = "lab-gpu-05"
    on_host(victim, f"cp -p {SHARD} /root/shard.keep && {damage}")
    try:
        on_host(victim, GPU_MRRS_512)  # would drain it
        before, boot = state_digest(victim), boot_id(victim)
        rc, out = playbook("site.yml", "--limit", victim)
        assert rc != 0
        text = " ".join(out.split())
        assert f"{victim}: model weights (sglang_model_path): {problem}" in text, out[-4000:]
        assert "Drain sglang" not in out
        assert state_digest(victim) == before and boot_id(victim) == boot
    finally:
        on_host(victim, f"mv /root/shard.keep {SHARD}")
    rc, out = playbook("site.yml", "--limit", victim)
    assert rc == 0, out[-6000:]


def test_a_driver_below_the_floor_of_the_installed_cuda_fails_the_gate_naming_both(hosts):
    victim = "lab-gpu-06"
    labctl("fault", victim, "old-driver", "570.172.08")
    labctl("stop", victim)
    labctl("start", victim)
    try:
        before = state_digest(victim)
        rc, out = playbook("site.yml", "--limit", victim)
        assert rc != 0
        # The lab's venv holds the torch that sglang 0.5.23 pins, a CUDA 13.0 build.
        assert ("driver 570.172.08 found, CUDA 13.0 (torch 2.14.1+cu130 in /opt/sglang/venv) needs at least "
                "580.65.06") in " ".join(out.split()), out[-4000:]
        assert state_digest(victim) == before
    finally:
        labctl("fault", victim, "old-driver", "--clear")
        labctl("stop", victim)
        labctl("start", victim)
