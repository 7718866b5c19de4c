"""The drift watch on the lab with a real node_exporter: Debian's prometheus-node-exporter on
loopback, with only the textfile collector on a temporary directory, scraped as Prometheus would.

Bad input exits 1 and publishes nothing. On the converged fleet one host's EPP is set back by
hand and another host is stopped: `infertune drift` exits 1 (a host unreachable); with that
host started again, `infertune drift --verify` exits 2 and writes the fleet report with that
host failing its verification, and the exporter shows exactly that host and knob pending and every
other host checked with nothing pending; after a converge, 0 and no knob pending. No drift run
changes a file on any host.
The lab is left converged, every host running, as the next modules expect.
"""
import json
import socket
import subprocess
import time
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from helpers import BIN, ROOT, labctl, on_host, playbook, state_digest

pytestmark = pytest.mark.lab

ONE_BATCH = ("-e", '{"rollout_batches": ["100%"], "rollout_allow_single_batch": true}')
EPP = "/sys/devices/system/cpu/cpu*/cpufreq/energy_performance_preference"


@pytest.fixture(scope="module")
def hosts(lab):
    """The lab's hosts as they are (any number), converged."""
    playbook("site.yml", *ONE_BATCH, check=True)
    return sorted(lab.hosts())


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def exporter(tmp_path_factory):
    """(textfile directory, metrics URL) of a node_exporter with only the textfile collector."""
    textfiles = tmp_path_factory.mktemp("textfiles")
    log = tmp_path_factory.mktemp("exporter") / "exporter.log"
    url = f"http://127.0.0.1:{free_port()}/metrics"
    with open(log, "w") as handle:
        proc = subprocess.Popen(["prometheus-node-exporter", "--web.listen-address=" + url.split("/")[2],
                                 "--collector.disable-defaults", "--collector.textfile",
                                 f"--collector.textfile.directory={textfiles}"],
                                stdout=subprocess.DEVNULL, stderr=handle)
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(url, timeout=1)
                break
            except OSError:
                assert proc.poll() is None, log.read_text()
                time.sleep(0.1)
        yield textfiles, url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def drift(textfiles, *options):
    proc = subprocess.run([str(BIN / "infertune"), "drift", "--textfile-dir", str(textfiles), *options],
                          cwd=ROOT, capture_output=True, text=True, check=False)
    return proc.returncode, proc.stdout + proc.stderr


def scrape(url):
    """{metric: {labels (host, knob where present): value}} of the infertune metrics the exporter serves."""
    text = urllib.request.urlopen(url, timeout=10).read().decode()
    out = {}
    for family in text_string_to_metric_families(text):
        if family.name == "node_textfile_scrape_error":
            assert [s.value for s in family.samples] == [0], text
        for sample in family.samples if family.name.startswith("infertune_") else ():
            key = tuple(sample.labels.get(k) for k in ("host", "knob") if k in sample.labels)
            out.setdefault(sample.name, {})[key] = sample.value
    return out


def test_bad_input_exits_1_and_publishes_nothing(hosts, exporter):
    textfiles, _ = exporter
    proc = subprocess.run([str(BIN / "infertune"), "drift", "--textfile-dir", str(textfiles),
                           "-e", "cpu_power_governor=turbo"], cwd=ROOT, capture_output=True, text=True, check=False)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "cpu_power_governor: must be one of" in proc.stderr
    assert not list(textfiles.iterdir())


def digests(hosts):
    return {h: state_digest(h) for h in hosts}


def test_drift_names_the_unreachable_host_then_the_drifted_knob_then_nothing(hosts, exporter):
    textfiles, url = exporter
    drifted, stopped = hosts[0], hosts[1]
    running = [h for h in hosts if h != stopped]
    on_host(drifted, f"for f in {EPP}; do echo balance_power > $f; done")
    labctl("stop", stopped)
    try:
        before = digests(running)
        rc, out = drift(textfiles)
        assert rc == 1, out
        metrics = scrape(url)
        assert metrics["infertune_host_checked"] == {(h,): float(h != stopped) for h in hosts}
        # Published by the plan as unreachable, with ssh's reason, not lost before its read.
        error = json.loads((ROOT / "reports" / "drift.json").read_text())["hosts"][stopped]["error"]
        assert error.startswith("unreachable: "), error
    finally:
        labctl("start", stopped)
        on_host(stopped, "systemctl is-system-running --wait >/dev/null || true")
    # Hashed after the stopped host is back, which touches no other host.
    after = digests(hosts)
    assert {h: after[h] for h in running} == before, "a drift run changed files on a host"

    # With the verification: the fleet report written again, the drifted host failing it.
    fleet_json = ROOT / "reports" / "fleet.json"
    earlier = fleet_json.stat().st_mtime_ns if fleet_json.exists() else 0
    rc, out = drift(textfiles, "--verify")
    assert rc == 2, out
    assert digests(hosts) == after, "a drift run changed files on a host"
    assert fleet_json.stat().st_mtime_ns > earlier, out
    report = json.loads(fleet_json.read_text())["hosts"]
    assert {h: report[h]["result"] for h in hosts} == {h: "fail" if h == drifted else "pass" for h in hosts}, out
    metrics = scrape(url)
    assert {key for key, value in metrics["infertune_knob_pending"].items() if value} == {(drifted, "cpufreq")}
    assert metrics["infertune_host_checked"] == {(h,): 1 for h in hosts}
    assert metrics["infertune_host_pending_knobs"] == {(h,): float(h == drifted) for h in hosts}
    assert {h for (h, _) in metrics["infertune_knob_pending"]} == set(hosts)
    check = subprocess.run(["promtool", "check", "metrics"], input=(textfiles / "infertune_drift.prom").read_text(),
                           capture_output=True, text=True)
    assert check.returncode == 0 and not (check.stdout + check.stderr).strip(), check.stdout + check.stderr

    playbook("site.yml", check=True)
    rc, out = drift(textfiles)
    assert rc == 0, out
    metrics = scrape(url)
    assert metrics["infertune_knob_pending"] and not any(metrics["infertune_knob_pending"].values())
    assert metrics["infertune_host_checked"] == {(h,): 1 for h in hosts}
