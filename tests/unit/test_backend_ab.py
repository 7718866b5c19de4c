"""The A/B summary: winner per batch size, skipped backends with their reasons, the plot."""
import json

import pytest

from infertune import backend_ab, bench_client
from sglang_server import StandinSglang


def result(backend, ms_by_batch):
    """A bench_client file with the given per-trial ms/token for each batch size."""
    return {"backend": backend, "started": "2026-11-30T12:00:00+00:00", "results": [
        {"batch": batch, "ms_per_token": bench_client.summary(trials), "tok_per_s": bench_client.summary(
            [1e3 * batch / t for t in trials])} for batch, trials in ms_by_batch.items()]}


@pytest.fixture
def host_dir(tmp_path):
    plan = {"host": "node1", "original_backend": "flashinfer_cutlass", "floor_ms_per_token": 6.0,
            "backends": [
                {"backend": "flashinfer_cutlass", "status": "measured", "reason": ""},
                {"backend": "flashinfer_cutedsl", "status": "skipped",
                 "reason": "host node1: MoE runner backend flashinfer_cutedsl is unsupported on SM120"},
                {"backend": "triton", "status": "measured", "reason": ""}]}
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    (tmp_path / "flashinfer_cutlass.json").write_text(json.dumps(
        result("flashinfer_cutlass", {1: [12.0, 13.0, 12.5], 8: [20.0, 21.0, 22.0]})))
    (tmp_path / "triton.json").write_text(json.dumps(
        result("triton", {1: [15.0, 16.0, 14.0], 8: [16.0, 17.0, 18.0]})))
    return tmp_path


def test_winner_per_batch_size(host_dir):
    summary = backend_ab.summarise(host_dir)
    rows = {r["batch"]: r for r in summary["winners"]}
    assert rows[1]["winner"] == "flashinfer_cutlass"
    assert rows[1]["ahead_of_next_percent"] == pytest.approx(100 * (15.0 - 12.5) / 15.0)
    assert rows[1]["winner_of_floor_percent"] == pytest.approx(100 * 6.0 / 12.5)
    assert rows[8]["winner"] == "triton"
    assert "winner_of_floor_percent" not in rows[8]  # the floor is a batch-1 figure


def test_cli_writes_summary_markdown_and_plot(host_dir, capsys):
    report = host_dir / "hosts" / "node1.json"
    report.parent.mkdir()
    report.write_text(json.dumps({"host": "node1", "roofline": {"floor_ms_per_token": 6.0}}))
    assert backend_ab.main([str(host_dir), "--report", str(report)]) == 0
    text = capsys.readouterr().out
    assert (host_dir / "summary.md").read_text() == text
    assert "| 1 | 12.50 (p90 12.90) | 15.00 (p90 15.80) | flashinfer_cutlass |" in text
    assert "| flashinfer_cutedsl | skipped | host node1: MoE runner backend flashinfer_cutedsl" in text
    assert json.loads((host_dir / "summary.json").read_text())["winners"][1]["winner"] == "triton"
    assert (host_dir / "decode.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    saved = json.loads(report.read_text())
    assert saved["roofline"] == {"floor_ms_per_token": 6.0}
    assert saved["benchmark"]["backend"] == "flashinfer_cutlass"
    assert saved["benchmark"]["ms_per_token"] == 12.5


def test_nothing_measured_says_so_and_draws_nothing(tmp_path, capsys):
    (tmp_path / "plan.json").write_text(json.dumps({
        "host": "lab1", "original_backend": "flashinfer_cutlass", "floor_ms_per_token": None,
        "backends": [{"backend": "flashinfer_cutlass", "status": "not_started",
                      "reason": "benchmark_start_server is false"}]}))
    assert backend_ab.main([str(tmp_path)]) == 0
    assert "No backend was measured." in capsys.readouterr().out
    assert not (tmp_path / "decode.png").exists()


def test_reads_what_the_benchmark_client_writes(tmp_path):
    with StandinSglang(max_requests=4) as srv:
        assert bench_client.main(["--url", srv.url, "--backend", "standin", "--out", str(tmp_path / "standin.json"),
                                  "--batch", "1,2", "--trials", "1", "--warmup", "0",
                                  "--max-new-tokens", "3"]) == 0
    (tmp_path / "plan.json").write_text(json.dumps({
        "host": "h", "original_backend": "standin", "floor_ms_per_token": None,
        "backends": [{"backend": "standin", "status": "measured", "reason": ""}]}))
    assert [r["winner"] for r in backend_ab.summarise(tmp_path)["winners"]] == ["standin", "standin"]
