"""infertune.report: JUnit + host results (infertune_results) -> fleet.md / fleet.json."""
import json

from infertune import report

JUNIT = """<?xml version="1.0"?>
<testsuites><testsuite name="pytest">
 <testcase classname="tests.verify.test_pcie_mrrs" name="test_pcie_mrrs[ansible://gpu-01]"/>
 <testcase classname="tests.verify.test_pcie_mrrs" name="test_pcie_mrrs[ansible://gpu-02]">
  <failure message="Failed: gpu-02: MaxReadReq: ...">gpu-02: MaxReadReq: expected 4096, found 0000:41:00.0: 512</failure>
 </testcase>
 <testcase classname="tests.verify.test_pcie_mrrs" name="test_pcie_mrrs_untouched_elsewhere[ansible://gpu-02]"/>
 <testcase classname="tests.verify.test_cpu_power" name="test_cpufreq_governor[ansible://gpu-01]">
  <skipped type="pytest.skip" message="gpu-01: cpufreq governor: not applicable on this host: no cpufreq">x</skipped>
 </testcase>
 <testcase classname="tests.verify.test_cpu_power" name="test_cpufreq_epp[ansible://gpu-01]"/>
 <testcase classname="tests.verify.test_nvidia" name="test_gpu_count[ansible://root@gpu-02]">
  <error message="failed on setup with &quot;RuntimeError: ssh&quot;">Traceback (most recent call last): ...</error>
 </testcase>
 <testcase classname="tests.verify.test_new" name="test_hugepages[ansible://gpu-01]"/>
</testsuite></testsuites>
"""

FRAGMENT = {
    "host": "gpu-01", "written": "2026-11-30T10:00:00", "check_mode": False,
    "results": {
        "pcie_mrrs": {"before": {"0000:41:00.0": 512, "0000:42:00.0": 512},
                      "after": {"0000:41:00.0": 4096, "0000:42:00.0": 4096}, "changed": True, "applied": True},
        "kernel_cmdline": {"before": "quiet", "after": "quiet processor.max_cstate=1", "changed": True,
                           "applied": True},
        "reboot": {"before": "", "after": "not rebooted", "changed": False, "applied": True},
        "cpufreq": {"before": {"governor": {"powersave": 128}}, "after": {"governor": {"performance": 128}},
                    "changed": True, "applied": True},
        # Planned but not applied: the host was not in a batch yet.
        "numa_balancing": {"before": "1", "after": "0", "changed": True},
    },
}


def write(tmp_path):
    (tmp_path / "verify").mkdir()
    (tmp_path / "verify" / "all.xml").write_text(JUNIT)
    (tmp_path / "hosts").mkdir()
    (tmp_path / "hosts" / "gpu-01.json").write_text(json.dumps(FRAGMENT))


def test_junit_outcomes_per_host_and_test(tmp_path):
    write(tmp_path)
    results = report.read_junit([tmp_path / "verify" / "all.xml"])
    assert results["gpu-01"]["pcie_mrrs"] == {"status": "pass", "detail": ""}
    assert results["gpu-02"]["pcie_mrrs"]["status"] == "fail"
    assert results["gpu-02"]["pcie_mrrs"]["detail"] == "gpu-02: MaxReadReq: expected 4096, found 0000:41:00.0: 512"
    assert results["gpu-01"]["cpufreq_governor"]["status"] == "n/a"
    # An error keeps its one-line gist, not the traceback; user@ is not part of the host.
    assert results["gpu-02"]["gpu_count"] == {"status": "error", "detail": 'failed on setup with "RuntimeError: ssh"'}


def test_fleet_json_verdicts_and_changes(tmp_path):
    write(tmp_path)
    assert report.main(["--dir", str(tmp_path), "--hosts", "gpu-01,gpu-02,gpu-03"]) == 0
    fleet = json.loads((tmp_path / "fleet.json").read_text())
    assert fleet["summary"] == {"hosts": 3, "pass": 1, "fail": 1, "not verified": 1}
    one, two = fleet["hosts"]["gpu-01"], fleet["hosts"]["gpu-02"]
    assert one["result"] == "pass" and one["tuned_at"] == "2026-11-30T10:00:00"
    assert two["failing"] == ["pcie_mrrs", "gpus"]  # MaxReadReq: one check passed, one failed
    # A knob shows the worst of its checks: n/a governor + passing EPP -> pass.
    assert one["knobs"]["cpufreq"]["verify"] == "pass"
    assert one["knobs"]["pcie_mrrs"]["tuning"]["change"] == "512 on 2 → 4096 on 2"
    assert one["knobs"]["kernel_cmdline"]["tuning"]["change"] == "+processor.max_cstate=1"
    assert one["knobs"]["reboot"]["tuning"]["change"] == "not rebooted (unchanged)"
    assert one["knobs"]["cpufreq"]["tuning"]["change"] == "governor: powersave 128 → governor: performance 128"
    # A planned change is never shown as applied.
    assert one["knobs"]["numa_balancing"]["tuning"]["change"] == "would change: -1 +0"
    assert not one["knobs"]["numa_balancing"]["changed"]
    assert one["knobs"]["pcie_mrrs"]["changed"] and not one["knobs"]["gpus"]["changed"]
    # A test the catalog does not know yet still gets its own column.
    assert one["knobs"]["hugepages"]["verify"] == "pass"
    assert fleet["hosts"]["gpu-03"]["result"] == "not verified"


def test_markdown_summarises_before_details(tmp_path):
    write(tmp_path)
    report.main(["--dir", str(tmp_path)])
    text = (tmp_path / "fleet.md").read_text()
    head, details = text.split("## Per host", 1)
    assert "2 hosts: 1 pass, 1 fail, 0 not verified." in head
    assert "Needs attention: **gpu-02** (MaxReadReq, GPUs)" in head
    # kernel package, boot entry and command line (changed): their tests are not in this run.
    assert "| gpu-01 | pass | · | · | · ↻ |" in head
    assert "- gpu-02: MaxReadReq: expected 4096, found 0000:41:00.0: 512" in head
    assert '- gpu-02: GPUs: failed on setup with "RuntimeError: ssh"' in head
    assert "<summary>gpu-02: fail, no tuning record</summary>" in details
    assert "| MaxReadReq | 512 on 2 → 4096 on 2 | ✅  |" in details


def test_decode_floor_and_benchmark_in_the_report(tmp_path):
    write(tmp_path)
    host = tmp_path / "hosts" / "gpu-01.json"
    report.merge_into_host_report(host, "roofline", {
        "floor_ms_per_token": 6.15, "floor_tok_per_s": 162.6, "model": "GLM-5-NVFP4",
        "gpu": "NVIDIA RTX PRO 6000 Blackwell Server Edition", "tp": 8})
    report.merge_into_host_report(host, "benchmark", {
        "backend": "flashinfer_cutlass", "ms_per_token": 12.3, "measured_at": "2026-11-30T11:00:00"})
    assert json.loads(host.read_text())["results"] == FRAGMENT["results"]  # the rest is kept
    report.main(["--dir", str(tmp_path)])
    fleet = json.loads((tmp_path / "fleet.json").read_text())
    assert fleet["hosts"]["gpu-01"]["decode"]["of_floor_percent"] == 50.0
    assert fleet["hosts"]["gpu-02"]["decode"] is None
    head = (tmp_path / "fleet.md").read_text().split("## Per host", 1)[0]
    assert ("| gpu-01 | GLM-5-NVFP4 | 6.15 (8× NVIDIA RTX PRO 6000 Blackwell Server Edition) "
            "| flashinfer_cutlass | 12.30 | 50% |") in head


def test_a_check_run_is_recorded_as_a_plan_never_as_applied(tmp_path):
    write(tmp_path)
    host = tmp_path / "hosts" / "gpu-01.json"
    report.merge_into_host_report(host, "benchmark", {"backend": "flashinfer_cutlass", "ms_per_token": 12.3,
                                                      "measured_at": "2026-11-30T11:00:00"})
    planned = {"pcie_mrrs": {"before": {"0000:41:00.0": 512}, "after": {"0000:41:00.0": 4096}, "changed": True,
                             "applied": True}}
    report.record(tmp_path / "hosts", {"gpu-01": {"results": planned, "check_mode": True},
                                       "gpu-02": {"results": None, "check_mode": True}})
    fragment = json.loads(host.read_text())
    assert fragment["check_mode"] and fragment["benchmark"]["ms_per_token"] == 12.3
    assert not (tmp_path / "hosts" / "gpu-02.json").exists()
    fleet = report.build(report.read_fragments(tmp_path / "hosts"), {})
    mrrs = fleet["hosts"]["gpu-01"]["knobs"]["pcie_mrrs"]
    assert mrrs["tuning"]["change"] == "would change: 512 on 1 → 4096 on 1" and not mrrs["changed"]
