"""Make the boot loader start a given kernel release by default, and read which one it starts.

Before a kernel package is installed the running kernel is pinned (pin_running): the package's
hooks (Debian's zz-update-grub, Proxmox's proxmox-boot-tool refresh) regenerate the menu, and
with GRUB_DEFAULT=0 the new kernel would boot next before its NVIDIA module is proved.
"""
import os
import shutil

from . import grubcfg, sysfs
from .gate import TuningError, run
from .kind import REQUIRED, Kind

GRUB_CFG = "/boot/grub/grub.cfg"
DROPIN = "/etc/default/grub.d/50-infertune-default.cfg"
DROPIN_CONTENT = ("# managed by infertune (boot_kernel): boot the saved entry that grub-set-default picks.\n"
                  "GRUB_DEFAULT=saved\n")


def pinned_kernel(list_output):
    """The kernel under 'Pinned kernel:' in `proxmox-boot-tool kernel list`, or None."""
    lines = [line.strip() for line in list_output.splitlines()]
    if "Pinned kernel:" not in lines:
        return None
    following = lines[lines.index("Pinned kernel:") + 1:]
    return following[0] if following and following[0] else None


def _release_of(image):
    return image.rsplit("/vmlinuz-", 1)[1] if image and "/vmlinuz-" in image else None


def default_release(root, run):
    """{release, entry, loader}: the kernel release the next boot starts by default (None when unknown).

    run(argv) -> (rc, stdout, stderr) reads proxmox-boot-tool's pin on a Proxmox host.
    """
    if root in ("/", "") and shutil.which("proxmox-boot-tool"):
        rc, out, err = run(["proxmox-boot-tool", "kernel", "list"])
        pinned = pinned_kernel(out) if rc == 0 else None
        if pinned:
            return {"release": pinned, "entry": "pinned " + pinned, "loader": "proxmox-boot-tool"}
    entry = grubcfg.default_entry(_read(root, GRUB_CFG), grubcfg.read_env(root))
    if entry is None:
        return {"release": None, "entry": None, "loader": "grub"}
    spec = ">".join(step[2] for step in entry["trail"])
    return {"release": _release_of(entry["linux"]), "entry": spec, "loader": "grub"}


def _proxmox(release, gate):
    rc, out, err = run(["proxmox-boot-tool", "kernel", "list"])
    if rc != 0:
        raise TuningError("proxmox-boot-tool kernel list failed: %s" % err.strip())
    before = pinned_kernel(out)
    if before != release:
        gate.run_or_fail(["proxmox-boot-tool", "kernel", "pin", release])
    return before, release, "proxmox-boot-tool"


def _read(root, rel):
    return sysfs.read(root, rel) or ""


def _grub(root, release, gate):
    dropin_path = sysfs.path(root, DROPIN)
    dropin_changed = _read(root, DROPIN) != DROPIN_CONTENT.strip()
    if dropin_changed:
        gate.write_file(dropin_path, DROPIN_CONTENT)
    entry = grubcfg.saved_entry_for(_read(root, GRUB_CFG), release)
    if dropin_changed or entry is None:
        gate.run_or_fail(["update-grub"])
        if not gate.check_mode:
            entry = grubcfg.saved_entry_for(_read(root, GRUB_CFG), release)
            if entry is None:
                raise TuningError("%s has no menu entry for /vmlinuz-%s after update-grub" % (GRUB_CFG, release))
    before = grubcfg.saved_entry(root)
    if entry is None:
        # Check mode on a grub.cfg that does not list the kernel yet: the id exists only after update-grub.
        return before, "(entry for %s after update-grub)" % release, "grub"
    if before != entry:
        gate.run_or_fail(["grub-set-default", "--boot-directory=%s" % sysfs.path(root, "/boot"), entry])
    return before, entry, "grub"


def apply_boot_kernel(root, release, gate):
    image = "/boot/vmlinuz-%s" % release
    running = sysfs.read(root, "/proc/sys/kernel/osrelease")
    if not os.path.exists(sysfs.path(root, image)):
        if not gate.check_mode:
            raise TuningError("%s is absent: install the kernel package for %s first" % (image, release))
        # Under --check the package task only said it would install the kernel.
        return {"changed": True, "before": grubcfg.saved_entry(root), "after": "(entry for %s once installed)" % release,
                "loader": None, "running": running, "boot_kernel_reboot_required": running != release,
                "msg": "would boot %s by default once its package is installed" % release}
    writes_before = len(gate.actions)
    if root in ("/", "") and shutil.which("proxmox-boot-tool"):
        before, after, loader = _proxmox(release, gate)
    else:
        before, after, loader = _grub(root, release, gate)
    return {"changed": len(gate.actions) > writes_before, "before": before, "after": after,
            "loader": loader, "running": running, "boot_kernel_reboot_required": running != release,
            "msg": "%s boots %s by default" % (loader, release)}


def pin_running(root, gate, run=None):
    """Boot the running kernel by default, then read the default back: the host boots what it runs
    until the target kernel is proved, whatever the kernel package's hooks do to the menu."""
    running = sysfs.read(root, "/proc/sys/kernel/osrelease")
    if not running:
        raise TuningError("cannot read the running kernel release (/proc/sys/kernel/osrelease)")
    result = apply_boot_kernel(root, running, gate)
    result["default_release"] = running if gate.check_mode else default_release(root, run or gate.runner)["release"]
    if result["default_release"] != running:
        raise TuningError("the default boot entry boots %s, not the running kernel %s, after %s set it" % (
            result["default_release"] or "an unknown kernel", running, result["loader"]))
    result["msg"] = "%s boots the running kernel %s by default" % (result["loader"], running)
    return result


def _apply(root, args, gate):
    result = apply_boot_kernel(root, args["release"], gate)
    result["reboot_required"] = bool(result.get("boot_kernel_reboot_required"))
    return result


KIND = Kind("boot_kernel", _apply, {"release": (str, REQUIRED)}, say=lambda value: "default entry %s" % value,
            nothing="default entry unknown")
