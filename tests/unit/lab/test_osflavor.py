"""The host's OS at boot: Debian hosts get the driver's enableable unit; the Ubuntu-flavoured host
gets Ubuntu's os-release, cloud-image GRUB file and static persistenced unit pulled in while the
driver is bound; the stand-in daemon runs without persistence mode when told so."""
import os
import signal
import subprocess

from hwmodel import osflavor
from labhw import BOOT

UNIT = "usr/lib/systemd/system/nvidia-persistenced.service"
PULL_IN = "run/systemd/system/multi-user.target.wants/lab-nvidia-bound.target"


def host(tmp_path):
    (tmp_path / "usr/lib/systemd/system").mkdir(parents=True)
    (tmp_path / "usr/lib/os-release").write_text('ID=debian\nVERSION_CODENAME=trixie\n')
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc/os-release").symlink_to("../usr/lib/os-release")
    return tmp_path


def test_a_debian_host_gets_the_enableable_unit_and_stays_debian(tmp_path):
    root = host(tmp_path)
    osflavor.apply(str(root), {"os": "trixie"}, driver_loaded=True, boot=BOOT)
    assert "[Install]\nWantedBy=multi-user.target" in (root / UNIT).read_text()
    assert "ID=debian" in (root / "etc/os-release").read_text()
    assert not (root / "etc/default/grub.d").exists() and not (root / "run").exists()


def test_the_ubuntu_host_says_ubuntu_and_ships_ubuntus_unit(tmp_path):
    root = host(tmp_path)
    osflavor.apply(str(root), {"os": "ubuntu-24.04"}, driver_loaded=True, boot=BOOT)
    for rel in ("etc/os-release", "usr/lib/os-release"):
        text = (root / rel).read_text()
        assert "\nID=ubuntu\n" in text and 'VERSION_ID="24.04"' in text and "VERSION_CODENAME=noble" in text
    assert not (root / "etc/os-release").is_symlink()
    unit = (root / UNIT).read_text()
    assert "\n[Install]" not in unit and "StopWhenUnneeded=true" in unit
    assert "ExecStart=/usr/bin/nvidia-persistenced --user nvidia-persistenced --no-persistence-mode" in unit
    assert 'GRUB_CMDLINE_LINUX_DEFAULT="console=tty1 console=ttyS0"' in (
        root / "etc/default/grub.d/50-cloudimg-settings.cfg").read_text()
    # udev's pull-in while the driver is bound: a runtime target that wants the daemon.
    assert os.readlink(root / PULL_IN) == "/run/systemd/system/lab-nvidia-bound.target"
    assert "Wants=nvidia-persistenced.service" in (root / "run/systemd/system/lab-nvidia-bound.target").read_text()
    # A second boot finds it all in place.
    osflavor.apply(str(root), {"os": "ubuntu-24.04"}, driver_loaded=True, boot=BOOT)


def test_without_the_driver_nothing_pulls_the_daemon_in(tmp_path):
    root = host(tmp_path)
    osflavor.apply(str(root), {"os": "ubuntu-24.04"}, driver_loaded=False, boot=BOOT)
    assert (root / UNIT).exists() and not os.path.lexists(root / PULL_IN)


def test_the_daemon_in_no_persistence_mode_runs_but_holds_no_gpu(render_host, seed):
    hw = render_host(seed)
    env = {**os.environ, "LAB_HW_DIR": str(hw)}
    proc = subprocess.run([os.path.join(BOOT, "nvidia-persistenced"), "--no-persistence-mode"],
                          capture_output=True, text=True, timeout=10, env=env)
    assert proc.returncode == 0 and not (hw / "nvidia-persistenced.pid").exists()
    smi = subprocess.run([os.path.join(BOOT, "nvidia-smi"), "--query-gpu=persistence_mode", "--format=csv,noheader"],
                         capture_output=True, text=True, timeout=10, env=env)
    assert smi.stdout == "Disabled\n" * 8
    found = subprocess.run(["pgrep", "-f", f"{BOOT}/nvidia-persistenced --no-persistence-mode"],
                           capture_output=True, text=True).stdout.split()
    for pid in found:
        os.kill(int(pid), signal.SIGTERM)
    assert len(found) == 1
