"""The backend A/B on the lab: it runs up to the point where sglang would start, skips the
backend the support check calls unsupported, runs the one FlashInfer only leaves undeclared,
computes the decode floor from the model's headers on the host, and leaves the sglang files
and service state as it found them, also when a backend fails to start."""
import json
import subprocess

import pytest

from helpers import BIN, ROOT, on_host, playbook, state_digest
from infertune import roofline
from tests.checkpoint import write_checkpoint

pytestmark = pytest.mark.lab

HOSTS = ["lab-gpu-01", "lab-gpu-02"]
MODEL_HOST = HOSTS[0]  # only this one gets a model directory
SGLANG_FILES = "/etc/sglang/sglang.env /etc/sglang/secrets.env /usr/local/sbin/sglang-launch " \
               "/etc/systemd/system/sglang.service"
BACKENDS = ["flashinfer_cutlass", "flashinfer_trtllm", "flashinfer_cutedsl", "triton"]


def sglang_state(host):
    """Contents and modes of the sglang files, and the unit's state."""
    return on_host(host, f"stat -c '%n %a' {SGLANG_FILES}; sha256sum {SGLANG_FILES}; "
                         "systemctl is-enabled sglang.service; systemctl is-active sglang.service; true")


@pytest.fixture(scope="module")
def deployed(lab, tmp_path_factory):
    playbook("lab/provision/sglang.yml", "--limit", ",".join(["localhost", *HOSTS]), check=True)
    playbook("site.yml", "--limit", ",".join(HOSTS), check=True)
    model = write_checkpoint(tmp_path_factory.mktemp("model"))
    proc = subprocess.run(
        [str(BIN / "ansible"), MODEL_HOST, "-m", "ansible.builtin.copy",
         "-a", f"src={model}/ dest=/models/GLM-5-NVFP4/ mode=0644"],
        cwd=ROOT, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:]
    return model


def benchmark(reports, *flags, **extra):
    return playbook("playbooks/benchmark.yml", "--limit", ",".join(HOSTS), "--diff", *flags, "-e", json.dumps(
        {"benchmark_backends": BACKENDS, "benchmark_report_dir": str(reports), **extra}))


def test_ab_renders_each_backend_and_restores_the_configuration(deployed, tmp_path):
    before = {h: sglang_state(h) for h in HOSTS}
    rc, out = benchmark(tmp_path)
    assert rc == 0, out[-6000:]
    # cutedsl, then triton were rendered into the launch script (the diffs), then the original came back.
    assert "-  flashinfer_cutlass\n+  flashinfer_cutedsl" in out and "-  flashinfer_cutedsl\n+  triton" in out
    assert {h: sglang_state(h) for h in HOSTS} == before
    for host in HOSTS:
        plan = json.loads((tmp_path / "benchmark" / host / "plan.json").read_text())
        outcome = {b["backend"]: b for b in plan["backends"]}
        assert [b["backend"] for b in plan["backends"]] == BACKENDS
        assert outcome["flashinfer_trtllm"]["status"] == "skipped"
        assert "flashinfer_trtllm is unsupported" in outcome["flashinfer_trtllm"]["reason"]
        # Undeclared by FlashInfer, not refused by sglang: the A/B runs it, as the seeds did.
        assert outcome["flashinfer_cutedsl"]["verdict"] == "undeclared"
        assert {outcome[b]["status"] for b in ("flashinfer_cutlass", "flashinfer_cutedsl", "triton")} == {"not_started"}
        assert "No backend was measured." in (tmp_path / "benchmark" / host / "summary.md").read_text()


def test_decode_floor_from_the_headers_on_the_host(deployed, tmp_path):
    # The lab provisions a model on every host: the second host goes without one here.
    on_host(HOSTS[1], "mv /models/GLM-5-NVFP4 /models/elsewhere")
    try:
        rc, out = benchmark(tmp_path)
    finally:
        on_host(HOSTS[1], "mv /models/elsewhere /models/GLM-5-NVFP4")
    assert rc == 0, out[-6000:]
    report = json.loads((tmp_path / "hosts" / f"{MODEL_HOST}.json").read_text())
    expected = roofline.analyse(deployed, "rtx-pro-6000-server", 8)
    assert report["roofline"]["floor_ms_per_token"] == pytest.approx(expected["floor_ms_per_token"])
    assert report["roofline"]["gpu_key"] == "rtx-pro-6000-server"  # picked by the name nvidia-smi gives
    assert not (tmp_path / "hosts" / f"{HOSTS[1]}.json").exists()
    # The callback folds long messages: compare with the whitespace collapsed.
    assert (f"no decode floor: host {HOSTS[1]}: model weights in /models/GLM-5-NVFP4 not ready"
            in " ".join(out.split())), out[-3000:]


def test_a_backend_that_fails_to_start_still_restores_everything(deployed, tmp_path):
    before = {h: sglang_state(h) for h in HOSTS}
    # sglang cannot run in the lab: the first backend's server never answers /health.
    rc, out = benchmark(tmp_path, benchmark_start_server=True, sglang_health_timeout=10)
    assert rc != 0
    assert "Restore the host's sglang files and service state" in out
    assert {h: sglang_state(h) for h in HOSTS} == before


def test_check_mode_changes_nothing_on_the_host(deployed, tmp_path):
    before = {h: (state_digest(h), sglang_state(h)) for h in HOSTS}
    rc, out = benchmark(tmp_path, "--check", benchmark_start_server=True)
    assert rc == 0, out[-6000:]
    assert {h: (state_digest(h), sglang_state(h)) for h in HOSTS} == before
