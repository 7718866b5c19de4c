"""The boot-time re-apply CLI, run as a process the way systemd runs it."""
import json
import os
import subprocess
import sys
import tempfile

from fakehost import BARE_ROOT, GPU, REPO, SWITCH_DOWN, SWITCH_ROOT, fabric_tree, pci_tree, read, snapshot

TOOL = REPO / "roles/tuning_persistence/files/infertune-apply"
# As the tuning_persistence role writes it: the catalog's oneshot entries, in order.
CONFIG = [{"name": "amd_pstate", "module": "amd_pstate", "args": {"mode": "active"}},
          {"name": "cpufreq", "module": "cpufreq_policy", "args": {"governor": "performance", "epp": "performance"}},
          {"name": "cpuidle", "module": "cpuidle_states", "args": {"max_latency": 1, "keep_poll": True}},
          {"name": "pcie_mrrs", "module": "pcie_mrrs",
           "args": {"value": 4096, "vendor": "0x10de", "classes": ["0x0300", "0x0302"]}}]


def knob(name):
    return next(entry for entry in CONFIG if entry["name"] == name)


def run_tool(root, config, *extra):
    # The config lives outside root so that root's snapshot covers only the host.
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
        json.dump(config, handle)
        path = handle.name
    env = dict(os.environ, PYTHONPATH=str(REPO / "plugins" / "module_utils"))
    try:
        return subprocess.run([sys.executable, str(TOOL), "--root", root, "--config", path, *extra],
                              capture_output=True, text=True, env=env, check=False)
    finally:
        os.unlink(path)


def report(root):
    with open(os.path.join(root, "run/infertune/apply.json")) as handle:
        return json.load(handle)


def test_applies_every_knob_and_reports(amd128):
    pci_tree(amd128)
    proc = run_tool(amd128, CONFIG)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    results = report(amd128)
    assert sorted(results) == ["amd_pstate", "cpufreq", "cpuidle", "pcie_mrrs"]
    assert all(r["ok"] for r in results.values())
    assert results["pcie_mrrs"]["after"] == {GPU: 4096}
    assert read(amd128, "/sys/devices/system/cpu/cpu64/cpuidle/state2/disable") == "1"
    assert len([line for line in proc.stdout.splitlines() if line.startswith("infertune-apply: ")]) == 4
    again = run_tool(amd128, CONFIG)
    assert again.returncode == 0 and not any(r["changed"] for r in report(amd128).values())


def test_failed_knob_exits_1_and_others_still_apply(amd128):
    pci_tree(amd128)
    config = [dict(e, args={"governor": "schedutil"}) if e["name"] == "cpufreq" else e for e in CONFIG]
    proc = run_tool(amd128, config)
    assert proc.returncode == 1
    results = report(amd128)
    assert not results["cpufreq"]["ok"] and "schedutil" in results["cpufreq"]["msg"]
    assert results["cpuidle"]["ok"] and results["pcie_mrrs"]["after"] == {GPU: 4096}
    assert "infertune-apply: cpufreq: failed" in proc.stdout


def test_check_changes_nothing(amd128):
    pci_tree(amd128)
    before = snapshot(amd128)
    proc = run_tool(amd128, [knob("cpuidle"), knob("pcie_mrrs")], "--check")
    assert proc.returncode == 0 and snapshot(amd128) == before
    assert "infertune-apply: pcie_mrrs: would change" in proc.stdout


def test_unknown_knob_module_fails_and_the_others_apply(amd128):
    proc = run_tool(amd128, [knob("cpuidle"), {"name": "numa", "module": "numa", "args": {}}])
    assert proc.returncode == 1
    assert sorted(report(amd128)) == ["cpuidle", "numa"]


def test_acs_redirect_is_cleared_again_at_boot(tmp_path):
    """Power-on sets redirect again; the oneshot's pcie_acs entry clears it, and only it."""
    root = fabric_tree(str(tmp_path))
    entry = {"name": "pcie_acs", "module": "pcie_acs",
             "args": {"vendor": "0x10de", "classes": ["0x0300", "0x0302"], "force": False}}
    proc = run_tool(root, [entry])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = report(root)["pcie_acs"]
    assert result["ok"] and result["changed"]
    assert {bdf: result["after"][bdf] for bdf in (SWITCH_ROOT,) + SWITCH_DOWN} == dict.fromkeys(
        (SWITCH_ROOT,) + SWITCH_DOWN, "0x0011")
    assert run_tool(root, [entry]).returncode == 0 and not report(root)["pcie_acs"]["changed"]


def test_boot_log_and_report_name_the_ports_without_acs(tmp_path):
    root = fabric_tree(str(tmp_path), down_acs=(True, False))
    entry = {"name": "pcie_acs", "module": "pcie_acs", "args": {"force": False}}
    proc = run_tool(root, [entry])
    named = "no ACS capability (nothing to clear) on %s, %s" % (SWITCH_DOWN[1], BARE_ROOT)
    assert proc.returncode == 0 and named in proc.stdout and named in report(root)["pcie_acs"]["msg"]
