"""The backend A/B on the lab: it runs up to the point where sglang would start, skips the
backend the support check calls unsupported, runs the one FlashInfer only leaves undeclared
(and measures it where a server answers: the sglang stand-in), computes the decode floor from the model's headers on the host, and leaves the sglang files
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


# The lab's venv runs the stand-in server for `-m sglang.launch_server` (the image's serving layer, lab/infra/serving.py);
# p2pBandwidthLatencyTest is a stand-in that prints a real run's output
# (tests/unit/fixtures/interconnect).
STANDIN = "/opt/standin"
P2P_TOOL = "/usr/local/bin/p2pBandwidthLatencyTest"
P2P_OUTPUT = ROOT / "tests" / "unit" / "fixtures" / "interconnect" / "p2p_a100_nvlink_8gpu.txt"


@pytest.fixture
def standin_server():
    host = HOSTS[0]
    on_host(host, f"mkdir -p {STANDIN}")
    try:
        proc = subprocess.run(
            [str(BIN / "ansible"), host, "-m", "ansible.builtin.copy",
             "-a", f"src={P2P_OUTPUT} dest={STANDIN}/p2p.txt mode=0644"],
            cwd=ROOT, capture_output=True, text=True, check=False)
        assert proc.returncode == 0, proc.stdout[-3000:]
        on_host(host, f"printf '#!/bin/sh\\ncat {STANDIN}/p2p.txt\\n' > {P2P_TOOL} && chmod 0755 {P2P_TOOL}")
        yield host
    finally:
        on_host(host, f"rm -rf {STANDIN} {P2P_TOOL}")


def test_undeclared_backend_is_measured_where_a_server_answers(deployed, standin_server, tmp_path):
    """The seed campaign's experiment: flashinfer_cutedsl on SM120, which FlashInfer leaves
    undeclared, is deployed for the A/B (opted in), started and measured, then the host's own
    configuration comes back. The interconnect tool the host has is run and recorded."""
    host = standin_server
    before = sglang_state(host)
    rc, out = playbook("playbooks/benchmark.yml", "--limit", host, "-e", json.dumps(
        {"benchmark_backends": ["flashinfer_cutedsl"], "benchmark_report_dir": str(tmp_path),
         "benchmark_start_server": True, "sglang_allow_undeclared_backend": True, "benchmark_batch_sizes": [1, 2],
         "benchmark_trials": 1, "benchmark_warmup": 0, "benchmark_max_new_tokens": 4}))
    assert rc == 0, out[-6000:]
    results = tmp_path / "benchmark" / host
    backend = json.loads((results / "plan.json").read_text())["backends"][0]
    assert backend == {"backend": "flashinfer_cutedsl", "verdict": "undeclared", "status": "measured", "reason": ""}
    measured = json.loads((results / "flashinfer_cutedsl.json").read_text())
    assert measured["backend"] == "flashinfer_cutedsl", measured
    # The server that answered was started with the backend under test.
    assert "--moe-runner-backend flashinfer_cutedsl" in on_host(host, "cat /var/log/sglang/server.log")
    assert "flashinfer_cutedsl" in (results / "summary.md").read_text()
    assert sglang_state(host) == before
    # The interconnect, measured after the drain with the tool the host has, recorded with the one it lacks.
    interconnect = json.loads((tmp_path / "hosts" / f"{host}.json").read_text())["interconnect"]
    assert interconnect["p2p"]["status"] == "measured" and interconnect["p2p"]["gpus"] == 8, interconnect
    assert interconnect["all_reduce"]["status"] == "not installed", interconnect
    assert (results / "p2p.txt").read_text().rstrip("\n") == P2P_OUTPUT.read_text().rstrip("\n")


def test_decode_floor_from_the_headers_on_the_host(deployed, tmp_path):
    # The lab image carries a model on every host: the second host goes without one here.
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
    # Its report holds the interconnect record (no tools in the lab), no floor.
    assert "roofline" not in json.loads((tmp_path / "hosts" / f"{HOSTS[1]}.json").read_text())
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
