"""infertune.interconnect and the benchmark role's interconnect step.

The fixtures are real output (tests/unit/fixtures/interconnect/SOURCES.md says from where),
trimmed but byte for byte in format: the tabs of the connectivity matrix, the trailing blanks,
MPI chatter inside the all_reduce_perf table.
"""
import json
import subprocess
import sys

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

from fakehost import REPO
from roletemplates import trusted
from infertune import interconnect

FIXTURES = REPO / "tests" / "unit" / "fixtures" / "interconnect"
ROLE = REPO / "roles" / "benchmark"


def text(name):
    return (FIXTURES / name).read_text()


def test_p2p_matrices_of_an_nvlink_host():
    p2p = interconnect.parse_p2p(text("p2p_a100_nvlink_8gpu.txt"))
    assert p2p["gpus"] == 8 and p2p["devices"] == ["NVIDIA A100-SXM4-80GB"] * 8
    assert p2p["connectivity"] == [[1] * 8] * 8 and p2p["pairs_without_p2p"] == []
    assert set(p2p["unidirectional_gbps"]) == set(p2p["bidirectional_gbps"]) == {"p2p_enabled", "p2p_disabled"}
    assert p2p["unidirectional_gbps"]["p2p_disabled"][0][0] == 1524.39
    assert p2p["unidirectional_gbps"]["p2p_enabled"][1][2] == 273.70
    assert p2p["bidirectional_gbps"]["p2p_enabled"][7] == [427.34, 519.37, 516.10, 517.83, 518.19, 519.74, 519.38,
                                                           1592.76]
    # The GPU rows only: the CPU rows under them (5.39 here) are not latency between GPUs.
    assert p2p["latency_us"]["p2p_disabled"][0][1] == 18.16
    assert len(p2p["latency_us"]["p2p_enabled"]) == 8
    assert p2p["min_peer_bidirectional_gbps"] == 424.32 and p2p["min_peer_bidirectional_pair"] == [0, 3]
    assert p2p["min_peer_unidirectional_gbps"] == 269.59
    assert p2p["max_peer_latency_us"] == 3.33
    json.dumps(p2p, allow_nan=False)


def test_p2p_between_gpus_that_cannot_reach_each_other():
    p2p = interconnect.parse_p2p(text("p2p_rtx4090_pcie_no_p2p.txt"))
    assert p2p["connectivity"] == [[1, 0], [0, 1]]
    assert p2p["pairs_without_p2p"] == [[0, 1]]
    assert p2p["latency_us"]["p2p_enabled"] == [[1.33, 13.10], [11.59, 1.30]]
    assert p2p["min_peer_bidirectional_gbps"] == 28.90 and p2p["min_peer_bidirectional_pair"] == [1, 0]
    assert p2p["max_peer_latency_us"] == 13.10


def test_p2p_excerpt_gives_what_it_has():
    # 6 GPUs, the cross-NUMA GPU 3 the slow one, as the RTX PRO 6000 notes show it.
    p2p = interconnect.parse_p2p(text("p2p_rtx_pro_6000_excerpt.txt"))
    assert p2p["gpus"] == 6
    assert p2p["min_peer_bidirectional_gbps"] == 99.09 and p2p["min_peer_bidirectional_pair"] == [3, 4]
    assert p2p["min_peer_unidirectional_gbps"] == 50.16
    assert p2p["latency_us"] == {} and p2p["max_peer_latency_us"] is None
    assert p2p["connectivity"] is None and p2p["pairs_without_p2p"] is None


def test_p2p_of_a_single_gpu_has_no_peers():
    # The current cuda-samples' output, run for these tests on one H200.
    p2p = interconnect.parse_p2p(text("p2p_h200_1gpu.txt"))
    assert p2p["gpus"] == 1 and p2p["connectivity"] == [[1]] and p2p["devices"] == ["NVIDIA H200"]
    assert p2p["bidirectional_gbps"] == {"p2p_disabled": [[4114.21]], "p2p_enabled": [[4112.86]]}
    assert p2p["min_peer_bidirectional_gbps"] is None and p2p["min_peer_bidirectional_pair"] is None
    assert interconnect.summary({"p2p": {"status": "measured", **p2p}}) == ["P2P: 1 GPU"]


@pytest.mark.parametrize("old, new, group, keys", [
    # CUDA releases before the Writes/Reads variants, and --p2p_read.
    ("Unidirectional P2P=Enabled Bandwidth (P2P Writes) Matrix", "Unidirectional P2P=Enabled Bandwidth Matrix",
     "unidirectional_gbps", {"p2p_enabled": 22.36, "p2p_disabled": 22.61}),
    ("P2P=Enabled Latency (P2P Writes) Matrix", "P2P=Enabled Latency (P2P Reads) Matrix",
     "latency_us", {"p2p_enabled_reads": 11.59, "p2p_disabled": 11.44}),
])
def test_p2p_title_variants(old, new, group, keys):
    p2p = interconnect.parse_p2p(text("p2p_rtx4090_pcie_no_p2p.txt").replace(old, new))
    assert {key: matrix[1][0] for key, matrix in p2p[group].items()} == keys


@pytest.mark.parametrize("output, message", [
    ("", "no P2P bandwidth or latency matrix"),
    ("Segmentation fault (core dumped)\n\x00\xff", "no P2P bandwidth or latency matrix"),
    (text("all_reduce_h100_sweep.txt"), "no P2P bandwidth or latency matrix"),
    # Cut short inside a matrix, as a killed run leaves it.
    (text("p2p_a100_nvlink_8gpu.txt").split("     3 425.89")[0],
     r"'Bidirectional P2P=Enabled Bandwidth Matrix \(GB/s\)': 3 of 8 GPU rows readable"),
    ("Bidirectional P2P=Enabled Bandwidth Matrix (GB/s)\nno header\n", "no header of GPU numbers"),
    (text("p2p_rtx4090_pcie_no_p2p.txt") + text("p2p_rtx_pro_6000_excerpt.txt"), r"disagree .*\[2, 6\]"),
    (text("p2p_rtx4090_pcie_no_p2p.txt").replace("22.36", "nan"), "1 of 2 GPU rows readable"),
])
def test_unreadable_p2p_output_says_why(output, message):
    with pytest.raises(interconnect.Unreadable, match=message):
        interconnect.parse_p2p(output)


def test_all_reduce_sweep():
    result = interconnect.parse_all_reduce(text("all_reduce_h100_sweep.txt"))
    assert result["avg_busbw_gbps"] == 70.742
    assert result["peak_busbw_gbps"] == 338.82 and result["peak_size_bytes"] == 8 * 2 ** 30
    assert result["wrong"] == 0 and result["out_of_bounds"] == 0 and result["ranks"] == 16
    assert [row["size_bytes"] for row in result["rows"]] == [2 ** k for k in range(3, 34)]
    assert result["rows"][0] == {
        "size_bytes": 8, "type": "float", "redop": "sum",
        "out_of_place": {"time_us": 135.8, "algbw_gbps": 0.0, "busbw_gbps": 0.0, "wrong": 0.0},
        "in_place": {"time_us": 123.5, "algbw_gbps": 0.0, "busbw_gbps": 0.0, "wrong": 0.0}}
    json.dumps(result, allow_nan=False)


def test_all_reduce_wrong_values_are_counted():
    result = interconnect.parse_all_reduce(text("all_reduce_gh200_wrong_values.txt"))
    assert result["wrong"] == 96 + 32 and result["out_of_bounds"] == 4
    assert result["peak_busbw_gbps"] == 22.87 and result["peak_size_bytes"] == 134217728
    assert result["avg_busbw_gbps"] == 4.79995 and result["nccl_version"] == "2.29.2"


def test_all_reduce_reads_past_mpi_chatter_and_takes_the_in_place_peak():
    result = interconnect.parse_all_reduce(text("all_reduce_rtx6000d_mpi_noise.txt"))
    assert len(result["rows"]) == 24 and result["nccl_tests_version"] == "2.18.3"
    assert result["nccl_version"] == "2.30.3+cuda13.0"  # NCCL's own line says more than the code
    assert result["peak_busbw_gbps"] == 49.61 and result["peak_size_bytes"] == 8589934592


def test_all_reduce_without_validation_has_no_wrong_count():
    # nccl-tests 2.19.6 with -c 0, run for these tests on one H200.
    result = interconnect.parse_all_reduce(text("all_reduce_h200_no_validation.txt"))
    assert result["wrong"] is None and len(result["rows"]) == 18
    assert result["rows"][-1]["in_place"]["wrong"] is None
    assert result["nccl_tests_version"] == "2.19.6" and result["nccl_version"] == "2.28.9"


@pytest.mark.parametrize("output, message", [
    (text("all_reduce_gh200_gpus_busy.txt"), "no result rows.*: gpu-1-1: Test CUDA failure .*busy or unavailable"),
    (text("all_reduce_h200_too_many_gpus.txt"), "no result rows.*: Invalid number of GPUs: 2 requested but only 1"),
    ("", "no result rows"),
    (text("p2p_a100_nvlink_8gpu.txt"), "no result rows"),
    (text("all_reduce_h100_sweep.txt").split("# Out of bounds")[0], "31 result rows but no '# Avg bus bandwidth'"),
    (text("all_reduce_h100_sweep.txt").split("338.82")[0], "result row without a bus bandwidth"),
    ("#  size count type redop root time algbw busbw #wrong\n", "header is not all_reduce_perf's"),
])
def test_unreadable_all_reduce_output_says_why(output, message):
    with pytest.raises(interconnect.Unreadable, match=message):
        interconnect.parse_all_reduce(output)


def test_records_say_what_happened(tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    assert interconnect.record("p2p", missing=True) == {"status": "not installed"}
    wrong = interconnect.record("all_reduce", FIXTURES / "all_reduce_gh200_wrong_values.txt", failed="exit status 1")
    assert wrong["status"] == "measured" and wrong["warning"] == "exit status 1" and wrong["wrong"] == 128
    busy = interconnect.record("all_reduce", FIXTURES / "all_reduce_gh200_gpus_busy.txt", failed="exit status 1")
    assert busy["status"] == "failed"
    assert busy["warning"].startswith("exit status 1; no result rows") and "busy or unavailable" in busy["warning"]
    unreadable = interconnect.record("p2p", empty)
    assert unreadable["status"] == "unreadable" and unreadable["warning"].startswith("no P2P bandwidth")
    assert set(unreadable) == {"status", "warning"}  # no figures, no output to point at
    assert interconnect.record("p2p", tmp_path / "absent.txt")["status"] == "unreadable"


def test_cli_merges_into_the_host_report_and_keeps_the_rest(tmp_path, capsys):
    report = tmp_path / "hosts" / "gpu-01.json"
    report.parent.mkdir()
    before = {"host": "gpu-01", "roofline": {"floor_ms_per_token": 6.15}, "results": {"numa_balancing": {}},
              "interconnect": {"p2p": {"status": "measured", "gpus": 4}}}
    report.write_text(json.dumps(before))
    assert interconnect.main(["--p2p", str(FIXTURES / "p2p_a100_nvlink_8gpu.txt"),
                              "--not-installed", "all_reduce", "--report", str(report)]) == 0
    saved = json.loads(report.read_text())
    assert {k: saved[k] for k in ("host", "roofline", "results")} == {k: before[k] for k in ("host", "roofline",
                                                                                             "results")}
    # The earlier measurement is replaced, not merged with.
    assert set(saved["interconnect"]) == {"measured_at", "p2p", "all_reduce"}
    assert saved["interconnect"]["p2p"]["min_peer_bidirectional_gbps"] == 424.32
    assert saved["interconnect"]["all_reduce"] == {"status": "not installed"}
    assert capsys.readouterr().out.splitlines() == [
        "P2P: 8 GPUs, lowest peer bidirectional 424.3 GB/s (GPUs 0 and 3)", "all-reduce: not installed"]


# --- the role's step, through Ansible's own templating ----------------------------------------


def task(name):
    """A task of interconnect.yml by name, blocks included."""
    tasks = yaml.safe_load((ROLE / "tasks" / "interconnect.yml").read_text())
    tasks += [inner for t in tasks for inner in t.get("block", [])]
    return trusted(next(t for t in tasks if t["name"] == name))


def templar(tmp_path, **extra):
    values = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    values.update(yaml.safe_load((ROLE / "vars" / "main.yml").read_text()))
    values.update(report_dir=str(tmp_path), inventory_hostname="gpu-01",
                  sglang_moe_runner_backend="flashinfer_cutlass", sglang_nccl_environment={"NCCL_P2P_LEVEL": "SYS"},
                  sglang_environment={"NCCL_MIN_NCHANNELS": "8", "HF_HOME": "/cache"},
                  infertune_gpus=[{"name": "NVIDIA RTX PRO 6000 Blackwell Server Edition"}] * 8,
                  ansible_playbook_python=sys.executable, __benchmark_host_path={"stdout": "/usr/sbin:/usr/bin"},
                  **extra)
    return Templar(loader=DataLoader(), variables=trusted(values))


def render(tmp_path, expression, **extra):
    """An expression of the role as the play evaluates it on the host gpu-01 (8 GPUs)."""
    return templar(tmp_path, **extra).template(trust_as_template(expression))


def test_a_bare_name_is_looked_for_in_path_and_the_usual_places_a_path_is_taken_as_it_is(tmp_path):
    candidates = render(tmp_path, "{{ benchmark_tool_candidates }}",
                        benchmark_all_reduce_path="/opt/x/all_reduce_perf")
    assert [c["path"] for c in candidates if c["tool"] == "p2p"] == [
        "/usr/sbin/p2pBandwidthLatencyTest", "/usr/bin/p2pBandwidthLatencyTest",
        "/usr/local/cuda/extras/demo_suite/p2pBandwidthLatencyTest", "/usr/local/bin/p2pBandwidthLatencyTest",
        "/opt/nccl-tests/build/p2pBandwidthLatencyTest"]
    assert [c for c in candidates if c["tool"] == "all_reduce"] == [{"tool": "all_reduce",
                                                                     "path": "/opt/x/all_reduce_perf"}]


def test_the_first_executable_file_found_is_run_with_sglangs_nccl_settings(tmp_path):
    candidates = render(tmp_path, "{{ benchmark_tool_candidates }}")
    on_host = {"/usr/bin/p2pBandwidthLatencyTest": {"isreg": False, "executable": True},  # a directory
               "/usr/local/cuda/extras/demo_suite/p2pBandwidthLatencyTest": {"isreg": True, "executable": True},
               "/usr/sbin/all_reduce_perf": {"isreg": True, "executable": False},
               "/usr/local/bin/all_reduce_perf": {"isreg": True, "executable": True},
               "/opt/nccl-tests/build/all_reduce_perf": {"isreg": True, "executable": True}}
    stat = {"results": [{"item": c, "stat": {"exists": True, **on_host[c["path"]]} if c["path"] in on_host
                         else {"exists": False}} for c in candidates]}
    found = render(tmp_path, task("Take the first executable found for each tool")["ansible.builtin.set_fact"]
                   ["__benchmark_tools_found"], __benchmark_tool_stat=stat)
    assert found == {"p2p": "/usr/local/cuda/extras/demo_suite/p2pBandwidthLatencyTest",
                     "all_reduce": "/usr/local/bin/all_reduce_perf"}
    # What a link points to is judged, not the link.
    assert task("Look for the interconnect tools on the host")["ansible.builtin.stat"]["follow"] is True
    run = task("Measure the interconnect with the tools found")
    argv = render(tmp_path, run["ansible.builtin.command"]["argv"], __benchmark_tools_found=found, item="all_reduce")
    assert argv == ["timeout", "--kill-after=30", "600", "/usr/local/bin/all_reduce_perf",
                    "-b", "8", "-e", "256M", "-f", "2", "-g", "8"]
    assert render(tmp_path, run["environment"]) == {"NCCL_P2P_LEVEL": "SYS", "NCCL_MIN_NCHANNELS": "8"}
    assert render(tmp_path, run["timeout"]) == 660
    argv = render(tmp_path, run["ansible.builtin.command"]["argv"], __benchmark_tools_found=found, item="all_reduce",
                  benchmark_all_reduce_args=["-b", "1M", "-e", "1G", "-g", "4"])
    assert argv[4:] == ["-b", "1M", "-e", "1G", "-g", "4"]


def test_the_recorded_runs_reach_the_host_report(tmp_path):
    """The command line the role builds, run as the role runs it: a timed-out P2P run with its
    output, an all-reduce that ran, and what the report then says."""
    results = tmp_path / "benchmark" / "gpu-01"
    results.mkdir(parents=True)
    (results / "p2p.txt").write_text(text("p2p_a100_nvlink_8gpu.txt").split("     3 425.89")[0])
    (results / "all_reduce.txt").write_text(text("all_reduce_h100_sweep.txt"))
    runs = {"results": [{"item": "p2p", "rc": 124, "stderr_lines": ["a", "b", "c", "d"]},
                        {"item": "all_reduce", "rc": 0, "stderr_lines": []}]}
    argv = render(tmp_path, task("Write the interconnect measurement into the host report")
                  ["ansible.builtin.command"]["argv"], __benchmark_interconnect_runs=runs,
                  __benchmark_tools_found={"p2p": "/x/p2p", "all_reduce": "/x/ar"})
    assert argv[argv.index("--p2p-failed") + 1] == "exit status 124, timed out after 600 s: b / c / d"
    subprocess.run(argv, cwd=REPO, check=True, capture_output=True)
    saved = json.loads((tmp_path / "hosts" / "gpu-01.json").read_text())["interconnect"]
    assert saved["p2p"]["status"] == "failed" and saved["p2p"]["warning"].startswith("exit status 124, timed out")
    assert saved["all_reduce"]["peak_busbw_gbps"] == 338.82
    # A run the task timeout ended has no exit status; a tool not found is recorded as such.
    argv = render(tmp_path, task("Write the interconnect measurement into the host report")
                  ["ansible.builtin.command"]["argv"],
                  __benchmark_interconnect_runs={"results": [{"item": "all_reduce", "failed": True,
                                                            "msg": "Task failed: timed out"}]},
                  __benchmark_tools_found={"all_reduce": "/x/ar"})
    assert argv[5:] == ["--not-installed", "p2p", "--all-reduce", str(results / "all_reduce.txt"),
                        "--all-reduce-failed", "Task failed: timed out"]
