"""One simulated power-on: pick the kernel like GRUB, render the hardware, mount it, exec systemd."""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys

from . import grub, kmod, kmsg, osflavor, render

HW = "/run/lab-hw"
REAL_DEVICES = "/run/lab-real-devices"
HOST = "/lab/host"
NVIDIA_SMI = "/lab/boot/nvidia-smi"
PERSISTENCED = "/lab/boot/nvidia-persistenced"
KERNEL_HOOK = "/lab/boot/kernel-postinst-nvidia"


def log(message):
    print(f"lab-boot: {message}", file=sys.stderr, flush=True)


def hang():
    """A host stuck in firmware/boot: no sshd, nothing answers, until the container is stopped."""
    log("fault no-boot: hanging in boot")
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGRTMIN + 3):
        signal.signal(sig, lambda *_: sys.exit(0))
    while True:
        signal.pause()


def link(target, path):
    if os.path.lexists(path):
        os.unlink(path)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    os.symlink(target, path)


def mount(*args):
    subprocess.run(["mount", *args], check=True)


def overlay_devices(model, devices="/sys/devices", real=REAL_DEVICES):
    """Lay the rendered MODEL over DEVICES, binding back every real entry the model lacks (virtual,
    platform, the rest of system/, ...) so links elsewhere in /sys keep their targets; the real
    machine's pci* trees stay hidden behind the model's."""
    os.makedirs(real, exist_ok=True)
    mount("--bind", devices, real)
    back = []
    for rel in ("", "system"):
        for name in sorted(os.listdir(os.path.join(real, rel))):
            target = os.path.join(model, rel, name)
            if os.path.lexists(target) or (not rel and name.startswith("pci")):
                continue
            if os.path.isdir(os.path.join(real, rel, name)):
                os.makedirs(target)
            else:
                open(target, "w").close()
            back.append(os.path.join(rel, name))
    mount("--bind", model, devices)
    for rel in back:
        mount("--bind", os.path.join(real, rel), os.path.join(devices, rel))
    subprocess.run(["umount", real], check=True)
    os.rmdir(real)


def main():
    faults = render.read_faults(os.path.join(HOST, "faults"))
    if "no-boot" in faults:
        hang()
    with open(os.path.join(HOST, "profile.json")) as f:
        profile = json.load(f)
    release, cmdline = grub.boot_entry("/", profile)
    log(f"booting {release}: {cmdline}")
    kmod.sync("/", kmod.plan("/", profile, faults))
    os.makedirs(HW, exist_ok=True)
    mount("-t", "tmpfs", "-o", "mode=0755", "lab-hw", HW)
    render.render(HW, profile, root="/", release=release, cmdline=cmdline, faults=faults,
                  hostname=socket.gethostname())
    overlay_devices(os.path.join(HW, render.DEVICES))
    for rel in render.mounts(profile):
        mount("--bind", os.path.join(HW, rel), "/" + rel)
    # The host's kernel log (hwmodel/kmsg.py): the container has none of its own.
    if not os.path.lexists("/dev/kmsg"):
        open("/dev/kmsg", "w").close()
    mount("--bind", os.path.join(HW, kmsg.KMSG), "/dev/kmsg")
    mount("-o", "remount,bind,ro", "/dev/kmsg")
    if "lockdown" in faults:
        # Lockdown refuses config-space writes: the PCI trees become read-only.
        for name in os.listdir(os.path.join(HW, render.DEVICES)):
            if name.startswith("pci"):
                path = os.path.join("/", render.DEVICES, name)
                mount("--bind", path, path)
                mount("-o", "remount,bind,ro", path)
    link(NVIDIA_SMI, "/usr/bin/nvidia-smi")
    link(PERSISTENCED, "/usr/bin/nvidia-persistenced")
    with open(os.path.join(HW, render.NVIDIA_SMI_MODEL)) as f:
        osflavor.apply("/", profile, json.load(f)["driver_loaded"])
    link(KERNEL_HOOK, "/" + kmod.HOOK)
    os.makedirs("/root/.ssh", mode=0o700, exist_ok=True)
    shutil.copyfile(os.path.join(HOST, "authorized_keys"), "/root/.ssh/authorized_keys")
    os.chmod("/root/.ssh/authorized_keys", 0o600)
    os.execv("/sbin/init", ["/sbin/init", *sys.argv[1:]])
