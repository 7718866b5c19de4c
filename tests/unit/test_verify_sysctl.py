"""tests/verify/test_sysctl.py against a fake host tree: every entry of the resolved list, live and
as systemd-sysctl sets it at boot, with no key of its own."""
import subprocess

from fakehost import write
from verifycheck import load, outcome

VERIFY = load("test_sysctl")
CONF = "/etc/sysctl.d/60-infertune-numa.conf"
WANT = {"sysctl_settings": [{"name": "kernel.numa_balancing", "value": "0"}, {"name": "vm.swappiness", "value": 10}],
        "sysctl_file": CONF}


def shell(root):
    """sh for the check: its command run with every absolute path under root, root taken out of the answer."""
    def sh(command):
        command = command.replace(" /", " %s/" % root)
        return subprocess.run(["sh", "-c", command], capture_output=True, text=True).stdout.replace(root, "")
    return sh


def host(tmp_path, numa="0", swappiness="10", conf="kernel.numa_balancing = 0\nvm.swappiness = 10\n", files=None):
    root = str(tmp_path)
    write(root, "/proc/sys/kernel/numa_balancing", numa + "\n")
    write(root, "/proc/sys/vm/swappiness", swappiness + "\n")
    write(root, CONF, "# managed by infertune (sysctl)\n" + conf)
    for path, text in (files or {}).items():
        write(root, path, text)
    return shell(root)


def test_a_tuned_host_passes(tmp_path):
    assert outcome(VERIFY.test_sysctl, "h1", host(tmp_path), WANT) == "pass"


def test_every_entry_is_read_live_and_from_the_file(tmp_path):
    found = outcome(VERIFY.test_sysctl, "h1", host(tmp_path, swappiness="60", conf="kernel.numa_balancing = 0\n"), WANT)
    assert found == ("h1: sysctls: expected kernel.numa_balancing=0, vm.swappiness=10 live and from %s at boot, found"
                     " vm.swappiness live 60; %s does not set vm.swappiness; no sysctl.d file sets vm.swappiness"
                     " (the kernel default applies at boot)" % (CONF, CONF))


def test_a_later_file_that_wins_at_boot_is_named(tmp_path):
    sh = host(tmp_path, files={"/etc/sysctl.d/99-local.conf": "vm/swappiness=30\n",
                               "/usr/lib/sysctl.d/99-local.conf": "vm.swappiness = 1\n"})
    found = outcome(VERIFY.test_sysctl, "h1", sh, WANT)
    assert found.endswith("found boot applies vm.swappiness = 30 from /etc/sysctl.d/99-local.conf")


def test_a_key_the_kernel_lacks_fails(tmp_path):
    want = dict(WANT, sysctl_settings=WANT["sysctl_settings"] + [{"name": "vm.infertune_test", "value": "1"}])
    assert outcome(VERIFY.test_sysctl, "h1", host(tmp_path), want).endswith("found vm.infertune_test: not on this kernel")


def test_boot_settings_follow_systemd_sysctl_order_and_masking():
    grep = ("/usr/lib/sysctl.d/50-a.conf:vm.swappiness = 1\n"
            "/etc/sysctl.d/50-a.conf:vm.swappiness=5\n"
            "/etc/sysctl.d/50-a.conf:# vm.swappiness = 7\n"
            "/etc/sysctl.conf:-vm.swappiness = 9\n"
            "/run/sysctl.d/10-b.conf:kernel.numa_balancing = 1\n")
    assert VERIFY.boot_settings(grep, {"vm.swappiness": "10", "kernel.numa_balancing": "0"}) == {
        "kernel.numa_balancing": [("/run/sysctl.d/10-b.conf", "1")],
        "vm.swappiness": [("/etc/sysctl.d/50-a.conf", "5"), ("/etc/sysctl.conf", "9")]}
