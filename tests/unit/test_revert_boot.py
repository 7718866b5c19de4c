"""Revert of the boot-time kinds: the GRUB command line drop-in (or systemd-boot's /etc/kernel/cmdline)
and the boot entry released, the kernel holds infertune set released, the kernel package left."""
import os

import pytest

from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node import (
    apt_hold, boot_kernel, cmdline, packages)
from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node.gate import Gate, TuningError
from fakehost import Recorder, read, snapshot, write
from test_apt_hold import status, ubuntu
from test_boot_kernel import GRUB_CFG, NEW, OLD, WANTED, boot_root  # noqa: F401 (a fixture)
from test_cmdline import DROPIN, PARAMS, grub_root  # noqa: F401 (a fixture)

ENV = "/boot/grub/grubenv"


class Grub(Recorder):
    """GRUB's tools as far as revert needs them: update-grub writes grub.cfg's default from the
    drop-ins (saved, where infertune's is there), grub-editenv unsets a variable."""

    def __init__(self, root):
        super().__init__()
        self.root = root

    def __call__(self, argv):
        super().__call__(argv)
        if argv == ["update-grub"]:
            saved = os.path.exists(os.path.join(self.root, boot_kernel.DROPIN.lstrip("/")))
            text = read(self.root, "/boot/grub/grub.cfg").replace('set default="0"', 'set default="${saved_entry}"')
            write(self.root, "/boot/grub/grub.cfg", text if saved else text.replace('set default="${saved_entry}"',
                                                                                      'set default="0"'))
        elif argv[0] == "grub-editenv":
            path = argv[1]
            with open(path) as handle:
                lines = [line for line in handle.read().splitlines() if not line.startswith(argv[3] + "=")]
            with open(path, "w") as handle:
                handle.write("\n".join(lines) + "\n")
        return 0, "", ""


def test_cmdline_dropin_removed_update_grub_and_a_reboot_for_what_still_runs(grub_root):
    saved = cmdline.original(grub_root, {"dropin": DROPIN})
    assert saved == {"files": {DROPIN: None}}
    cmdline.apply_cmdline(grub_root, PARAMS, ["intel_pstate"], DROPIN, True, Gate(runner=Recorder()))
    write(grub_root, "/proc/cmdline", "BOOT_IMAGE=/boot/vmlinuz-6.1.0-18-amd64 ro quiet amd_pstate=active iommu=pt"
                                      " console=ttyS0,115200 processor.max_cstate=1 nosoftlockup\n")
    runner = Recorder()
    result = cmdline.revert_cmdline(grub_root, DROPIN, True, saved, Gate(runner=runner))
    assert result["changed"] and runner.calls == [["update-grub"]]
    assert not os.path.exists(os.path.join(grub_root, DROPIN.lstrip("/")))
    assert result["after"] == "quiet amd_pstate=passive iommu=pt intel_pstate=disable console=ttyS0,115200"
    assert result["reboot_required"] and "still running" in result["msg"]
    assert cmdline.KIND.change(result["before"], result["after"], "") == (
        "added amd_pstate=passive intel_pstate=disable; removed amd_pstate=active processor.max_cstate=1 nosoftlockup")
    again = Recorder()
    assert not cmdline.revert_cmdline(grub_root, DROPIN, True, saved, Gate(runner=again))["changed"] and not again.calls


def test_cmdline_check_mode_predicts_the_next_value_and_changes_nothing(grub_root):
    cmdline.apply_cmdline(grub_root, PARAMS, [], DROPIN, True, Gate(runner=Recorder()))
    before, runner = snapshot(grub_root), Recorder()
    result = cmdline.revert_cmdline(grub_root, DROPIN, True, {"files": {DROPIN: None}}, Gate(check_mode=True,
                                                                                              runner=runner))
    assert result["changed"] and "processor.max_cstate=1" not in result["after"].split()
    assert snapshot(grub_root) == before and runner.calls == []


def test_cmdline_without_a_record_removes_a_dropin_of_infertunes_only(grub_root):
    cmdline.apply_cmdline(grub_root, PARAMS, [], DROPIN, False, Gate())
    assert cmdline.revert_cmdline(grub_root, DROPIN, False, None, Gate())["changed"]
    write(grub_root, DROPIN, 'GRUB_CMDLINE_LINUX_DEFAULT="quiet"\n')  # not ours
    assert not cmdline.revert_cmdline(grub_root, DROPIN, False, None, Gate())["changed"]


def test_cmdline_systemd_boot_gets_its_recorded_content_back(tmp_path):
    root = str(tmp_path)
    write(root, "/etc/kernel/cmdline", "root=ZFS=rpool/ROOT/pve-1 boot=zfs amd_pstate=passive\n")
    write(root, "/proc/cmdline", "root=ZFS=rpool/ROOT/pve-1 boot=zfs amd_pstate=active\n")
    saved = cmdline.original(root, {"dropin": DROPIN})
    cmdline.apply_cmdline(root, ["amd_pstate=active"], [], DROPIN, False, Gate())
    result = cmdline.revert_cmdline(root, DROPIN, False, saved, Gate())
    assert result["changed"] and read(root, "/etc/kernel/cmdline") == "root=ZFS=rpool/ROOT/pve-1 boot=zfs amd_pstate=passive"
    assert result["reboot_required"]
    unknown = cmdline.revert_cmdline(root, DROPIN, False, None, Gate())
    assert not unknown["changed"] and unknown["msg"].startswith("no record of /etc/kernel/cmdline before infertune")


def test_boot_entry_released_to_grubs_own_default(boot_root):
    os.unlink(os.path.join(boot_root, ENV.lstrip("/")))  # as on a fresh Debian: no grubenv yet
    saved = boot_kernel.original(boot_root, {"release": NEW})
    assert saved == {"loader": "grub", "dropin": None, "saved_entry": None, "grubenv": False}
    runner = Grub(boot_root)
    boot_kernel.apply_boot_kernel(boot_root, NEW, Gate(runner=runner))
    write(boot_root, ENV, "# GRUB Environment Block\nsaved_entry=%s\n" % WANTED)  # what grub-set-default wrote
    write(boot_root, "/proc/sys/kernel/osrelease", NEW + "\n")
    runner = Grub(boot_root)
    result = boot_kernel.KIND.revert(boot_root, {"release": NEW}, saved, Gate(runner=runner))
    assert result["changed"] and not result["reboot_required"]
    assert runner.calls == [["grub-editenv", boot_root + ENV, "unset", "saved_entry"], ["update-grub"]]
    assert not os.path.exists(os.path.join(boot_root, boot_kernel.DROPIN.lstrip("/")))
    assert not os.path.exists(os.path.join(boot_root, ENV.lstrip("/"))), "grubenv did not exist before infertune"
    assert 'set default="0"' in read(boot_root, "/boot/grub/grub.cfg")
    # GRUB_DEFAULT=0: the first entry, the newest kernel.
    assert result["before"] == "GRUB_DEFAULT=saved, boots %s" % NEW
    assert result["after"] == "GRUB_DEFAULT=0, boots %s" % NEW
    again = Grub(boot_root)
    assert not boot_kernel.KIND.revert(boot_root, {"release": NEW}, saved, Gate(runner=again))["changed"]
    assert again.calls == []


def test_boot_entry_back_to_a_recorded_saved_entry_and_a_reboot_when_it_is_not_running(boot_root):
    older = WANTED.replace(NEW, OLD)
    write(boot_root, "/etc/default/grub", "GRUB_DEFAULT=saved\n")
    saved = {"loader": "grub", "dropin": None, "saved_entry": older, "grubenv": True}
    boot_kernel.apply_boot_kernel(boot_root, NEW, Gate(runner=Grub(boot_root)))
    write(boot_root, ENV, "# GRUB Environment Block\nsaved_entry=%s\n" % WANTED)
    write(boot_root, "/proc/sys/kernel/osrelease", NEW + "\n")
    runner = Grub(boot_root)
    result = boot_kernel.KIND.revert(boot_root, {"release": NEW}, saved, Gate(check_mode=True, runner=runner))
    assert result["changed"] and result["reboot_required"] and runner.calls == []
    assert result["after"] == "GRUB_DEFAULT=saved, boots %s" % OLD
    assert result["msg"].endswith("(GRUB_DEFAULT=saved: saved entry %s)" % older)


def test_boot_entry_refused_before_any_change_where_that_kernel_has_no_nvidia_module(boot_root):
    write(boot_root, "/lib/modules/%s/kernel/nvidia-580/nvidia.ko" % NEW, b"module")
    os.makedirs(os.path.join(boot_root, "lib/modules", OLD))
    write(boot_root, "/proc/sys/kernel/osrelease", NEW + "\n")
    write(boot_root, "/etc/default/grub", "GRUB_DEFAULT=saved\n")
    older = WANTED.replace(NEW, OLD)
    boot_kernel.apply_boot_kernel(boot_root, NEW, Gate(runner=Grub(boot_root)))
    before = snapshot(boot_root)
    with pytest.raises(TuningError, match="would go back to %s .* NVIDIA module will not load" % OLD):
        boot_kernel.KIND.revert(boot_root, {"release": NEW}, {"loader": "grub", "dropin": None, "saved_entry": older,
                                                             "grubenv": True}, Gate(runner=Grub(boot_root)))
    assert snapshot(boot_root) == before


def test_boot_entry_without_a_record_removes_our_dropin_and_leaves_grubenv(boot_root):
    boot_kernel.apply_boot_kernel(boot_root, NEW, Gate(runner=Grub(boot_root)))
    result = boot_kernel.KIND.revert(boot_root, {"release": NEW}, None, Gate(runner=Grub(boot_root)))
    assert result["changed"] and "no record of grubenv's saved entry before infertune: left 0" in result["msg"]
    assert read(boot_root, ENV).startswith("# GRUB Environment Block\nsaved_entry=0")


def test_holds_infertune_set_released_and_their_record_removed(tmp_path):
    root = ubuntu(tmp_path, ("linux-image-amd64", True))  # held by the operator
    apt_hold.apply_kernel_hold(root, True, Gate(runner=Recorder()))
    write(root, "/var/lib/dpkg/status", status(("linux-image-generic-hwe-24.04", True), ("linux-image-amd64", True),
                                               ("linux-modules-nvidia-580-server-generic-hwe-24.04", True)))
    runner = Recorder()
    result = apt_hold.KIND.revert(root, {"hold": True}, None, Gate(runner=runner))
    assert runner.calls == [["apt-mark", "unhold", "linux-image-generic-hwe-24.04",
                             "linux-modules-nvidia-580-server-generic-hwe-24.04"]]
    assert result["changed"] and result["after"] == "linux-image-amd64"
    assert not os.path.exists(os.path.join(root, "var/lib/infertune")), "its directory went with the last record"
    again = Recorder()
    assert not apt_hold.KIND.revert(root, {"hold": True}, None, Gate(runner=again))["changed"]


def test_hold_release_under_check_mode_changes_nothing(tmp_path):
    root = ubuntu(tmp_path)
    apt_hold.apply_kernel_hold(root, True, Gate(runner=Recorder()))
    before, runner = snapshot(root), Recorder()
    assert apt_hold.KIND.revert(root, {"hold": True}, None, Gate(check_mode=True, runner=runner))["changed"]
    assert snapshot(root) == before and runner.calls == []


def test_the_kernel_package_is_left_installed_and_said(tmp_path):
    root = ubuntu(tmp_path)
    result = packages.KIND.revert(root, {"name": "linux-image-6.8.0-60-generic", "variables": None}, None, Gate())
    assert not result["changed"] and "linux-image-6.8.0-60-generic 1 left installed" in result["msg"]
    assert "not installed" in packages.KIND.revert(root, {"name": "x", "variables": None}, None, Gate())["msg"]
