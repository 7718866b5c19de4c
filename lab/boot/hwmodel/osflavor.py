"""What the host's OS (profile `os`) puts on it at boot beyond the image: the NVIDIA driver's unit as
its packages ship it and, on the Ubuntu-flavoured host (a Debian userland), what Ubuntu does
differently: os-release, the cloud image's GRUB settings, the static persistenced unit that udev
pulls in with --no-persistence-mode while the driver is bound."""
import os
import shutil

BOOT = "/lab/boot"
UNIT = "usr/lib/systemd/system/nvidia-persistenced.service"
# Stands in for the GPU's device unit that udev's TAG+="systemd", ENV{SYSTEMD_WANTS} gives on Ubuntu.
PULL_IN = "lab-nvidia-bound.target"
RUNTIME_UNITS = "run/systemd/system"
UBUNTU = {
    "ubuntu-24.04": {"version": "24.04", "codename": "noble", "pretty": "Ubuntu 24.04.3 LTS"},
}
OS_RELEASE = """PRETTY_NAME="{pretty}"
NAME="Ubuntu"
VERSION_ID="{version}"
VERSION="{version} LTS ({codename_title})"
VERSION_CODENAME={codename}
ID=ubuntu
ID_LIKE=debian
HOME_URL="https://www.ubuntu.com/"
UBUNTU_CODENAME={codename}
"""
LSB_RELEASE = """DISTRIB_ID=Ubuntu
DISTRIB_RELEASE={version}
DISTRIB_CODENAME={codename}
DISTRIB_DESCRIPTION="{pretty}"
"""


def _write(root, rel, text):
    path = os.path.join(root, rel)
    if os.path.lexists(path) and (os.path.islink(path) or not os.path.isfile(path)):
        os.unlink(path)  # Debian's /etc/os-release is a link to ../usr/lib/os-release
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as handle:
        handle.write(text)


def _ubuntu(root, name, driver_loaded, boot=BOOT):
    info = dict(UBUNTU[name], codename_title=UBUNTU[name]["codename"].title())
    for rel in ("usr/lib/os-release", "etc/os-release"):
        _write(root, rel, OS_RELEASE.format(**info))
    _write(root, "etc/lsb-release", LSB_RELEASE.format(**info))
    # The cloud image's file, as the image build left it (a later boot restores it, as a rebuild would).
    cloudimg = "etc/default/grub.d/50-cloudimg-settings.cfg"
    os.makedirs(os.path.join(root, os.path.dirname(cloudimg)), exist_ok=True)
    shutil.copyfile(os.path.join(boot, "ubuntu/50-cloudimg-settings.cfg"), os.path.join(root, cloudimg))
    shutil.copyfile(os.path.join(boot, "ubuntu/nvidia-persistenced.service"), os.path.join(root, UNIT))
    # udev binds the driver at every boot: the device unit wants the daemon (runtime, under /run).
    if driver_loaded:
        runtime = os.path.join(root, RUNTIME_UNITS)
        os.makedirs(os.path.join(runtime, "multi-user.target.wants"), exist_ok=True)
        shutil.copyfile(os.path.join(boot, "ubuntu", PULL_IN), os.path.join(runtime, PULL_IN))
        link = os.path.join(runtime, "multi-user.target.wants", PULL_IN)
        if not os.path.lexists(link):
            os.symlink(os.path.join("/", RUNTIME_UNITS, PULL_IN), link)


def apply(root, profile, driver_loaded, boot=BOOT):
    """Install the driver's unit (and on Ubuntu the rest) for the profile's os."""
    name = profile.get("os", "bookworm")
    if name in UBUNTU:
        _ubuntu(root, name, driver_loaded, boot)
        return
    # Copied where the driver's package puts it (systemd counts a unit file linked from outside
    # its search path as `linked`, not as a package's); not enabled, as on a fresh host.
    shutil.copyfile(os.path.join(boot, "nvidia-persistenced.service"), os.path.join(root, UNIT))
