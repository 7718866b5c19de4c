"""What the plan, the verification and the drift watch call clean is what runs on the host, and
what the plan says it will do it asked the host: a kernel parameter infertune stops adding is a
pending reboot until the host boots without it, and a host whose Python has no apt bindings is
planned from apt-cache's answers, never from a guess.

The tests run in file order on the lab as they find it (its healthy hosts), converged by the fixture.
"""
import json
import subprocess

import pytest

from helpers import BIN, ROOT, on_host, playbook, recap

pytestmark = pytest.mark.lab

ONE_BATCH = ("-e", '{"rollout_batches": ["100%"], "rollout_allow_single_batch": true}')
LINK_PM = ("pcie_aspm=off", "pcie_port_pm=off")
# The lab image's serving venv: a Python without python3-apt, as a venv first on PATH is.
VENV_PYTHON = "/opt/sglang/venv/bin/python3"


@pytest.fixture(scope="module")
def hosts(lab):
    playbook("site.yml", *ONE_BATCH, check=True)
    return lab.healthy_hosts()


def running_cmdline(host):
    return on_host(host, "cat /proc/cmdline").split()


def boot_id(host):
    return on_host(host, "cat /proc/sys/kernel/random/boot_id").strip()


def fleet():
    return json.loads((ROOT / "reports" / "fleet.json").read_text())


def test_a_parameter_no_longer_added_is_pending_until_the_host_boots_without_it(hosts):
    host = hosts[-1]
    assert set(LINK_PM) <= set(running_cmdline(host))
    off = ("--limit", host, "-e", "pcie_link_pm_off=false")
    try:
        # Written, not booted: the drop-in and grub.cfg lose both, the running kernel keeps them.
        boot = boot_id(host)
        rc, out = playbook("site.yml", *off, "-e", "kernel_reboot_strategy=never")
        assert f"{host}: drain no, reboot no" in out and "  kernel_cmdline: -pcie_aspm=off -pcie_port_pm=off" in out, (
            out[-4000:])
        assert rc != 0, out[-4000:]
        assert boot_id(host) == boot and set(LINK_PM) <= set(running_cmdline(host))
        check = fleet()["hosts"][host]["knobs"]["kernel_cmdline"]
        assert check["verify"] == "fail", check
        detail = check["checks"]["kernel_cmdline"]["detail"]
        assert "running pcie_aspm=off pcie_port_pm=off, which /boot/grub/grub.cfg no longer gives" in detail, detail
        # The drift watch agrees: a reboot pending on that host.
        drift = subprocess.run([str(BIN / "infertune"), "drift", "-i", "inventory/lab", *off], cwd=ROOT,
                               capture_output=True, text=True, check=False)
        assert drift.returncode == 2, drift.stdout + drift.stderr
        entry = json.loads((ROOT / "reports" / "drift.json").read_text())["hosts"][host]
        assert entry["reboot_pending"] and entry["reboot_reasons"] == ["command line"], entry
        # The next run's plan reboots it, and after the boot nothing is pending.
        rc, out = playbook("site.yml", *off)
        assert rc == 0, out[-6000:]
        assert f"{host}: drain yes (reboot), reboot yes (command line)" in out, out[-4000:]
        assert boot_id(host) != boot and not set(LINK_PM) & set(running_cmdline(host))
        assert fleet()["hosts"][host]["result"] == "pass"
        rc, out = playbook("site.yml", *off)
        assert rc == 0 and recap(out)[host]["changed"] == 0, out[-4000:]
    finally:
        playbook("site.yml", *ONE_BATCH, "--limit", host, check=True)
    assert set(LINK_PM) <= set(running_cmdline(host))


def test_a_host_without_apt_bindings_is_planned_from_apt_cache(hosts):
    host = hosts[-2]
    venv = ("--check", "--limit", host, "-e", f"ansible_python_interpreter={VENV_PYTHON}")
    assert "No module named 'apt_pkg'" in on_host(host, f"{VENV_PYTHON} -c 'import apt_pkg' 2>&1 || true")
    package = "linux-image-6.1.0-57-rt-amd64"  # bookworm's RT flavour: offered, not installed
    candidate = next(line.split()[1] for line in on_host(host, f"apt-cache policy {package}").splitlines()
                     if line.strip().startswith("Candidate:"))
    rc, out = playbook("site.yml", *venv, "-e", f"kernel_package={package}", "-e", "kernel_release=6.1.0-57-rt-amd64")
    assert rc == 0, out[-6000:]
    assert f"  kernel_package: none -> {candidate} (installed by apt)" in out, out[-4000:]
    # A package no source offers stops the host in the plan, with the fix, as python3-apt's answer does.
    rc, out = playbook("site.yml", *venv, "-e", "kernel_package=linux-image-9.9.9-infertune-amd64",
                       "-e", "kernel_release=9.9.9-infertune-amd64")
    assert rc != 0
    text = " ".join(out.split())
    assert (f"{host}: kernel_package (role kernel): no package linux-image-9.9.9-infertune-amd64 is available"
            " from this host's apt sources (Debian GNU/Linux 12 (bookworm)); fix: set kernel_package:") in text, out[-4000:]
