"""The drift watch: the state kept across runs (infertune/drift.py), its Prometheus textfile read
back with prometheus_client's own parser and checked by promtool, the atomic write, fleet.md's
drift section, and `infertune drift` end to end (tests/unit/fixtures/drift: a simulated plan
on three local hosts and one that does not answer, then the real publishing play)."""
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from infertune import cli, drift, report

FIXTURE = Path(__file__).parent / "fixtures" / "drift"
FLEET = ["gpu-01", "gpu-02", "gpu-03"]
KNOBS = ["numa_balancing", "cpufreq", "pcie_mrrs"]
T1, T2, T3 = "2026-12-01T10:00:00+00:00", "2026-12-01T10:15:00+00:00", "2026-12-01T10:30:00+00:00"
METRICS = {"infertune_knob_pending", "infertune_host_pending_knobs", "infertune_host_reboot_pending",
           "infertune_host_checked", "infertune_drift_last_run_timestamp_seconds",
           "infertune_drift_last_success_timestamp_seconds", "infertune_build_info"}


def ok(*pending, reboot=()):
    return drift.read_ok(KNOBS, {k: f"{k} differs" for k in pending}, reboot)


def samples(text):
    """{metric name: {frozenset(labels): value}}, as Prometheus' client library parses the file."""
    out = {}
    for family in text_string_to_metric_families(text):
        assert family.type == "gauge" and family.documentation, family.name
        out[family.name] = {}
        for sample in family.samples:
            out.setdefault(sample.name, {})[frozenset(sample.labels.items())] = sample.value
    return out


def host(name, **labels):
    return frozenset({"host": name, **labels}.items())


def test_the_textfile_has_every_metric_every_host_and_the_values_read():
    state = drift.merge({}, {"gpu-01": ok(), "gpu-02": ok("cpufreq", reboot=["command line"]),
                             "gpu-03": drift.read_failed("unreachable: no route")}, FLEET, T1)
    got = samples(drift.textfile(state))
    assert set(got) == METRICS
    assert got["infertune_host_checked"] == {host("gpu-01"): 1, host("gpu-02"): 1, host("gpu-03"): 0}
    # Every enabled knob of every host read, 0 or 1; a host never read has no knob values.
    assert got["infertune_knob_pending"] == {host(h, knob=k): float(h == "gpu-02" and k == "cpufreq")
                                             for h in ("gpu-01", "gpu-02") for k in KNOBS}
    assert got["infertune_host_pending_knobs"] == {host("gpu-01"): 0, host("gpu-02"): 1}
    assert got["infertune_host_reboot_pending"] == {host("gpu-01"): 0, host("gpu-02"): 1}
    assert got["infertune_drift_last_run_timestamp_seconds"] == {frozenset(): drift.epoch(T1)}
    # A host was not read: no success yet, so no success time.
    assert got["infertune_drift_last_success_timestamp_seconds"] == {}
    assert got["infertune_build_info"] == {frozenset({"version": drift.version()}.items()): 1}


def test_host_names_are_escaped_as_label_values():
    state = drift.merge({}, {'odd"host\\x': ok("cpufreq")}, ['odd"host\\x'], T1)
    got = samples(drift.textfile(state))
    assert got["infertune_host_checked"] == {host('odd"host\\x'): 1}


def test_first_seen_is_kept_while_a_knob_stays_pending_and_starts_again_after_a_fix():
    first = drift.merge({}, {"gpu-01": ok("cpufreq")}, FLEET[:1], T1)
    second = drift.merge(first, {"gpu-01": ok("cpufreq", "pcie_mrrs")}, FLEET[:1], T2)
    assert second["hosts"]["gpu-01"]["pending"] == {"cpufreq": {"since": T1, "detail": "cpufreq differs"},
                                                    "pcie_mrrs": {"since": T2, "detail": "pcie_mrrs differs"}}
    assert second["hosts"]["gpu-01"]["last_read"] == T2
    fixed = drift.merge(second, {"gpu-01": ok()}, FLEET[:1], T3)
    again = drift.merge(fixed, {"gpu-01": ok("cpufreq")}, FLEET[:1], "2026-12-01T11:00:00+00:00")
    assert fixed["hosts"]["gpu-01"]["pending"] == {}
    assert again["hosts"]["gpu-01"]["pending"]["cpufreq"]["since"] == "2026-12-01T11:00:00+00:00"


def test_hosts_outside_the_limit_keep_their_last_values_and_hosts_gone_drop_out():
    first = drift.merge({}, {h: ok("cpufreq") for h in FLEET}, FLEET, T1)
    limited = drift.merge(first, {"gpu-01": ok()}, FLEET[:2] + ["gpu-04"], T2)
    assert limited["hosts"]["gpu-02"] == first["hosts"]["gpu-02"]
    assert limited["hosts"]["gpu-01"]["pending"] == {}
    assert "gpu-03" not in limited["hosts"]
    # In the inventory, never read: unchecked, and never absent from the file.
    assert limited["hosts"]["gpu-04"]["checked"] is False and limited["hosts"]["gpu-04"]["last_read"] is None
    got = samples(drift.textfile(limited))
    assert got["infertune_host_checked"] == {host("gpu-01"): 1, host("gpu-02"): 1, host("gpu-04"): 0}
    assert got["infertune_knob_pending"][host("gpu-02", knob="cpufreq")] == 1
    assert limited["run"]["hosts"] == ["gpu-01"] and limited["run"]["exit_status"] == drift.NO_DRIFT


def test_a_host_not_read_keeps_what_its_last_read_found_and_is_unchecked():
    first = drift.merge({}, {"gpu-01": ok("cpufreq")}, FLEET[:1], T1)
    lost = drift.merge(first, {"gpu-01": drift.read_failed("unreachable: timeout")}, FLEET[:1], T2)
    entry = lost["hosts"]["gpu-01"]
    assert (entry["checked"], entry["error"], entry["last_read"]) == (False, "unreachable: timeout", T1)
    assert entry["pending"] == first["hosts"]["gpu-01"]["pending"]
    assert lost["last_success"] == T1 and lost["last_run"] == T2


@pytest.mark.parametrize("readings, status", [
    ({"gpu-01": ok(), "gpu-02": ok()}, drift.NO_DRIFT),
    ({"gpu-01": ok(), "gpu-02": ok("pcie_mrrs")}, drift.DRIFT),
    ({"gpu-01": ok(), "gpu-02": ok(reboot=["kernel"])}, drift.DRIFT),
    # An error wins over drift, as with Terraform's -detailed-exitcode.
    ({"gpu-01": ok("cpufreq"), "gpu-02": drift.read_failed("stopped by the plan: GPU gate")}, drift.ERROR),
])
def test_exit_status_is_0_without_drift_2_with_drift_1_when_a_host_was_not_read(readings, status):
    assert drift.merge({}, readings, FLEET, T1)["run"]["exit_status"] == status


def test_the_write_replaces_the_file_in_one_step_from_a_name_the_collector_skips(tmp_path, monkeypatch):
    (tmp_path / drift.TEXTFILE).write_text("old\n")
    replaced = []
    real_replace = os.replace

    def spy(src, dst):
        # Until the rename the collector still reads the old file whole.
        assert (tmp_path / drift.TEXTFILE).read_text() == "old\n"
        assert Path(src).read_text() == "new\n"
        replaced.append((Path(src), Path(dst)))
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", spy)
    drift.write_atomic(tmp_path, drift.TEXTFILE, "new\n")
    (src, dst), = replaced
    assert src.parent == tmp_path and not src.name.endswith(".prom") and dst == tmp_path / drift.TEXTFILE
    assert (tmp_path / drift.TEXTFILE).read_text() == "new\n"
    assert (tmp_path / drift.TEXTFILE).stat().st_mode & 0o777 == 0o644
    assert sorted(p.name for p in tmp_path.iterdir()) == [drift.TEXTFILE]


def test_a_failed_write_leaves_the_old_file_and_no_temporary_one(tmp_path, monkeypatch):
    (tmp_path / drift.TEXTFILE).write_text("old\n")

    def broken(src, dst):
        raise OSError(28, "No space left on device", str(dst))

    monkeypatch.setattr(os, "replace", broken)
    with pytest.raises(OSError):
        drift.write_atomic(tmp_path, drift.TEXTFILE, "new\n")
    assert [p.name for p in tmp_path.iterdir()] == [drift.TEXTFILE]
    assert (tmp_path / drift.TEXTFILE).read_text() == "old\n"


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool (Debian's prometheus package) not installed")
def test_promtool_finds_nothing_to_say_about_a_real_textfile(tmp_path):
    readings = {"gpu-01": ok(), "gpu-02": ok("cpufreq", reboot=["command line"]), "gpu-03": drift.read_failed("x")}
    drift.publish(tmp_path, tmp_path, readings, FLEET, T1)
    drift.publish(tmp_path, tmp_path, {"gpu-03": ok()}, FLEET, T2)  # a success too
    text = (tmp_path / drift.TEXTFILE).read_text()
    proc = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True)
    assert proc.returncode == 0 and not (proc.stdout + proc.stderr).strip(), proc.stdout + proc.stderr


def test_fleet_md_gets_the_drift_section_in_place_and_keeps_the_rest(tmp_path):
    drift.publish(tmp_path, "", {"gpu-01": ok("cpufreq"), "gpu-02": drift.read_failed("unreachable: x")},
                  FLEET[:2], T1)
    report.update_drift_section(tmp_path)  # no fleet.md yet: one is started for it
    assert (tmp_path / "fleet.md").read_text().count(report.DRIFT_START) == 1
    (tmp_path / "fleet.md").write_text("# report\n\nverified before\n")
    report.update_drift_section(tmp_path)
    drift.publish(tmp_path, "", {"gpu-01": ok("cpufreq")}, FLEET[:2], T2)
    report.update_drift_section(tmp_path)
    text = (tmp_path / "fleet.md").read_text()
    assert text.startswith("# report\n\nverified before\n\n") and text.count(report.DRIFT_START) == 1
    assert f"| gpu-01 | yes | {T2} | no | governor / EPP since {T1} |" in text
    assert "| gpu-02 | no: unreachable: x | never | no | — |" in text
    # The verification's report carries the section too.
    report.write(tmp_path, ["gpu-01", "gpu-02"], verified=False)
    assert f"governor / EPP since {T1}" in (tmp_path / "fleet.md").read_text()


# --- infertune drift, end to end ----------------------------------------------------------

PLAN = {"results": {k: {"changed": False, "msg": "ok"} for k in KNOBS}, "pending": [], "reboot_reasons": []}


def drifted_plan(knob):
    results = dict(PLAN["results"], **{knob: {"changed": True, "differs": f"{knob}: 512 -> 4096"}})
    return dict(PLAN, results=results, pending=[knob])


def run_drift(tmp_path, *args, plans=None, failures=None):
    plans = plans or {h: PLAN for h in ("node-a", "node-b", "node-c")}
    variables = tmp_path / "vars.json"
    variables.write_text(json.dumps({"plans": plans, "failures": failures or {}, "report_dir": str(tmp_path / "reports")}))
    (tmp_path / "textfiles").mkdir(exist_ok=True)
    return cli.main(["drift", "-i", str(FIXTURE / "inventory.yml"), "-e", f"@{variables}",
                     "--textfile-dir", str(tmp_path / "textfiles"), *args], root=FIXTURE)


def published(tmp_path):
    return samples((tmp_path / "textfiles" / drift.TEXTFILE).read_text())


def test_drift_exits_1_when_a_host_does_not_answer_and_names_it_unchecked(tmp_path, capsys):
    assert run_drift(tmp_path) == drift.ERROR
    got = published(tmp_path)
    assert got["infertune_host_checked"] == {host("node-a"): 1, host("node-b"): 1, host("node-c"): 1,
                                             host("node-x"): 0}
    out = capsys.readouterr().out
    assert next(line for line in out.splitlines() if line.startswith("node-x")).split()[1] == "no"
    state = json.loads((tmp_path / "reports" / drift.STATE_FILE).read_text())
    assert state["hosts"]["node-x"]["error"].startswith("unreachable: ")


def test_drift_exits_2_on_a_pending_knob_and_0_once_it_is_fixed(tmp_path, capsys):
    plans = {"node-a": PLAN, "node-b": drifted_plan("pcie_mrrs"), "node-c": PLAN}
    assert run_drift(tmp_path, "--limit", "!node-x", plans=plans) == drift.DRIFT
    got = published(tmp_path)
    assert {k for k, v in got["infertune_knob_pending"].items() if v} == {host("node-b", knob="pcie_mrrs")}
    assert got["infertune_host_checked"][host("node-x")] == 0  # never read, still present
    first_seen = json.loads((tmp_path / "reports" / drift.STATE_FILE).read_text())["hosts"]["node-b"]["pending"]
    assert "pcie_mrrs" in capsys.readouterr().out
    assert "MaxReadReq since " + first_seen["pcie_mrrs"]["since"] in (tmp_path / "reports" / "fleet.md").read_text()

    assert run_drift(tmp_path, "--limit", "!node-x") == drift.NO_DRIFT
    assert not any(published(tmp_path)["infertune_knob_pending"].values())


def test_a_host_its_plan_stops_is_an_error(tmp_path, capsys):
    failures = {"node-c": "node-c: GPU gate: expected 8 GPUs, found 7"}
    assert run_drift(tmp_path, "--limit", "!node-x", failures=failures) == drift.ERROR
    state = json.loads((tmp_path / "reports" / drift.STATE_FILE).read_text())
    assert state["hosts"]["node-c"] == {**state["hosts"]["node-c"], "checked": False,
                                        "error": "stopped by the plan: " + failures["node-c"]}


def test_drift_exits_1_when_it_cannot_write_the_textfile(tmp_path, capsys):
    missing = tmp_path / "no-such-dir"
    assert run_drift(tmp_path, "--limit", "!node-x", "--textfile-dir", str(missing)) == drift.ERROR
    assert f"the textfile directory {missing} does not exist" in capsys.readouterr().err


def test_drift_exits_1_on_a_usage_error(tmp_path, capsys):
    assert cli.main(["drift", "-i", str(FIXTURE / "inventory.yml"), "-e", "/no/at/sign.yml"], root=FIXTURE) == drift.ERROR
    assert "prepend a vars file's name with @" in capsys.readouterr().err


def test_a_relative_textfile_directory_is_taken_from_where_the_command_runs(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "here").mkdir()
    variables = tmp_path / "vars.json"
    variables.write_text(json.dumps({"plans": {h: PLAN for h in ("node-a", "node-b", "node-c")},
                                     "report_dir": str(tmp_path / "reports")}))
    assert cli.main(["drift", "-i", str(FIXTURE / "inventory.yml"), "-e", "@vars.json", "--limit", "!node-x",
                     "--textfile-dir", "here"], root=FIXTURE) == drift.NO_DRIFT
    assert (tmp_path / "here" / drift.TEXTFILE).is_file()


def gpu_reading(klass, **extra):
    gpu = {"index": 3, "bus_id": "00000000:4E:00.0", "uuid": "GPU-3", "class": klass, "signals": {},
           "counters": {"ecc_corrected_volatile": 2, "pcie_replays": 0}, "rising": [], "xids": {}, "flags": {}, **extra}
    return {"read": True, "error": "", "boot_id": "b", "gpus": [gpu]}


def test_gpu_health_is_exported_per_gpu_with_identity_labels_and_no_text():
    readings = {"gpu-01": drift.read_ok(KNOBS, {}, (), gpu_reading("reset", flags={"remap_pending": 1, "remap_failure": 0},
                                                                   xids={"79": 2}, rising=["ecc_corrected_volatile"],
                                                                   clock_events=["hw_slowdown"])),
                "gpu-02": drift.read_failed("stopped by the plan: gpu-02: GPU gate: driver unresponsive",
                                            {"read": False, "error": "driver unresponsive: nvidia-smi did not answer within 60 s",
                                             "boot_id": None, "gpus": []}),
                "gpu-03": ok()}
    got = samples(drift.textfile(drift.merge({}, readings, FLEET, T1)))
    ids = {"gpu": "3", "uuid": "GPU-3", "bus_id": "00000000:4E:00.0"}
    assert got["infertune_gpu_health_read"] == {host("gpu-01"): 1, host("gpu-02"): 0}
    assert got["infertune_gpu_health_class"] == {host("gpu-01", **ids, **{"class": c}): float(c == "reset")
                                                 for c in drift.GPU_CLASSES}
    assert got["infertune_gpu_remap_pending"] == {host("gpu-01", **ids): 1}
    assert got["infertune_gpu_remap_failure"] == {host("gpu-01", **ids): 0}
    assert got["infertune_gpu_xids_this_boot"] == {host("gpu-01", xid="79", **ids): 2}
    assert got["infertune_gpu_clock_event_active"] == {host("gpu-01", reason=r, **ids): float(r == "hw_slowdown")
                                                       for r in drift.CLOCK_REASONS}
    assert got["infertune_gpu_errors"] == {host("gpu-01", counter="ecc_corrected_volatile", **ids): 2,
                                                host("gpu-01", counter="pcie_replays", **ids): 0}
    assert got["infertune_gpu_counters_rising"] == {host("gpu-01", **ids): 1}


def test_gpus_that_do_not_answer_keep_their_last_values_and_say_so():
    first = drift.merge({}, {"gpu-01": drift.read_ok(KNOBS, {}, (), gpu_reading("warn"))}, FLEET[:1], T1)
    hung = drift.merge(first, {"gpu-01": drift.read_failed("stopped by the plan: x", {
        "read": False, "error": "driver unresponsive", "boot_id": None, "gpus": []})}, FLEET[:1], T2)
    kept = hung["hosts"]["gpu-01"]["gpu_health"]
    assert kept["read"] is False and kept["error"] == "driver unresponsive" and kept["gpus"][0]["class"] == "warn"
    assert report.drift_gpus(kept) == "not read: driver unresponsive"
    assert report.drift_gpus(first["hosts"]["gpu-01"]["gpu_health"]) == "GPU 3 warn"


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool (Debian's prometheus package) not installed")
def test_promtool_finds_nothing_to_say_about_the_gpu_metrics(tmp_path):
    drift.publish(tmp_path, tmp_path, {"gpu-01": drift.read_ok(KNOBS, {}, (), gpu_reading("rma", xids={"48": 1}))},
                  FLEET[:1], T1)
    proc = subprocess.run(["promtool", "check", "metrics"], input=(tmp_path / drift.TEXTFILE).read_text(),
                          capture_output=True, text=True)
    assert proc.returncode == 0 and not (proc.stdout + proc.stderr).strip(), proc.stdout + proc.stderr
