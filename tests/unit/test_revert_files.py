"""Revert of the kinds that write a configuration file and set values live: sysctl (its sysctl.d file
removed, each recorded value written back), modprobe options (the file removed, a reboot where a
loaded module runs with infertune's value), sysfs attributes (each recorded file written back)."""
import os

import pytest

from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node import modprobe, sysctl, sysfs_attributes
from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node.gate import Gate
from fakehost import pci_tree, read, snapshot, write

SYSCTL_FILE = "/etc/sysctl.d/60-infertune.conf"
SETTINGS = [{"name": "kernel.numa_balancing", "value": "0"}, {"name": "vm.swappiness", "value": "10"}]
MODPROBE_FILE = "/etc/modprobe.d/infertune-nvidia.conf"
HMM = "/sys/module/nvidia_uvm/parameters/uvm_disable_hmm"
THP = "/sys/kernel/mm/transparent_hugepage/enabled"
DEFRAG = "/sys/kernel/mm/transparent_hugepage/defrag"


@pytest.fixture
def proc(tmp_path):
    root = str(tmp_path)
    write(root, "/proc/sys/kernel/numa_balancing", "1\n")
    write(root, "/proc/sys/vm/swappiness", "60\n")
    return root


def test_sysctl_file_removed_and_each_value_written_back(proc):
    args = {"settings": SETTINGS, "path": SYSCTL_FILE}
    saved = sysctl.original(proc, args)
    sysctl.apply_sysctls(proc, SETTINGS, SYSCTL_FILE, Gate())
    result = sysctl.KIND.revert(proc, args, saved, Gate())
    assert result["changed"] and result["runtime_pending"]
    assert result["before"] == {"kernel.numa_balancing": "0", "vm.swappiness": "10"}
    assert result["after"] == {"kernel.numa_balancing": "1", "vm.swappiness": "60"}
    assert not os.path.exists(os.path.join(proc, SYSCTL_FILE.lstrip("/")))
    assert read(proc, "/proc/sys/vm/swappiness") == "60"
    assert sysctl.KIND.change(result["before"], result["after"], "") == (
        "kernel.numa_balancing: 0 → 1; vm.swappiness: 10 → 60")
    assert not sysctl.KIND.revert(proc, args, saved, Gate())["changed"]


def test_sysctl_values_already_back_leave_the_file_alone_as_the_change(proc):
    args = {"settings": SETTINGS, "path": SYSCTL_FILE}
    saved = sysctl.original(proc, args)
    sysctl.apply_sysctls(proc, SETTINGS, SYSCTL_FILE, Gate())
    write(proc, "/proc/sys/kernel/numa_balancing", "1\n")  # a reboot without the file's effect
    write(proc, "/proc/sys/vm/swappiness", "60\n")
    result = sysctl.KIND.revert(proc, args, saved, Gate())
    assert result["changed"] and not result["runtime_pending"]
    assert result["differs"] == SYSCTL_FILE + " removed"


def test_sysctl_check_mode_changes_nothing(proc):
    args = {"settings": SETTINGS, "path": SYSCTL_FILE}
    saved = sysctl.original(proc, args)
    sysctl.apply_sysctls(proc, SETTINGS, SYSCTL_FILE, Gate())
    before = snapshot(proc)
    result = sysctl.KIND.revert(proc, args, saved, Gate(check_mode=True))
    assert result["changed"] and result["after"]["vm.swappiness"] == "60" and snapshot(proc) == before


def test_sysctl_without_a_record_removes_only_a_file_of_infertunes_and_leaves_values(proc):
    sysctl.apply_sysctls(proc, SETTINGS, SYSCTL_FILE, Gate())
    result = sysctl.KIND.revert(proc, {"settings": SETTINGS, "path": SYSCTL_FILE}, None, Gate())
    assert result["changed"] and not result["runtime_pending"] and "no record" in result["msg"]
    assert read(proc, "/proc/sys/vm/swappiness") == "10"
    assert not os.path.exists(os.path.join(proc, SYSCTL_FILE.lstrip("/")))
    write(proc, SYSCTL_FILE, "vm.swappiness = 1\n")  # the operator's own file of that name
    assert not sysctl.KIND.revert(proc, {"settings": SETTINGS, "path": SYSCTL_FILE}, None, Gate())["changed"]
    assert read(proc, SYSCTL_FILE) == "vm.swappiness = 1"


def test_modprobe_file_removed_and_the_loaded_module_waits_for_the_next_boot(tmp_path):
    root = str(tmp_path)
    write(root, HMM, "N\n")
    args = {"options": {"nvidia_uvm": {"uvm_disable_hmm": 1}, "nvidia": {"NVreg_X": 1}}, "path": MODPROBE_FILE}
    saved = modprobe.original(root, args)
    assert saved == {"files": {MODPROBE_FILE: None}, "live": {"nvidia_uvm": {"uvm_disable_hmm": "N"}}}
    modprobe.apply_options(root, args["options"], MODPROBE_FILE, Gate())
    write(root, HMM, "Y\n")  # the reboot the apply asked for
    result = modprobe.KIND.revert(root, args, saved, Gate())
    assert result["changed"] and result["reboot_required"]
    assert "runs with infertune's nvidia_uvm.uvm_disable_hmm until the next boot" in result["msg"]
    assert not os.path.exists(os.path.join(root, MODPROBE_FILE.lstrip("/")))
    write(root, HMM, "N\n")
    again = modprobe.KIND.revert(root, args, saved, Gate())
    assert not again["changed"] and not again["reboot_required"]


def test_modprobe_no_reboot_where_the_module_runs_its_own_value(tmp_path):
    root = str(tmp_path)
    args = {"options": {"nvidia_uvm": {"uvm_disable_hmm": 1}}, "path": MODPROBE_FILE}
    saved = modprobe.original(root, args)  # not loaded then
    modprobe.apply_options(root, args["options"], MODPROBE_FILE, Gate())
    write(root, HMM, "N\n")
    assert not modprobe.KIND.revert(root, args, saved, Gate(check_mode=True))["reboot_required"]
    write(root, HMM, "Y\n")
    assert modprobe.KIND.revert(root, args, saved, Gate(check_mode=True))["reboot_required"]
    write(root, HMM, "1\n")
    assert modprobe.KIND.revert(root, args, {"files": {}, "live": {"nvidia_uvm": {"uvm_disable_hmm": "Y"}}},
                                Gate(check_mode=True))["reboot_required"] is False


def test_modprobe_check_mode_and_a_file_that_is_not_infertunes(tmp_path):
    root = str(tmp_path)
    args = {"options": {"nvidia": {"NVreg_X": 1}}, "path": MODPROBE_FILE}
    modprobe.apply_options(root, args["options"], MODPROBE_FILE, Gate())
    before = snapshot(root)
    assert modprobe.KIND.revert(root, args, None, Gate(check_mode=True))["changed"]
    assert snapshot(root) == before
    write(root, MODPROBE_FILE, "options nvidia NVreg_X=2\n")
    assert not modprobe.KIND.revert(root, args, None, Gate())["changed"]


@pytest.fixture
def sys_root(tmp_path):
    root = pci_tree(str(tmp_path))
    write(root, THP, "always [madvise] never\n")
    write(root, DEFRAG, "always defer [madvise] never\n")
    return root


def test_sysfs_each_recorded_attribute_written_back_by_its_word(sys_root):
    settings = [{"path": THP, "value": "never", "drain": False}, {"path": DEFRAG, "value": "never"}]
    saved = sysfs_attributes.original(sys_root, {"settings": settings})
    assert saved == {THP: "madvise", DEFRAG: "madvise"}
    sysfs_attributes.apply_settings(sys_root, settings, Gate())
    result = sysfs_attributes.KIND.revert(sys_root, {"settings": settings}, saved, Gate())
    assert result["changed"] and result["after"] == saved and result["disturbs"]
    assert read(sys_root, THP) == "madvise" and read(sys_root, DEFRAG) == "madvise"
    write(sys_root, THP, "always [madvise] never\n")
    write(sys_root, DEFRAG, "always defer [madvise] never\n")
    assert not sysfs_attributes.KIND.revert(sys_root, {"settings": settings}, saved, Gate())["changed"]


def test_sysfs_the_drain_is_the_changed_settings(sys_root):
    settings = [{"path": THP, "value": "never", "drain": False}, {"path": DEFRAG, "value": "never"}]
    saved = sysfs_attributes.original(sys_root, {"settings": settings})
    sysfs_attributes.apply_settings(sys_root, settings[:1], Gate())
    result = sysfs_attributes.KIND.revert(sys_root, {"settings": settings}, saved, Gate(check_mode=True))
    assert result["changed"] and not result["disturbs"]
    # A file the settings no longer name is drained: its effect on a server is not known.
    result = sysfs_attributes.KIND.revert(sys_root, {"settings": []}, saved, Gate(check_mode=True))
    assert result["changed"] and result["disturbs"]


def test_sysfs_check_mode_and_no_record(sys_root):
    settings = [{"path": THP, "value": "never"}]
    saved = sysfs_attributes.original(sys_root, {"settings": settings})
    sysfs_attributes.apply_settings(sys_root, settings, Gate())
    before = snapshot(sys_root)
    assert sysfs_attributes.KIND.revert(sys_root, {"settings": settings}, saved, Gate(check_mode=True))["changed"]
    assert snapshot(sys_root) == before
    result = sysfs_attributes.KIND.revert(sys_root, {"settings": settings}, None, Gate())
    assert not result["changed"] and "%s left as it is: no record of it before infertune" % THP in result["msg"]
