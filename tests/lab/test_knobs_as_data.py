"""A sysctl, a kernel module option and a sysfs attribute added through inventory alone (an
extra-variables file, as a group_vars file would give them): vm.swappiness=10, nvidia's
NVreg_InfertuneTest=1 (a parameter no code of the project names; the lab's nvidia module has it)
and the transparent hugepage mode never are refused when bad, planned, applied, verified, reported,
hold after a reboot, and go back to the host's own values with infertune.fleet.revert.

The tests run in file order on one host of a fresh lab.
"""
import json

import pytest
import yaml

from helpers import ROOT, fresh_lab, on_host, playbook, recap, state_digest

pytestmark = pytest.mark.lab

NVIDIA_DEFAULTS = yaml.safe_load((ROOT / "roles" / "nvidia" / "defaults" / "main.yml").read_text())
SYSCTL_DEFAULTS = yaml.safe_load((ROOT / "roles" / "sysctl" / "defaults" / "main.yml").read_text())
THP = "/sys/kernel/mm/transparent_hugepage/enabled"
# The hugepage mode as a choice attribute shows it: the word in brackets, or the bare word written.
LIVE = f"cat /proc/sys/vm/swappiness /sys/module/nvidia/parameters/NVreg_InfertuneTest; sed 's/.*\\[\\(.*\\)\\].*/\\1/' {THP}"


def variables(swappiness="10", option="1", thp=THP):
    """The role defaults plus one entry each: what an operator would put in group_vars."""
    options = dict(NVIDIA_DEFAULTS["nvidia_module_options"])
    options["nvidia"] = {**(options.get("nvidia") or {}), "NVreg_InfertuneTest": option}
    return {"sysctl_settings": SYSCTL_DEFAULTS["sysctl_settings"] + [{"name": "vm.swappiness", "value": swappiness}],
            "nvidia_module_options": options,
            "sysctl_sysfs_settings": [{"path": thp, "value": "never", "drain": False}]}


# The never-tuned host's values of LIVE, read before the first test changes anything.
UNTUNED = {}


@pytest.fixture(scope="module")
def host(lab):
    fresh_lab()
    name = sorted(lab.hosts())[0]
    UNTUNED["live"] = on_host(name, LIVE).split()
    return name


def run(tmp_path, host, *args, book="site.yml", **overrides):
    extra = tmp_path / "knobs.json"
    extra.write_text(json.dumps(variables(**overrides)))
    return playbook(book, "--limit", host, "-e", f"@{extra}", *args)


def fleet():
    return json.loads((ROOT / "reports" / "fleet.json").read_text())


@pytest.mark.parametrize("override, where", [
    ({"swappiness": "10; reboot"}, "sysctl_settings[1].value"),
    ({"option": "1 2"}, "nvidia_module_options.nvidia.NVreg_InfertuneTest"),
    ({"thp": "/etc/../sys/x"}, "sysctl_sysfs_settings[0].path"),
])
def test_a_bad_value_is_refused_before_any_change(tmp_path, host, override, where):
    before = state_digest(host)
    rc, out = run(tmp_path, host, **override)
    assert rc != 0
    assert f"host {host}: {where}: " in out and " must be" in out, out[-4000:]
    assert all(r["changed"] == 0 for r in recap(out).values()), out[-3000:]
    assert state_digest(host) == before


def test_a_sysctl_the_lab_does_not_model_cannot_be_written(host):
    # The container's /proc/sys is read-only: the lab never reaches the build machine's sysctls.
    assert "Read-only file system" in on_host(host, "{ echo 5 > /proc/sys/vm/dirty_ratio; } 2>&1; true")


def test_all_are_planned(tmp_path, host):
    before = state_digest(host)
    rc, out = run(tmp_path, host, "--check")
    assert rc == 0, out[-6000:]
    assert "vm.swappiness: 60 -> 10" in out and "NVreg_InfertuneTest=1" in out, out[-6000:]
    assert f"  sysfs: {THP}: always -> never" in out, out[-6000:]
    assert state_digest(host) == before


def test_all_are_applied_verified_and_reported(tmp_path, host):
    rc, out = run(tmp_path, host)
    assert rc == 0, out[-8000:]
    # The option waits for the module's reload: the rollout reboots the host for it.
    assert on_host(host, LIVE).split() == ["10", "1", "never"]
    assert "vm.swappiness = 10" in on_host(host, "cat " + SYSCTL_DEFAULTS["sysctl_file"])
    assert "options nvidia NVreg_InfertuneTest=1" in on_host(host, "cat " + NVIDIA_DEFAULTS["nvidia_options_file"])
    entry = fleet()["hosts"][host]
    assert entry["result"] == "pass", entry
    sysctls, options, sysfs = entry["knobs"]["sysctl"], entry["knobs"]["nvidia_options"], entry["knobs"]["sysfs"]
    assert sysctls["verify"] == "pass" and options["verify"] == "pass" and sysfs["verify"] == "pass", entry
    assert "always on 1 attribute → never on 1 attribute" in sysfs["tuning"]["change"], sysfs
    assert "vm.swappiness: 60 → 10" in sysctls["tuning"]["change"], sysctls
    assert "NVreg_InfertuneTest=1" in options["tuning"]["change"], options


def test_they_hold_after_a_reboot_and_a_second_run_changes_nothing(tmp_path, host):
    boot_id = on_host(host, "cat /proc/sys/kernel/random/boot_id")
    rc, out = playbook("playbooks/reboot.yml", "--limit", host)
    assert rc == 0, out[-4000:]
    assert on_host(host, "cat /proc/sys/kernel/random/boot_id") != boot_id
    # The boot-time oneshot wrote the hugepage mode again (the kernel boots with its own).
    assert on_host(host, LIVE).split() == ["10", "1", "never"]
    rc, out = run(tmp_path, host)
    assert rc == 0 and recap(out)[host]["changed"] == 0, out[-4000:]
    assert "1 host(s) planned: 0 with pending changes, 0 stopped by the plan, 1 converged" in out, out[-4000:]
    assert fleet()["hosts"][host]["result"] == "pass"


def test_revert_puts_each_back_as_the_host_had_it(tmp_path, host):
    # The first apply recorded the host's own values; the option's module reloads at the reboot
    # the revert makes for it, the hugepage mode and the sysctl go back live.
    assert UNTUNED["live"] != ["10", "1", "never"], UNTUNED
    rc, out = run(tmp_path, host, book="playbooks/revert.yml")
    assert rc == 0, out[-8000:]
    assert on_host(host, LIVE).split() == UNTUNED["live"]
    left = on_host(host, f"ls {SYSCTL_DEFAULTS['sysctl_file']} {NVIDIA_DEFAULTS['nvidia_options_file']} 2>/dev/null; true")
    assert left.strip() == "", left
