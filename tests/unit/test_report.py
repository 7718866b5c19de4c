"""infertune.report: JUnit + host results (infertune_results) -> fleet.md / fleet.json."""
import importlib.util
import json
from datetime import datetime, timedelta
from pathlib import Path
from types import SimpleNamespace

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
        "sysctl": {"before": {"kernel.numa_balancing": "1"}, "after": {"kernel.numa_balancing": "0"}, "changed": True},
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
    assert fleet["summary"] == {"hosts": 3, "pass": 1, "fail": 1, "not verified": 1,
                                  "failed": {"gpu-02": "verify"}}
    one, two = fleet["hosts"]["gpu-01"], fleet["hosts"]["gpu-02"]
    assert one["result"] == "pass" and one["tuned_at"] == "2026-11-30T10:00:00"
    assert two["failing"] == ["pcie_mrrs", "gpus"]  # MaxReadReq: one check passed, one failed
    # A knob shows the worst of its checks: n/a governor + passing EPP -> pass.
    assert one["knobs"]["cpufreq"]["verify"] == "pass"
    assert one["knobs"]["pcie_mrrs"]["tuning"]["change"] == "512 bytes on 2 devices → 4096 bytes on 2 devices"
    assert one["knobs"]["kernel_cmdline"]["tuning"]["change"] == "added processor.max_cstate=1"
    assert one["knobs"]["reboot"]["tuning"]["change"] == "not rebooted (unchanged)"
    assert one["knobs"]["cpufreq"]["tuning"]["change"] == "governor powersave on 128 CPUs → governor performance on 128 CPUs"
    # A planned change is never shown as applied.
    assert one["knobs"]["sysctl"]["tuning"]["change"] == "would change: kernel.numa_balancing: 1 → 0"
    assert not one["knobs"]["sysctl"]["changed"]
    assert one["knobs"]["pcie_mrrs"]["changed"] and not one["knobs"]["gpus"]["changed"]
    # A test the catalog does not know yet still gets its own column.
    assert one["knobs"]["hugepages"]["verify"] == "pass"
    assert fleet["hosts"]["gpu-03"]["result"] == "not verified"


def test_markdown_summarises_before_details(tmp_path):
    write(tmp_path)
    report.main(["--dir", str(tmp_path)])
    text = (tmp_path / "fleet.md").read_text()
    head, details = text.split("## Per host", 1)
    assert "2 hosts: 1 pass, 1 fail (gpu-02 in stage verify), 0 not verified." in head
    assert "Needs attention: **gpu-02** (MaxReadReq, GPUs)" in head
    # kernel package, boot entry, kernel hold and command line (changed): their tests are not in this run.
    assert "| gpu-01 | pass | · | · | · | · ↻ |" in head
    assert "- gpu-02: MaxReadReq: expected 4096, found 0000:41:00.0: 512" in head
    assert '- gpu-02: GPUs: failed on setup with "RuntimeError: ssh"' in head
    assert "<summary>gpu-02: fail, no tuning record</summary>" in details
    assert "| MaxReadReq | 512 bytes on 2 devices → 4096 bytes on 2 devices | ✅  |" in details


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
    assert mrrs["tuning"]["change"] == "would change: 512 bytes on 1 device → 4096 bytes on 1 device" and not mrrs["changed"]


def test_every_host_not_verified_says_how_far_the_run_took_it_and_why(tmp_path):
    write(tmp_path)
    ran = {"verify": False, "check_mode": False, "results": {"drain": {"changed": True, "applied": True}}}
    run = {
        "gpu-01": {"verify": True, "results": FRAGMENT["results"], "rollout": {"stage": "verify"}},
        "gpu-03": {**ran, "rollout": {"stage": "reboot", "drained": True, "rebooted": False, "failure": ""}},
        "gpu-04": {**ran, "rollout": {"stage": "drain", "drained": False, "rebooted": False,
                                      "failure": "Stop unless the in-flight requests could be counted: host gpu-04:"
                                                 " cannot count\nsecond line"}},
    }
    report.write(tmp_path, ["gpu-01", "gpu-02", "gpu-03", "gpu-04"], run)
    hosts = json.loads((tmp_path / "fleet.json").read_text())["hosts"]
    assert hosts["gpu-01"]["reason"] == ""
    assert hosts["gpu-02"]["reason"] == "knobs off: MaxReadReq, GPUs"
    assert hosts["gpu-03"]["rollout"] == {"stage": "reboot", "drained": True, "rebooted": False}
    assert hosts["gpu-03"]["reason"] == "failed or unreachable in stage reboot (the run's output names the task)"
    assert hosts["gpu-04"]["reason"] == ("failed in stage drain: Stop unless the in-flight requests could be counted:"
                                         " host gpu-04: cannot count")
    head = (tmp_path / "fleet.md").read_text().split("## Per host", 1)[0]
    assert ("**gpu-03** (not verified: failed or unreachable in stage reboot (the run's output names the task);"
            " drained)") in head
    assert "**gpu-04** (fail: failed in stage drain: Stop unless" in head


def test_a_record_of_a_check_or_earlier_run_never_reads_as_tuned(tmp_path):
    write(tmp_path)
    # gpu-02's only record is from an earlier --check run that planned a reboot.
    (tmp_path / "hosts" / "gpu-02.json").write_text(json.dumps({
        "host": "gpu-02", "written": "2026-11-29T09:00:00", "check_mode": True,
        "results": {"reboot": {"before": "kernel", "after": "rebooted", "changed": True, "applied": False}}}))
    # gpu-03 was planned in this run, then lost before anything was applied.
    report.record(tmp_path / "hosts", {"gpu-03": {"results": {"sysctl": {"changed": True, "applied": False,
                                                                                  "before": "1", "after": "0"}}}})
    run = {"gpu-02": {"verify": False, "results": None, "rollout": {"stage": "plan", "failure": ""}},
           "gpu-03": {"verify": False, "results": {}, "rollout": {"stage": "boot config", "failure": ""}}}
    report.write(tmp_path, ["gpu-01", "gpu-02", "gpu-03"], run)
    details = (tmp_path / "fleet.md").read_text().split("## Per host", 1)[1]
    assert "<summary>gpu-01: pass, tuned 2026-11-30T10:00:00</summary>" in details
    assert ("<summary>gpu-02: fail, checked 2026-11-29T09:00:00 under --check, nothing applied (an earlier run)"
            "</summary>") in details
    assert "<summary>gpu-03: not verified, planned " in details and ", nothing applied</summary>" in details
    assert "| reboot | would change: reboot needed: kernel → rebooted |" in details
    assert "tuned 2026-11-29" not in details
    hosts = json.loads((tmp_path / "fleet.json").read_text())["hosts"]
    assert not hosts["gpu-02"]["knobs"]["reboot"]["changed"]


def test_acs_and_the_fabric_gates_have_their_rows(tmp_path):
    fragment = dict(FRAGMENT, results={
        "pcie_acs": {"before": {"0000:10:01.1": "0x001d", "0000:12:00.0": "0x001d"},
                     "after": {"0000:10:01.1": "0x0011", "0000:12:00.0": "0x0011"}, "changed": True, "applied": True},
        "fabric": {"before": None, "after": "PCIe fabric of 8 GPU(s): width, speed, bar1 pass; AER 0000:13:00.0:"
                                            " correctable 3", "changed": False}})
    (tmp_path / "hosts").mkdir()
    (tmp_path / "hosts" / "gpu-01.json").write_text(json.dumps(fragment))
    assert report.main(["--dir", str(tmp_path), "--hosts", "gpu-01"]) == 0
    fleet = json.loads((tmp_path / "fleet.json").read_text())
    knobs = fleet["hosts"]["gpu-01"]["knobs"]
    assert knobs["pcie_acs"]["label"] == "ACS redirect"
    assert knobs["pcie_acs"]["tuning"]["change"] == "redirect on (0x001d) on 2 ports → redirect off (0x0011) on 2 ports"
    assert knobs["fabric"]["label"] == "PCIe fabric"
    assert "AER 0000:13:00.0: correctable 3" in knobs["fabric"]["tuning"]["change"]
    assert "PCIe fabric" in (tmp_path / "fleet.md").read_text()


def test_a_rising_aer_count_is_a_warning_in_the_fabric_row(tmp_path):
    def run(aer):
        fabric = {"changed": False, "before": None, "after": "PCIe fabric of 8 GPU(s): width, speed, bar1 pass",
                  "aer": aer}
        report.record(tmp_path / "hosts", {"gpu-01": {"results": {"fabric": fabric}, "check_mode": False}})
        return json.loads((tmp_path / "hosts" / "gpu-01.json").read_text())["results"]["fabric"]

    assert "aer_rising" not in run({"0000:13:00.0": {"correctable": 3, "fatal": 0}})
    assert "aer_rising" not in run({"0000:13:00.0": {"correctable": 3, "fatal": 0}})
    risen = run({"0000:13:00.0": {"correctable": 7, "fatal": 0}, "0000:14:00.0": {"correctable": 1}})
    assert risen["aer_rising"] == ["0000:13:00.0 correctable 3 → 7"]
    assert risen["after"].startswith("warning: AER counters rose: 0000:13:00.0 correctable 3 → 7; PCIe fabric")
    # Counters start again at zero after a reboot: lower is no warning.
    assert "aer_rising" not in run({"0000:13:00.0": {"correctable": 0}})


def test_interconnect_measurement_in_the_report_and_kept_by_a_tuning_run(tmp_path):
    write(tmp_path)
    hosts = tmp_path / "hosts"
    report.merge_into_host_report(hosts / "gpu-01.json", "interconnect", {
        "measured_at": "2026-11-30T11:00:00",
        "p2p": {"status": "measured", "gpus": 8, "min_peer_bidirectional_gbps": 99.09, "pairs_without_p2p": []},
        "all_reduce": {"status": "measured", "avg_busbw_gbps": 20.827, "peak_busbw_gbps": 49.61,
                       "peak_size_bytes": 8589934592, "wrong": 4, "warning": "exit status 1"}})
    report.merge_into_host_report(hosts / "gpu-02.json", "interconnect", {
        "measured_at": "2026-11-30T11:00:00", "p2p": {"status": "not installed"},
        "all_reduce": {"status": "failed", "warning": "exit status 1; no result rows"}})
    # site.yml rewrites the host's tuning record: the measurement stays.
    report.record(hosts, {"gpu-01": {"results": FRAGMENT["results"], "check_mode": False}})
    report.main(["--dir", str(tmp_path), "--hosts", "gpu-01,gpu-02,gpu-03"])
    fleet = json.loads((tmp_path / "fleet.json").read_text())
    one = fleet["hosts"]["gpu-01"]["interconnect"]
    assert one["min_peer_bidirectional_gbps"] == 99.09 and one["peak_size_bytes"] == 8589934592
    assert one["notes"] == ["all-reduce: measured (exit status 1)", "all-reduce: 4 wrong values"]
    assert fleet["hosts"]["gpu-03"]["interconnect"] is None
    head = (tmp_path / "fleet.md").read_text().split("## Per host", 1)[0]
    assert ("| gpu-01 | 8 | 99.1 GB/s | 20.8 / 49.6 GB/s "
            "| all-reduce: measured (exit status 1); all-reduce: 4 wrong values |") in head
    assert "| gpu-02 | — | — | — | P2P: not installed; all-reduce: failed (exit status 1; no result rows) |" in head
    assert "| gpu-03 |" not in head.split("## GPU interconnect", 1)[1]


def test_the_drain_row_lists_the_load_balancer_hooks_that_ran(tmp_path):
    write(tmp_path)
    drain = {"before": "active", "after": "stopped", "changed": True, "applied": True, "msg": "drained and stopped",
             "hooks": ["before_drain"]}  # the host failed after its drain: out of the balancer
    (tmp_path / "hosts" / "gpu-01.json").write_text(json.dumps(dict(FRAGMENT, results={"drain": drain})))
    assert report.main(["--dir", str(tmp_path), "--hosts", "gpu-01"]) == 0
    fleet = json.loads((tmp_path / "fleet.json").read_text())
    assert fleet["hosts"]["gpu-01"]["knobs"]["drain"]["tuning"]["hooks"] == ["before_drain"]
    assert "| drain | sglang.service: active → stopped; hooks: before_drain |" in (tmp_path / "fleet.md").read_text()


def test_a_host_the_run_failed_reads_as_what_was_done_not_as_tuned(tmp_path):
    """A before-drain hook refused: the boot entry was written, the host never drained."""
    write(tmp_path)
    boot = {"changed": True, "applied": True, "before": "6.1.0-57-amd64", "after": "6.12.95+deb12-amd64"}
    results = {"boot_kernel": boot, "sysctl": {"changed": True, "applied": False}}
    failure = "Run the hook: before_drain hook /usr/local/bin/lb remove exited 1: lb refused to remove gpu-01"
    run = {"gpu-01": {"verify": False, "results": results,
                      "rollout": {"stage": "boot config", "failure": failure, "drained": False, "rebooted": False}}}
    report.record(tmp_path / "hosts", run)
    report.write(tmp_path, ["gpu-01"], run)
    host = json.loads((tmp_path / "fleet.json").read_text())["hosts"]["gpu-01"]
    assert host["result"] == "fail" and host["reason"] == f"failed in stage boot config: {failure}"
    assert host["record"].startswith("stopped in stage boot config ")
    assert host["record"].endswith(" (not drained, not rebooted): changed boot_kernel")
    assert "tuned" not in host["record"]


def test_failed_and_lost_hosts_are_failed_with_their_stage(tmp_path):
    """A stopped rollout: one host failed its driver proof, one was lost mid-stage, one failed
    its plan, two were left out. Failed and lost hosts are failed, with their stage, in the
    summary line and fleet.json; the hosts left out are not verified."""
    write(tmp_path)
    stopped = "the rollout stopped before this host's batch: 2 host(s) failed"
    run = {
        "gpu-01": {"verify": True, "results": FRAGMENT["results"], "rollout": {"stage": "verify"}},
        "gpu-03": {"verify": False, "results": {}, "rollout": {"stage": "boot config", "failure": "Prove it: no nvidia.ko"}},
        "gpu-04": {"verify": False, "results": {}, "rollout": {"stage": "runtime", "failure": "", "lost": True}},
        "gpu-05": {"verify": False, "results": {}, "rollout": {"stage": "plan", "failure": "gpu-05: MoE backend"}},
        "gpu-06": {"verify": False, "results": None, "rollout": {"stage": "plan", "failure": "", "stopped": stopped}},
        "gpu-07": {"verify": False, "results": None, "rollout": {"stage": "plan", "failure": "", "stopped": stopped}},
    }
    line = report.write(tmp_path, sorted(run), run)
    counted = ("1 pass, 3 fail (gpu-03 in stage boot config, gpu-04 in stage runtime, gpu-05 in stage plan),"
               " 2 not verified")
    assert line.endswith(f"6 hosts, {counted}")
    assert f"6 hosts: {counted}." in (tmp_path / "fleet.md").read_text()
    fleet = json.loads((tmp_path / "fleet.json").read_text())
    assert fleet["summary"] == {"hosts": 6, "pass": 1, "fail": 3, "not verified": 2,
                                "failed": {"gpu-03": "boot config", "gpu-04": "runtime", "gpu-05": "plan"}}
    assert fleet["hosts"]["gpu-04"]["reason"] == "unreachable in stage runtime (the run's output names the task)"
    assert fleet["hosts"]["gpu-05"]["reason"] == "failed in stage plan: gpu-05: MoE backend"
    assert fleet["hosts"]["gpu-06"]["result"] == "not verified" and fleet["hosts"]["gpu-06"]["reason"] == stopped


def test_a_host_lost_with_its_task_reads_unreachable_in_its_stage(tmp_path):
    write(tmp_path)
    run = {"gpu-01": {"verify": False, "results": None,
                      "rollout": {"stage": "runtime", "unreachable": "Apply the runtime knobs: ssh: no route\nmore"}}}
    # This run verified nothing: an earlier run's JUnit (gpu-01 passed) is not read.
    report.write(tmp_path, ["gpu-01"], run, verified=False)
    entry = json.loads((tmp_path / "fleet.json").read_text())["hosts"]["gpu-01"]
    assert entry["result"] == "fail"
    assert entry["reason"] == "unreachable in stage runtime: Apply the runtime knobs: ssh: no route"


def test_an_earlier_report_is_marked_not_current_at_a_run_start(tmp_path):
    assert report.mark_earlier(tmp_path, "2026-12-03T10:00:00+00:00") is False
    write(tmp_path)
    report.write(tmp_path, ["gpu-01"])
    assert report.mark_earlier(tmp_path, "2026-12-03T10:00:00+00:00") is True
    assert report.mark_earlier(tmp_path, "2026-12-03T11:00:00+00:00") is True
    text = (tmp_path / "fleet.md").read_text()
    assert text.startswith("> ⚠️ **Not current.** This report is from an earlier run. A run started"
                           " 2026-12-03T11:00:00+00:00 has not written its own yet")
    assert text.count("Not current") == 1 and "1 hosts: 1 pass" in text
    fleet = json.loads((tmp_path / "fleet.json").read_text())
    assert fleet["not_current"].startswith("Not current. This report is from an earlier run. A run started 2026-12-03T11")
    assert fleet["hosts"]["gpu-01"]["result"] == "pass"
    # The run's own report replaces it, unmarked.
    report.write(tmp_path, ["gpu-01"])
    assert "Not current" not in (tmp_path / "fleet.md").read_text()
    assert "not_current" not in json.loads((tmp_path / "fleet.json").read_text())


def test_the_start_action_marks_the_earlier_report_and_says_when_this_run_started(tmp_path, monkeypatch):
    """plugins/action/infertune_report_start.py, as the report role's start task runs it."""
    spec = importlib.util.spec_from_file_location(
        "infertune_report_start_action", Path(__file__).resolve().parents[2] / "plugins" / "action" /
        "infertune_report_start.py")
    action = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(action)
    monkeypatch.setattr(action.ActionBase, "run", lambda self, tmp=None, task_vars=None: {})
    plugin = action.ActionModule.__new__(action.ActionModule)
    plugin._task = SimpleNamespace(args={"dir": str(tmp_path), "hosts": ["gpu-01", "gpu-02"]})
    first = plugin.run(task_vars={})
    assert first["marked"] is False and first["changed"] is False
    assert (first["dir"], first["hosts"]) == (str(tmp_path), ["gpu-01", "gpu-02"])
    report.write(tmp_path, ["gpu-01"])
    second = plugin.run(task_vars={})
    started = datetime.fromisoformat(second["started"])
    assert second["marked"] is True and started.utcoffset() == timedelta(0)
    assert (tmp_path / "fleet.md").read_text().startswith(
        "> ⚠️ **Not current.** This report is from an earlier run. A run started %s" % second["started"])

def test_the_run_summary_for_awx_names_failures_pending_knobs_drains_and_reboots_and_no_value(tmp_path):
    write(tmp_path)
    secret = "s3cr3t-in-a-value"
    results = dict(FRAGMENT["results"], sglang={"before": secret, "after": secret, "msg": secret, "changed": True,
                                                "applied": True})
    stopped = "the rollout stopped before this host's batch: canary host(s) gpu-03 did not converge"
    run = {
        "gpu-01": {"verify": True, "check_mode": False, "results": results,
                   "rollout": {"stage": "verify", "drained": True, "rebooted": True}},
        "gpu-03": {"verify": False, "check_mode": False, "results": {"cpufreq": {"changed": True, "msg": secret}},
                   "rollout": {"stage": "drain", "drained": False, "rebooted": False, "failure": "cannot count\nmore"}},
        "gpu-06": {"verify": False, "check_mode": False, "results": None,
                   "rollout": {"stage": "plan", "failure": "", "stopped": stopped}},
    }
    report.write(tmp_path, sorted(run), run)
    summary = json.loads((tmp_path / "fleet.json").read_text())["run_summary"]
    assert summary == {
        "check_mode": False, "hosts": 3, "verdicts": {"pass": 1, "fail": 1, "not_verified": 1},
        "failed": {"gpu-03": {"stage": "drain", "reason": "failed in stage drain: cannot count"}},
        "not_verified": {"gpu-06": stopped},
        # sysctl was planned and not applied on gpu-01; gpu-03 stopped before cpufreq.
        "pending": {"gpu-01": ["sysctl"], "gpu-03": ["cpufreq"]},
        "drained": ["gpu-01"], "rebooted": ["gpu-01"],
    }
    assert secret not in json.dumps(summary)


def test_under_check_every_planned_change_is_pending_in_the_summary(tmp_path):
    write(tmp_path)
    run = {"gpu-01": {"verify": True, "check_mode": True, "results": FRAGMENT["results"], "rollout": {"stage": "verify"}}}
    report.write(tmp_path, ["gpu-01"], run)
    summary = json.loads((tmp_path / "fleet.json").read_text())["run_summary"]
    assert summary["check_mode"] is True
    assert summary["pending"] == {"gpu-01": ["kernel_cmdline", "sysctl", "cpufreq", "pcie_mrrs"]}
    assert summary["drained"] == [] and summary["rebooted"] == []


def test_the_summary_key_is_unique_to_the_run_and_a_variable_name():
    assert report.summary_key(42) == "infertune_summary_awx_42"
    assert report.summary_key("42") == "infertune_summary_awx_42"
    one, two = report.summary_key(), report.summary_key(None)
    assert one != two and one.startswith("infertune_summary_run_") and one.isidentifier()


def test_the_report_reads_the_catalog_the_run_hands_over(tmp_path, monkeypatch):
    """One reading of the catalog per run: Ansible's. The rows the actions hand over are what the
    report shows; the file is read only for a report run by hand."""
    entries = [{"name": "sysctl", "label": "kernel sysctls", "verify": ["sysctl"], "module": "sysctl", "args": {}},
               {"name": "sglang", "label": "sglang", "verify": ["sglang_service"], "module": "systemd_unit",
                "args": {"unit": "sglang.service", "content": "{{ big }}"}},
               {"name": "tune", "module": "systemd_unit", "args": {"unit": "{{ unit_name }}"}}]
    rows = report.catalog_rows(entries)
    assert rows == [
        {"name": "sysctl", "label": "kernel sysctls", "verify": ["sysctl"], "module": "sysctl", "unit": None},
        {"name": "sglang", "label": "sglang", "verify": ["sglang_service"], "module": "systemd_unit",
         "unit": "sglang.service"},
        # A templated unit is not named; a missing label is the knob's name.
        {"name": "tune", "label": "tune", "verify": [], "module": "systemd_unit", "unit": None}]
    monkeypatch.setattr(report, "CATALOG", tmp_path / "no-such-catalog.yml")
    monkeypatch.setattr(report.file_rows, "__defaults__", (tmp_path / "no-such-catalog.yml",))
    report.write(tmp_path, ["gpu-01"], {"gpu-01": {"verify": False, "results": None}}, verified=False, catalog=rows)
    fleet = json.loads((tmp_path / "fleet.json").read_text())
    assert list(fleet["knobs"])[:3] == ["sysctl", "sglang", "tune"]
    assert fleet["knobs"]["sysctl"] == "kernel sysctls"
    assert report.catalog_rows(None) is None


def test_gpu_health_has_its_column_and_a_row_per_unhealthy_gpu(tmp_path):
    sick = {"index": 3, "bus_id": "00000000:4E:00.0", "uuid": "GPU-3", "serial": "1650000000003", "class": "rma",
            "signals": {"remap": ["rma", "row remapping failed (RMA by NVIDIA's policy)"]}}
    slow = dict(sick, index=5, bus_id="00000000:98:00.0", uuid="GPU-5", serial=None, **{"class": "warn"},
                signals={"clock_events": ["warn", "clocks held down: hw_slowdown"]})
    health = {"changed": False, "before": None, "after": "8 GPU(s): 1 warn, 1 rma", "class": "rma", "gpus": [slow, sick]}
    report.record(tmp_path / "hosts", {"gpu-01": {"results": {"gpu_health": health}, "check_mode": False}})
    (tmp_path / "verify").mkdir()
    (tmp_path / "verify" / "all.xml").write_text(
        '<testsuites><testsuite><testcase name="test_gpu_health[ansible://gpu-01]"><failure message="x">'
        'gpu-01: GPU health: expected no GPU reset or rma, found GPU 3 ...</failure></testcase></testsuite></testsuites>')
    assert report.main(["--dir", str(tmp_path), "--hosts", "gpu-01"]) == 0
    fleet = json.loads((tmp_path / "fleet.json").read_text())["hosts"]["gpu-01"]
    assert fleet["knobs"]["gpu_health"]["label"] == "GPU health" and fleet["knobs"]["gpu_health"]["verify"] == "fail"
    assert fleet["gpu_health"]["class"] == "rma" and [g["index"] for g in fleet["gpu_health"]["gpus"]] == [5, 3]
    md = (tmp_path / "fleet.md").read_text()
    assert "| host | result | " in md and " GPU health |" in md.split("\n## ")[0]
    section = md.split("## GPU health\n")[1].split("\n## ")[0]
    rows = [line for line in section.splitlines() if line.startswith("| gpu-01")]
    assert rows == ["| gpu-01 | 3 | 00000000:4E:00.0 | 1650000000003 | GPU-3 | rma | remap: row remapping failed "
                    "(RMA by NVIDIA's policy) (rma) |",
                    "| gpu-01 | 5 | 00000000:98:00.0 | — | GPU-5 | warn | clock_events: clocks held down: hw_slowdown (warn) |"]
