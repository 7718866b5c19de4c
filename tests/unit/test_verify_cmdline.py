"""tests/verify/test_kernel.py's command-line check against what the boot loader gives the next boot."""
from verifycheck import load, outcome, resolved

VERIFY = load("test_kernel")
CONFTEST = load("conftest")
GRUBENV = "# GRUB Environment Block\nsaved_entry=gnulinux-simple-x\n"


def grub_cfg(value):
    return ("set default=\"${saved_entry}\"\nset vt_handoff=vt.handoff=7\n"
            "menuentry 'Debian GNU/Linux' $menuentry_id_option 'gnulinux-simple-x' {\n"
            "\tlinux\t/boot/vmlinuz-6.12.95+deb12-amd64 root=/dev/sda1 ro  %s $vt_handoff\n}\n" % value)


WANTED = "quiet pcie_aspm=off pcie_port_pm=off iommu=pt amd_pstate=active processor.max_cstate=1"


def basics(running, configured, kernel_cmdline=""):
    return {"release": "6.12.95+deb12-amd64", "cpu_vendor": "AuthenticAMD",
            "cmdline": ("BOOT_IMAGE=/boot/vmlinuz-6.12.95+deb12-amd64 root=/dev/sda1 ro " + running).split(),
            "boot_line": CONFTEST.boot_line(kernel_cmdline, grub_cfg(configured), GRUBENV)}


def check(found, **overrides):
    return outcome(VERIFY.test_kernel_cmdline, "h1", found, resolved(overrides), "AuthenticAMD")


def test_running_what_the_boot_loader_gives_passes():
    assert check(basics(WANTED + " vt.handoff=7", WANTED)) == "pass"
    assert check(basics(WANTED, WANTED)) == "pass"  # $vt_handoff may expand to nothing


def test_a_parameter_no_longer_configured_but_running_fails_until_the_reboot():
    # pcie_link_pm_off=false: the drop-in and grub.cfg lost both, the running kernel has them.
    configured = WANTED.replace(" pcie_aspm=off pcie_port_pm=off", "")
    found = check(basics(WANTED, configured), pcie_link_pm_off="false")
    assert "running pcie_aspm=off pcie_port_pm=off, which /boot/grub/grub.cfg no longer gives" in found


def test_a_parameter_the_next_boot_gives_that_does_not_run_fails():
    found = check(basics(WANTED, WANTED + " mitigations=off"))
    assert "/boot/grub/grub.cfg gives mitigations=off, which does not run" in found


def test_systemd_boot_is_read_from_its_file():
    found = basics("root=ZFS=rpool " + WANTED, "", kernel_cmdline="root=ZFS=rpool " + WANTED + " boot=zfs\n")
    found["cmdline"] = ["initrd=\\EFI\\initrd.img"] + found["cmdline"][3:]
    assert "/etc/kernel/cmdline gives boot=zfs" in check(found)


def test_without_a_boot_loader_to_read_only_the_parameters_are_checked():
    found = dict(basics(WANTED + " nomodeset", WANTED), boot_line=None)
    assert check(found) == "pass"
