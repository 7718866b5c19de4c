"""The NVIDIA module per kernel release: a kernel without it boots with no GPUs (fault no-driver-for-kernel)."""
import json
import os
import subprocess

from labhw import BOOT

from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node.kernel_driver import check
from hwmodel import kmod

BASE, TARGET = "6.1.0-28-amd64", "6.12.95+deb12-amd64"
# An image with the upgrade target installed too (its package's files: vmlinuz, modules.dep).
IMAGE = {"etc/infertune-lab-image.json": json.dumps({"kernel_release": TARGET, "base_kernel_release": BASE}),
         f"boot/vmlinuz-{TARGET}": "", f"lib/modules/{TARGET}/modules.dep": ""}
FAULT = {"no-driver-for-kernel": ""}


def smi_rc(hw):
    return subprocess.run([os.path.join(BOOT, "nvidia-smi"), "-L"], capture_output=True,
                          env={**os.environ, "LAB_HW_DIR": str(hw)}).returncode


def no_commands(argv):
    return 127, "", ""


def test_every_installed_kernel_has_the_module_and_gpus_load(render_host, seed):
    hw = render_host(seed, files=IMAGE)
    root = hw.parent / hw.name.replace("hw", "root")
    for release in (BASE, TARGET):
        assert check(str(root), release, no_commands)["module_files"] == [
            f"/lib/modules/{release}/kernel/nvidia-580/nvidia.ko"]
    assert sorted(os.listdir(hw / "sys/module")) == ["nvidia", "nvidia_drm", "nvidia_modeset", "nvidia_uvm"]
    assert smi_rc(hw) == 0


def test_fault_withholds_the_upgrade_target_only(render_host, seed):
    hw = render_host(seed, files=IMAGE, faults=FAULT)
    root = str(hw.parent / hw.name.replace("hw", "root"))
    assert check(root, BASE, no_commands)["ready"]
    target = check(root, TARGET, no_commands)
    assert not target["ready"] and target["fix"].startswith(f"install the prebuilt NVIDIA module package for {TARGET}")
    assert smi_rc(hw) == 0


def test_booting_a_kernel_without_the_module_has_no_gpus(render_host, seed):
    hw = render_host(seed, files=IMAGE, faults=FAULT, release=TARGET,
                     cmdline=f"BOOT_IMAGE=/boot/vmlinuz-{TARGET} ro quiet")
    assert not any(name.startswith("nvidia") for name in os.listdir(hw / "sys/module"))
    assert smi_rc(hw) == 9


def test_fault_value_names_the_release_and_boot_removes_its_module(render_host, seed):
    first = render_host(seed)
    root = first.parent / first.name.replace("hw", "root")
    assert (root / f"lib/modules/{BASE}/kernel/nvidia-580/nvidia-uvm.ko").exists()
    kmod.sync(str(root), kmod.plan(str(root), seed, {"no-driver-for-kernel": BASE}))
    assert not (root / f"lib/modules/{BASE}/kernel/nvidia-580").exists()


def test_kernel_installed_later_gets_the_module_through_the_hook(render_host, seed, tmp_path):
    hw = render_host(seed)
    assert kmod.hook(TARGET, root=str(tmp_path), hw=str(hw)).startswith("lab: NVIDIA 580 modules installed")
    assert check(str(tmp_path), TARGET, no_commands)["ready"]


def test_hook_under_the_fault_installs_nothing(render_host, seed, tmp_path):
    hw = render_host(seed, files=IMAGE, faults=FAULT)
    assert kmod.hook(TARGET, root=str(tmp_path), hw=str(hw)) == f"lab: no NVIDIA module package for {TARGET} " \
                                                                  "(fault no-driver-for-kernel)"
    assert not (tmp_path / "lib").exists()


def test_hook_script_runs_and_never_fails_the_kernel_install(tmp_path):
    proc = subprocess.run([os.path.join(BOOT, "kernel-postinst-nvidia"), TARGET, f"/boot/vmlinuz-{TARGET}"],
                          capture_output=True, text=True, env={**os.environ, "LAB_HW_DIR": str(tmp_path)})
    assert (proc.returncode, proc.stdout.split(";")[0]) == (0, f"lab: no NVIDIA module plan in {tmp_path} "
                                                               "(host booted before it existed)")
