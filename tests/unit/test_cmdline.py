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


# A grub.cfg as update-grub writes it: the default entry's line is root= ro, then
# GRUB_CMDLINE_LINUX and GRUB_CMDLINE_LINUX_DEFAULT, then Ubuntu's $vt_handoff.
def grub_cfg(value):
    return ("set default=\"0\"\nif [ \"${recordfail}\" != 1 ]; then\n  set vt_handoff=vt.handoff=7\nelse\n"
            "  set vt_handoff=\nfi\n"
            "menuentry 'Debian GNU/Linux' --class debian $menuentry_id_option 'gnulinux-simple-x' {\n"
            "\tlinux\t/boot/vmlinuz-6.12.95+deb12-amd64 root=/dev/sda1 ro  %s $vt_handoff\n}\n" % value)


def booted(root, value, *, running=None):
    """The host booted from a grub.cfg generated with GRUB_CMDLINE_LINUX_DEFAULT=value."""
    write(root, "/boot/grub/grub.cfg", grub_cfg(value))
    write(root, "/proc/cmdline", "BOOT_IMAGE=/boot/vmlinuz-6.12.95+deb12-amd64 root=/dev/sda1 ro %s%s\n"
          % (value, running or ""))


WITH_LINK_PM = PARAMS + ["pcie_aspm=off", "pcie_port_pm=off"]


def converged(grub_root, params):
    """Apply params, then a grub.cfg regenerated from the result and a boot from it."""
    result = apply_cmdline(grub_root, params, [], DROPIN, False, Gate())
    booted(grub_root, result["after"], running=" vt.handoff=7")
    assert not apply_cmdline(grub_root, params, [], DROPIN, False, Gate())["kernel_cmdline_reboot_required"]
    return result["after"]


def test_a_parameter_no_longer_added_is_a_pending_reboot_until_the_boot(grub_root):
    converged(grub_root, WITH_LINK_PM)
    # The plan (check mode): the drop-in loses both, the running kernel still has them.
    plan = apply_cmdline(grub_root, PARAMS, [], DROPIN, True, Gate(check_mode=True))
    assert plan["changed"] and plan["kernel_cmdline_reboot_required"]
    assert plan["lingering"] == ["pcie_aspm=off", "pcie_port_pm=off"] and plan["missing"] == []
    assert "still running pcie_aspm=off pcie_port_pm=off (not configured)" in plan["msg"]
    # Applied, grub.cfg regenerated by update-grub: still pending while that kernel runs.
    applied = apply_cmdline(grub_root, PARAMS, [], DROPIN, True, Gate(runner=Recorder()))
    assert applied["kernel_cmdline_reboot_required"] and applied["lingering"] == ["pcie_aspm=off", "pcie_port_pm=off"]
    write(grub_root, "/boot/grub/grub.cfg", grub_cfg(applied["after"]))
    again = apply_cmdline(grub_root, PARAMS, [], DROPIN, True, Gate(check_mode=True))
    assert not again["changed"] and again["kernel_cmdline_reboot_required"]
    # After the boot from that grub.cfg nothing is pending.
    booted(grub_root, applied["after"])
    assert not apply_cmdline(grub_root, PARAMS, [], DROPIN, True, Gate(check_mode=True))["kernel_cmdline_reboot_required"]


def test_a_parameter_the_running_kernel_has_and_no_configuration_gives_is_pending(grub_root):
    after = converged(grub_root, PARAMS)
    booted(grub_root, after, running=" nomodeset")  # typed at the GRUB prompt, say
    result = apply_cmdline(grub_root, PARAMS, [], DROPIN, False, Gate())
    assert result["kernel_cmdline_reboot_required"] and result["lingering"] == ["nomodeset"]


def test_the_boot_loaders_own_tokens_and_grub_variables_are_not_a_difference(grub_root):
    after = converged(grub_root, PARAMS)
    # No vt.handoff this boot (the variable was set empty), and - for _ in a name.
    booted(grub_root, after.replace("processor.max_cstate", "processor.max-cstate"))
    result = apply_cmdline(grub_root, PARAMS, [], DROPIN, False, Gate())
    assert not result["kernel_cmdline_reboot_required"], result["msg"]


def test_a_parameter_the_next_boot_adds_is_missing_until_the_boot(grub_root):
    after = converged(grub_root, PARAMS)
    plan = apply_cmdline(grub_root, PARAMS + ["mitigations=off"], [], DROPIN, True, Gate(check_mode=True))
    assert plan["kernel_cmdline_reboot_required"] and plan["missing"] == ["mitigations=off"]
    assert plan["lingering"] == [] and "not running mitigations=off" in plan["msg"]
    assert after  # the converged value is what the host booted with


def test_systemd_boot_compares_the_running_line_with_the_file(tmp_path):
    root = str(tmp_path)
    write(root, "/etc/kernel/cmdline", "root=ZFS=rpool/ROOT/pve-1 boot=zfs pcie_aspm=off\n")
    write(root, "/proc/cmdline", "initrd=\\EFI\\proxmox\\6.8.12-4-pve\\initrd.img root=ZFS=rpool/ROOT/pve-1 boot=zfs"
          " pcie_aspm=off\n")
    assert not apply_cmdline(root, [], [], DROPIN, False, Gate())["kernel_cmdline_reboot_required"]
    result = apply_cmdline(root, [], ["pcie_aspm"], DROPIN, False, Gate())
    assert result["kernel_cmdline_reboot_required"] and result["lingering"] == ["pcie_aspm=off"]
