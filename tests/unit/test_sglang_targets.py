"""reports/sglang-targets.json (infertune/targets.py): the Prometheus file_sd list of the
fleet's sglang /metrics, written with the fleet report, merged over the last one."""
import json

from infertune import targets

DEFAULTS = {"sglang_host": "0.0.0.0", "sglang_port": 30000, "sglang_enable_metrics": True}
RUN = {
    "gpu-a": {"address": "10.0.0.1", "expected": {}},
    "gpu-b": {"address": "fd00::2", "expected": {"sglang_port": 31000}},
    # -e gives strings.
    "gpu-c": {"address": "10.0.0.3", "expected": {"sglang_enable_metrics": "false"}},
    "gpu-d": {"address": "10.0.0.4", "expected": {"sglang_host": "192.168.7.4"}},
}
FLEET = ["gpu-a", "gpu-b", "gpu-c", "gpu-d"]


def write(tmp_path, run=RUN, fleet=FLEET):
    defaults = tmp_path / "defaults.yml"
    defaults.write_text(json.dumps(DEFAULTS))
    path = targets.write(tmp_path / "reports", run, fleet, defaults_file=defaults)
    return json.loads(path.read_text()) if path else None


def test_the_fleet_metrics_endpoints_as_file_sd_targets(tmp_path):
    listed = write(tmp_path)
    assert listed == [
        {"labels": {"host": "gpu-a"}, "targets": ["10.0.0.1:30000"]},
        {"labels": {"host": "gpu-b"}, "targets": ["[fd00::2]:31000"]},
        # gpu-c serves no /metrics; gpu-d listens on one address only.
        {"labels": {"host": "gpu-d"}, "targets": ["192.168.7.4:30000"]},
    ]
    assert write(tmp_path) == listed
    assert oct((tmp_path / "reports" / "sglang-targets.json").stat().st_mode & 0o777) == "0o644"


def test_a_limited_run_keeps_the_other_hosts_and_drops_hosts_gone(tmp_path):
    (tmp_path / "reports").mkdir()
    (tmp_path / "reports" / "sglang-targets.json").write_text(json.dumps([
        {"labels": {"host": "gpu-b"}, "targets": ["old-b:30000"]},
        {"labels": {"host": "gpu-gone"}, "targets": ["gone:30000"]},
    ]))
    listed = write(tmp_path, run={"gpu-a": RUN["gpu-a"]})
    assert listed == [{"labels": {"host": "gpu-a"}, "targets": ["10.0.0.1:30000"]},
                      {"labels": {"host": "gpu-b"}, "targets": ["old-b:30000"]}]


def test_a_check_run_writes_nothing(tmp_path):
    run = {host: dict(entry, check_mode=True) for host, entry in RUN.items()}
    assert write(tmp_path, run=run) is None and not (tmp_path / "reports").exists()


def test_the_sglang_role_defaults_give_every_host_a_target(tmp_path):
    path = targets.write(tmp_path, {"gpu-a": {"address": "10.0.0.1", "expected": {}}}, ["gpu-a"])
    assert json.loads(path.read_text())[0]["targets"][0].startswith("10.0.0.1:")
