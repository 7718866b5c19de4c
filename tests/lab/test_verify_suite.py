"""tests/verify against the lab: an untuned host fails on exactly the knobs that are off,
a tuned one passes, and playbooks/verify.yml reports both in reports/fleet.json.

Starts from a fresh lab like test_site.py (every host as `labctl up` creates it), then
converges one host. Read-only on the hosts apart from that converge.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import ROOT, fresh_lab, playbook

from infertune import report

pytestmark = pytest.mark.lab

# What a fresh seed-epyc-rtxpro6000 host is off on: firmware defaults (kernel 6.1,
# acpi-cpufreq/schedutil, C2 enabled, numa_balancing 1, MaxReadReq 512, ACS redirect on,
# IOMMU translating so P2P reads CNS) and nothing installed. Its 8 GPUs of compute 12.0 already match, and nothing wrote elsewhere.
UNTUNED_OFF = {"running_kernel", "kernel_cmdline", "cpufreq_driver", "cpufreq_governor", "cpufreq_epp",
               "no_deep_cstates", "sysctl", "pcie_mrrs", "nvidia_module_options", "sglang_unit",
               "tuning_persistence", "pcie_acs", "pcie_p2p", "nvidia_persistence"}
UNTUNED_PASS = {"gpu_count", "gpu_compute_capability", "gpu_health", "pcie_mrrs_untouched_elsewhere", "pcie_links", "pcie_bar1"}


EXPECTED = ROOT / "reports" / "verify" / "expected.json"


def by_hand(hosts, *options, expected=None):
    """The suite run by hand as an operator would, on the lab's inventory, against the values in
    EXPECTED (INFERTUNE_VERIFY_EXPECTED; none: unset)."""
    env = {k: v for k, v in os.environ.items() if k != "INFERTUNE_VERIFY_EXPECTED"}
    if expected is not None:
        env["INFERTUNE_VERIFY_EXPECTED"] = str(expected)
    # testinfra's ansible backend calls ansible-inventory from the venv.
    env["PATH"] = f"{Path(sys.executable).parent}:{os.environ['PATH']}"
    return subprocess.run(
        [sys.executable, "-m", "pytest", "tests/verify", "-q", "-p", "no:cacheprovider",
         "--hosts=" + ",".join("ansible://" + h for h in hosts), "--ansible-inventory=inventory/lab", *options],
        env=env, cwd=ROOT, capture_output=True, text=True, check=False)


def verify(hosts, junit, expected):
    """The suite by hand against the values a run resolved (a copy of its
    reports/verify/expected.json); report.read_junit's {host: {test: outcome}}."""
    proc = by_hand(hosts, f"--junitxml={junit}", expected=expected)
    assert proc.returncode in (0, 1), proc.stdout[-4000:] + proc.stderr[-2000:]
    return report.read_junit([junit])


@pytest.fixture(scope="module")
def hosts(lab):
    fresh_lab()
    return lab.healthy_hosts()


def resolved(tmp_path, name):
    """The values the last run resolved, kept: a later run rewrites reports/verify."""
    copy = tmp_path / name
    copy.write_text(EXPECTED.read_text())
    return copy


def test_by_hand_without_a_runs_values_the_suite_stops_and_says_why(hosts, tmp_path):
    proc = by_hand(hosts[:1])
    assert proc.returncode not in (0, 5)
    assert "no expected values: run playbooks/verify.yml" in proc.stdout + proc.stderr


def test_untuned_hosts_fail_on_exactly_the_knobs_that_are_off(hosts, tmp_path):
    # The values come from a run: verify.yml under --check resolves them (and fails no host).
    rc, out = playbook("playbooks/verify.yml", "--check", "--limit", ",".join(hosts))
    assert rc == 0, out[-4000:]
    results = verify(hosts, tmp_path / "untuned.xml", resolved(tmp_path, "untuned.json"))
    for host in hosts:
        outcome = results[host]
        assert {t for t, r in outcome.items() if r["status"] == "fail"} == UNTUNED_OFF, (host, outcome)
        assert {t for t, r in outcome.items() if r["status"] == "pass"} == UNTUNED_PASS, (host, outcome)
        for test in UNTUNED_OFF:
            detail = outcome[test]["detail"]
            # host, knob, expected and found, on one line: no traceback.
            assert detail.startswith(host + ": ") and ": expected " in detail and ", found " in detail, detail
            assert "Traceback" not in detail and "\n" not in detail


def test_converged_host_passes_and_the_report_shows_both(hosts, tmp_path):
    tuned, untuned = hosts[0], hosts[1]
    rc, out = playbook("site.yml", "--limit", tuned)
    assert rc == 0, out[-6000:]
    rc, out = playbook("playbooks/verify.yml", "--limit", f"{tuned},{untuned}")
    assert rc != 0, "verify.yml passed a host that was never tuned"
    assert f"{untuned}: running kernel: expected" in out, out[-4000:]

    fleet = json.loads((ROOT / "reports" / "fleet.json").read_text())
    assert fleet["hosts"][tuned]["result"] == "pass", fleet["hosts"][tuned]
    assert fleet["hosts"][tuned]["tuned_at"], "no results recorded for the tuned host"
    # Runtime knobs (MaxReadReq) come back from the boot-time oneshot after the reboot,
    # so the change the report must show is a boot-time one.
    assert fleet["hosts"][tuned]["knobs"]["sysctl"]["changed"]
    assert set(fleet["hosts"][untuned]["failing"]) >= {"boot_kernel", "pcie_mrrs", "sysctl", "cpuidle"}

    results = verify([tuned], tmp_path / "tuned.xml", resolved(tmp_path, "tuned.json"))[tuned]
    # The default inventory sets no sysfs attribute (sysctl_sysfs_settings: []): that check has
    # nothing to read and says so; every other check passes.
    assert {t: r["status"] for t, r in results.items() if r["status"] != "pass"} == {"sysfs": "n/a"}
