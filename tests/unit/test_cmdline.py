import pytest
from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node.cmdline import apply_cmdline, merge, source_value, split
from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node.gate import Gate, TuningError
from fakehost import Recorder, snapshot, write

DROPIN = "/etc/default/grub.d/60-infertune.cfg"
GRUB = ('GRUB_DEFAULT=0\nGRUB_TIMEOUT=5\nGRUB_DISTRIBUTOR=`echo Debian`\n'
        'GRUB_CMDLINE_LINUX_DEFAULT="quiet amd_pstate=passive iommu=pt intel_pstate=disable"\n'
        'GRUB_CMDLINE_LINUX=""\n')
PARAMS = ["amd_pstate=active", "processor.max_cstate=1", "nosoftlockup"]


@pytest.fixture
def grub_root(tmp_path):
    root = str(tmp_path)
    write(root, "/etc/default/grub", GRUB)
    write(root, "/etc/default/grub.d/10-console.cfg",
          'GRUB_CMDLINE_LINUX_DEFAULT="$GRUB_CMDLINE_LINUX_DEFAULT console=ttyS0,115200"\n')
    write(root, "/proc/cmdline", "BOOT_IMAGE=/boot/vmlinuz-6.1.0-18-amd64 ro quiet amd_pstate=passive\n")
    return root


def test_merge_replaces_in_place_removes_and_keeps_others():
    current = split('quiet amd-pstate=passive foo="a b" iommu=pt amd_pstate=guided splash')
    assert merge(current, ["amd_pstate=active", "mitigations=off"], ["iommu", "splash"]) == \
        ["quiet", "amd_pstate=active", 'foo="a b"', "mitigations=off"]


def test_dropin_holds_the_full_value_then_idempotent(grub_root):
    runner = Recorder()
    result = apply_cmdline(grub_root, PARAMS, ["intel_pstate"], DROPIN, True, Gate(runner=runner))
    wanted = "quiet amd_pstate=active iommu=pt console=ttyS0,115200 processor.max_cstate=1 nosoftlockup"
    assert result["changed"] and result["after"] == wanted
    assert result["before"] == "quiet amd_pstate=passive iommu=pt intel_pstate=disable console=ttyS0,115200"
    assert "GRUB_CMDLINE_LINUX_DEFAULT='%s'" % wanted in result["diff"]["after"]
    assert runner.calls == [["update-grub"]]
    assert result["kernel_cmdline_reboot_required"] is True
    again_runner = Recorder()
    again = apply_cmdline(grub_root, PARAMS, ["intel_pstate"], DROPIN, True, Gate(runner=again_runner))
    assert not again["changed"] and again["before"] == wanted and again_runner.calls == []


def test_value_update_grub_would_compute(grub_root):
    apply_cmdline(grub_root, PARAMS, [], DROPIN, False, Gate())
    files = ["%s/etc/default/grub" % grub_root, "%s/etc/default/grub.d/10-console.cfg" % grub_root,
             grub_root + DROPIN]
    assert "amd_pstate=active" in source_value(files).split()


def test_running_command_line_decides_reboot(grub_root):
    write(grub_root, "/proc/cmdline", "ro quiet amd_pstate=active processor.max_cstate=1 nosoftlockup\n")
    assert not apply_cmdline(grub_root, PARAMS, [], DROPIN, False, Gate())["kernel_cmdline_reboot_required"]
    assert apply_cmdline(grub_root, PARAMS, ["quiet"], DROPIN, False, Gate())["kernel_cmdline_reboot_required"]


def test_check_mode_changes_nothing(grub_root):
    before, runner = snapshot(grub_root), Recorder()
    result = apply_cmdline(grub_root, PARAMS, [], DROPIN, True, Gate(check_mode=True, runner=runner))
    assert result["changed"] and snapshot(grub_root) == before and runner.calls == []


def test_later_dropin_overriding_ours_fails(grub_root):
    write(grub_root, "/etc/default/grub.d/90-cloud.cfg", 'GRUB_CMDLINE_LINUX_DEFAULT="console=tty0"\n')
    with pytest.raises(TuningError, match="90-cloud.cfg changes GRUB_CMDLINE_LINUX_DEFAULT"):
        apply_cmdline(grub_root, PARAMS, [], DROPIN, False, Gate())


def test_systemd_boot_edits_kernel_cmdline(tmp_path):
    root = str(tmp_path)
    write(root, "/etc/kernel/cmdline", "root=ZFS=rpool/ROOT/pve-1 boot=zfs amd_pstate=passive\n")
    write(root, "/proc/cmdline", "root=ZFS=rpool/ROOT/pve-1 boot=zfs amd_pstate=passive\n")
    result = apply_cmdline(root, ["amd_pstate=active"], [], DROPIN, False, Gate())
    assert result["path"] == "/etc/kernel/cmdline"
    assert (tmp_path / "etc/kernel/cmdline").read_text() == "root=ZFS=rpool/ROOT/pve-1 boot=zfs amd_pstate=active\n"
    assert not (tmp_path / DROPIN.lstrip("/")).exists()


# As Ubuntu's cloud images ship it: read after /etc/default/grub, it replaces its "quiet splash".
CLOUDIMG = """# CLOUD_IMG: This file was created/modified by the Cloud Image build process
GRUB_RECORDFAIL_TIMEOUT=0
GRUB_TIMEOUT=0
GRUB_CMDLINE_LINUX_DEFAULT="console=tty1 console=ttyS0"
GRUB_TERMINAL=console
"""


@pytest.fixture
def cloud_root(tmp_path):
    root = str(tmp_path)
    write(root, "/etc/default/grub", GRUB.replace("quiet amd_pstate=passive iommu=pt intel_pstate=disable",
                                                  "quiet splash"))
    write(root, "/etc/default/grub.d/50-cloudimg-settings.cfg", CLOUDIMG)
    write(root, "/proc/cmdline", "BOOT_IMAGE=/boot/vmlinuz-6.8.0-48-generic ro console=tty1 console=ttyS0\n")
    return root


def test_our_dropin_wins_over_the_cloud_image_file_and_keeps_its_consoles(cloud_root):
    result = apply_cmdline(cloud_root, PARAMS, [], DROPIN, False, Gate())
    wanted = "console=tty1 console=ttyS0 amd_pstate=active processor.max_cstate=1 nosoftlockup"
    assert result["before"] == "console=tty1 console=ttyS0" and result["after"] == wanted
    # What update-grub computes: /etc/default/grub, then grub.d/*.cfg in name order.
    files = [cloud_root + "/etc/default/grub", cloud_root + "/etc/default/grub.d/50-cloudimg-settings.cfg",
             cloud_root + DROPIN]
    assert source_value(files) == wanted
    assert not apply_cmdline(cloud_root, PARAMS, [], DROPIN, False, Gate())["changed"]


def test_a_dropin_named_to_sort_before_the_cloud_image_file_is_refused(cloud_root):
    with pytest.raises(TuningError, match="50-cloudimg-settings.cfg changes GRUB_CMDLINE_LINUX_DEFAULT"):
        apply_cmdline(cloud_root, PARAMS, [], "/etc/default/grub.d/10-infertune.cfg", False, Gate())
