"""The default boot entry under the distribution's kernel hooks, which the lab image runs as metal
does (zz-update-grub at each kernel install): a host that fails the NVIDIA-module proof keeps
booting its running kernel, and a default entry moved onto a kernel without the NVIDIA module,
by a hand or an upgrade, stops the host in the plan. Two hosts, recreated from the image."""
import json

import pytest

from helpers import ROOT, fresh_lab, labctl, on_host, playbook, recap

pytestmark = pytest.mark.lab

ONE_BATCH = ("-e", '{"rollout_batches": ["100%"], "rollout_allow_single_batch": true}')
VICTIM, OTHER = "lab-gpu-02", "lab-gpu-01"
RELEASE = "cat /proc/sys/kernel/osrelease"
DRIVER = "cat /sys/module/nvidia/version 2>/dev/null || echo none"


@pytest.fixture(scope="module")
def image():
    """Two fresh hosts for this module; afterwards the faults cleared and the default fleet
    again, as the next modules expect."""
    labctl("up", "--fresh", "--hosts", "2", "--profile", "seed-epyc-rtxpro6000", "--profile-map", "")
    yield json.loads((ROOT / "lab" / ".state" / "image.json").read_text())
    for host in (VICTIM, OTHER):
        labctl("fault", host, "no-driver-for-kernel", "--clear")
    fresh_lab()


def reboot(host):
    labctl("stop", host)
    labctl("start", host)


def withhold_driver(host):
    """The image's target kernel without its NVIDIA module package (the lab reboots to apply it)."""
    labctl("fault", host, "no-driver-for-kernel")
    reboot(host)


def test_a_host_failing_the_module_proof_keeps_booting_its_kernel(image):
    base, target = image["base_kernel_release"], image["kernel_release"]
    withhold_driver(VICTIM)
    assert on_host(VICTIM, RELEASE).strip() == base
    rc, out = playbook("site.yml", *ONE_BATCH, "--limit", VICTIM)
    assert rc != 0 and recap(out)[VICTIM]["failed"] == 1, out[-4000:]
    text = " ".join(out.split())
    assert f"host {VICTIM}: the NVIDIA module will not load on kernel {target}" in text, out[-4000:]
    assert f"default boot entry: kept on the running kernel {base}" in text, out[-4000:]
    # The package's zz-update-grub hook ran: the menu lists the new kernel, the default did not follow.
    assert f"vmlinuz-{target} " in on_host(VICTIM, "cat /boot/grub/grub.cfg")
    row = json.loads((ROOT / "reports" / "fleet.json").read_text())["hosts"][VICTIM]["knobs"]["boot_kernel"]
    assert row["tuning"]["msg"] == f"grub boots the running kernel {base} by default (after the failure)"
    reboot(VICTIM)
    assert on_host(VICTIM, RELEASE).strip() == base and on_host(VICTIM, DRIVER).strip() != "none"
    # A hand sets the default onto the driverless kernel: the plan (also under --check) stops the host.
    on_host(VICTIM, f"grub-set-default 'Advanced options for Debian GNU/Linux>Debian GNU/Linux, with Linux {target}'")
    rc, out = playbook("site.yml", "--check", "--limit", VICTIM)
    text = " ".join(out.split())
    assert rc != 0 and f"{VICTIM}: GPU gate: the default boot entry (" in text, out[-4000:]
    assert f"starts kernel {target}, where the NVIDIA module will not load" in text, out[-4000:]
    assert f"or make the running kernel {base} the default again" in text


def test_a_kernel_installed_outside_infertune_moves_the_default_and_the_plan_catches_it(image):
    """As a distribution upgrade does: apt installs a kernel, GRUB_DEFAULT=0 boots it next."""
    target = image["kernel_release"]
    withhold_driver(OTHER)
    on_host(OTHER, f"DEBIAN_FRONTEND=noninteractive apt-get install -y -q {image['kernel_package']} >/dev/null")
    rc, out = playbook("site.yml", "--check", "--limit", OTHER)
    text = " ".join(out.split())
    assert rc != 0 and f"{OTHER}: GPU gate: the default boot entry (" in text, out[-4000:]
    assert f"starts kernel {target}, where the NVIDIA module will not load" in text, out[-4000:]
    reboot(OTHER)
    assert on_host(OTHER, RELEASE).strip() == target and on_host(OTHER, DRIVER).strip() == "none"
