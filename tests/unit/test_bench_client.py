"""Benchmark client against the loopback stand-in for sglang's /generate.

No wall-clock timing is asserted: where the arithmetic is checked, the client gets a fake
clock that advances a fixed step per reading.
"""
import io
import itertools
import json

import pytest

from infertune import bench_client, plot
from infertune.bench_client import Client
from sglang_server import StandinSglang

def stepping_clock(step):
    ticks = itertools.count()
    return lambda: next(ticks) * step

def test_request_asks_for_exact_token_count():
    with StandinSglang(max_requests=1) as srv:
        r = Client(srv.url).generate("one two three", 7)
    body = srv.requests[0]
    assert body["sampling_params"] == {"max_new_tokens": 7, "ignore_eos": True, "temperature": 0}
    assert body["stream"] is False
    assert (r["completion_tokens"], r["prompt_tokens"]) == (7, 3)
    assert r["ms_per_token"] == pytest.approx(1e3 * r["e2e_latency_s"] / 7)

def test_stream_times_first_token_and_decode():
    # One clock reading at the start and one per event: 10 ms apart each.
    with StandinSglang(max_requests=1) as srv:
        r = Client(srv.url, clock=stepping_clock(0.010)).generate_stream("hello", 5)
    assert srv.requests[0]["stream"] is True
    assert r["ttft_ms"] == pytest.approx(10)
    assert r["ms_per_token"] == pytest.approx(10)   # 4 tokens after the first in 40 ms
    assert r["completion_tokens"] == 5
    assert r["e2e_latency_s"] is not None           # from the final event's meta_info

def test_early_stop_is_an_error():
    """A server that stops before max_new_tokens would make ms/token meaningless."""
    with StandinSglang(max_requests=1) as srv:
        client = Client(srv.url)
        client._payload = lambda prompt, n, stream: {"text": prompt, "stream": stream,
                                                     "sampling_params": {"max_new_tokens": n}}
        with pytest.raises(RuntimeError, match="decoded 3 tokens, asked for 8"):
            client.generate_stream("x", 8)

def test_sweep_runs_warmup_and_trials_per_batch():
    with StandinSglang(max_requests=40) as srv:
        rows = bench_client.sweep(Client(srv.url), [1, 4], trials=3, warmup=1, prompt="p",
                                  max_new_tokens=4)
    assert len(srv.requests) == (1 + 3) * 1 + (1 + 3) * 4
    assert [r["batch"] for r in rows] == [1, 4]
    for row in rows:
        assert len(row["trials"]) == 3
        assert row["ms_per_token"]["n"] == 3
        assert set(row) >= {"ms_per_token", "ttft_ms", "tok_per_s"}

def test_summary_median_and_p90():
    s = bench_client.summary([10, 1, 2, 3, 4, 5, 6, 7, 8, 9])
    assert s["median"] == 5.5
    assert s["p90"] == pytest.approx(9.1)
    assert bench_client.summary([4.0])["p90"] == 4.0

def test_server_error_is_reported():
    with StandinSglang(max_requests=0) as srv:
        with pytest.raises(RuntimeError, match="503"):
            Client(srv.url).generate("x", 2)

def test_cli_writes_json_and_plot_reads_it(tmp_path):
    out = tmp_path / "a.json"
    with StandinSglang(max_requests=10) as srv:
        assert bench_client.main(["--url", srv.url, "--backend", "standin", "--out", str(out),
                                  "--batch", "1,2", "--trials", "2", "--warmup", "0",
                                  "--max-new-tokens", "3", "--no-stream"]) == 0
    data = json.loads(out.read_text())
    assert data["backend"] == "standin" and data["stream"] is False
    assert [r["batch"] for r in data["results"]] == [1, 2]
    assert "ttft_ms" not in data["results"][0]
    png = tmp_path / "plot.png"
    assert plot.main([str(out), "--floor-ms", "6.15", "--out", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    series = plot.load([out])
    assert series[0]["backend"] == "standin"
    assert [p[0] for p in series[0]["points"]] == [1, 2]


KEYED_RUN = ["--backend", "keyed", "--out", "-", "--batch", "1", "--trials", "1", "--warmup", "1",
             "--max-new-tokens", "2"]


def test_cli_prints_json_and_sends_the_api_key_from_standard_input(capsys, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO("s3cret\n"))
    with StandinSglang(max_requests=2, api_key="s3cret") as srv:
        assert bench_client.main(["--url", srv.url, "--api-key-file", "-", *KEYED_RUN]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["backend"] == "keyed"
    assert captured.err == ""
    with StandinSglang(max_requests=1, api_key="s3cret") as srv:
        with pytest.raises(RuntimeError, match="401"):
            Client(srv.url).generate("x", 2)


def test_api_key_from_a_private_file_only(tmp_path, capsys):
    key = tmp_path / "key"
    key.write_text("s3cret\n")
    key.chmod(0o600)
    with StandinSglang(max_requests=2, api_key="s3cret") as srv:
        assert bench_client.main(["--url", srv.url, "--api-key-file", str(key), *KEYED_RUN]) == 0
    key.chmod(0o640)
    with pytest.raises(SystemExit, match="readable by others"):
        bench_client.main(["--url", "http://127.0.0.1:9", "--api-key-file", str(key), *KEYED_RUN])


def test_api_key_is_never_taken_from_argv_or_the_environment(monkeypatch, capsys):
    for flag in ("--api-key", "--api-key=s3cret", "--api"):
        with pytest.raises(SystemExit):
            bench_client.main(["--url", "http://127.0.0.1:9", flag, "s3cret", *KEYED_RUN])
    monkeypatch.setenv("INFERTUNE_BENCH_API_KEY", "s3cret")
    monkeypatch.setenv("SGLANG_API_KEY", "s3cret")
    with StandinSglang(max_requests=1, api_key="s3cret") as srv:
        with pytest.raises(RuntimeError, match="401"):
            bench_client.main(["--url", srv.url, *KEYED_RUN])
