"""One simulated power-on: pick the kernel like GRUB, render the hardware, mount it, exec systemd."""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys

from . import grub, render

HW = "/run/lab-hw"
HOST = "/lab/host"
NVIDIA_SMI = "/lab/boot/nvidia-smi"


def log(message):
    print(f"lab-boot: {message}", file=sys.stderr, flush=True)


def hang():
    """A host stuck in firmware/boot: no sshd, nothing answers, until the container is stopped."""
    log("fault no-boot: hanging in boot")
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGRTMIN + 3):
        signal.signal(sig, lambda *_: sys.exit(0))
    while True:
        signal.pause()


def mount(*args):
    subprocess.run(["mount", *args], check=True)


def main():
    faults = render.read_faults(os.path.join(HOST, "faults"))
    if "no-boot" in faults:
        hang()
    with open(os.path.join(HOST, "profile.json")) as f:
        profile = json.load(f)
    release, cmdline = grub.boot_entry("/", profile)
    log(f"booting {release}: {cmdline}")
    os.makedirs(HW, exist_ok=True)
    mount("-t", "tmpfs", "-o", "mode=0755", "lab-hw", HW)
    render.render(HW, profile, root="/", release=release, cmdline=cmdline, faults=faults,
                  hostname=socket.gethostname())
    for rel in render.MOUNTS:
        mount("--bind", os.path.join(HW, rel), "/" + rel)
    if "lockdown" in faults:
        # Lockdown refuses config-space writes: the PCI tree becomes read-only.
        mount("-o", "remount,bind,ro", "/" + render.PCI)
    if os.path.lexists("/usr/bin/nvidia-smi"):
        os.unlink("/usr/bin/nvidia-smi")
    os.symlink(NVIDIA_SMI, "/usr/bin/nvidia-smi")
    os.makedirs("/root/.ssh", mode=0o700, exist_ok=True)
    shutil.copyfile(os.path.join(HOST, "authorized_keys"), "/root/.ssh/authorized_keys")
    os.chmod("/root/.ssh/authorized_keys", 0o600)
    os.execv("/sbin/init", ["/sbin/init", *sys.argv[1:]])
