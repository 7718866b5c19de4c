"""Make the boot loader start a given kernel release by default, and read which one it starts.

Before a kernel package is installed the running kernel is pinned (pin_running): the package's
hooks (Debian's zz-update-grub, Proxmox's proxmox-boot-tool refresh) regenerate the menu, and
with GRUB_DEFAULT=0 the new kernel would boot next before its NVIDIA module is proved.
"""
import glob
import os
import shutil

from . import cmdline, grubcfg, kernel_driver, sysfs
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


def _proxmox_host(root):
    return root in ("/", "") and shutil.which("proxmox-boot-tool")


def _pinned():
    rc, out, err = run(["proxmox-boot-tool", "kernel", "list"])
    if rc != 0:
        raise TuningError("proxmox-boot-tool kernel list failed: %s" % err.strip())
    return pinned_kernel(out)


def original(root, args):
    """What boots by default before infertune: Proxmox's pinned kernel, or GRUB's drop-in of ours
    (absent), whether grubenv existed and its saved entry."""
    if _proxmox_host(root):
        return {"loader": "proxmox-boot-tool", "pinned": _pinned()}
    return {"loader": "grub", "dropin": sysfs.content(root, DROPIN), "saved_entry": grubcfg.saved_entry(root),
            "grubenv": os.path.exists(sysfs.path(root, grubcfg.GRUBENV))}


def _next_default(root, dropin_after, saved_entry):
    """(GRUB_DEFAULT, spec, entry) of what GRUB boots by default once the drop-ins are as they will be (ours with
    dropin_after as its content, None: gone) and grubenv's saved entry is saved_entry: GRUB_DEFAULT
    as update-grub sources it (0 when unset), "saved" read from grubenv, resolved in the menu."""
    grub_file = sysfs.path(root, cmdline.GRUB_DEFAULT_FILE)
    ours = sysfs.path(root, DROPIN)
    cfgs = [p for p in sorted(glob.glob(os.path.join(sysfs.path(root, cmdline.GRUB_DROPIN_DIR), "*.cfg")))
            if p != ours or dropin_after is not None]
    setting = cmdline.source_value(([grub_file] if os.path.exists(grub_file) else []) + cfgs,
                                   variable="GRUB_DEFAULT") or "0"
    spec = (saved_entry or "0") if setting == "saved" else setting
    return setting, spec, grubcfg.resolve(_read(root, GRUB_CFG), spec)


def _not_booting(root, release, running):
    """Why the NVIDIA module would not load on RELEASE, the next boot's kernel, where a driver is
    installed for the running one (else None): such a host would come back without its GPUs."""
    if not release or release == running or not kernel_driver.module_files(root, running):
        return None
    found = kernel_driver.check(root, release, run)
    return None if found["ready"] else "%s; fix: %s" % (found["reason"], found["fix"])


def revert_boot_kernel(root, saved, gate):
    """The boot entry released: Proxmox's pin back to the recorded one (unpinned without a record or
    a pin of its own then); GRUB's drop-in of ours removed, grubenv's saved entry back to the recorded
    one (unset where there was none, grubenv removed where it did not exist), update-grub. The kernel
    GRUB boots by default is then GRUB's own choice (GRUB_DEFAULT, 0: the newest kernel). Refused
    before any change where that kernel has no NVIDIA module while the running one has; the next boot
    runs it (reboot_required) where it is not the running kernel."""
    running = sysfs.read(root, "/proc/sys/kernel/osrelease")
    writes = len(gate.actions)
    if _proxmox_host(root):
        current = _pinned()
        wanted = (saved or {}).get("pinned")
        if current != wanted:
            gate.run_or_fail(["proxmox-boot-tool", "kernel", "pin", wanted] if wanted else
                             ["proxmox-boot-tool", "kernel", "unpin"])
        after = "pinned " + wanted if wanted else "no pinned kernel (the newest boots)"
        release = wanted if gate.check_mode else default_release(root, gate.runner)["release"]
        return {"changed": len(gate.actions) > writes, "before": "pinned " + current if current else "no pinned kernel",
                "after": after, "loader": "proxmox-boot-tool", "running": running,
                "reboot_required": bool(release) and release != running,
                "msg": "proxmox-boot-tool: %s, as before infertune" % after}
    grub = (saved or {}).get("loader", "grub") == "grub"
    dropin_now = sysfs.content(root, DROPIN)
    dropin_after = saved.get("dropin") if saved and grub else None
    if saved is None and dropin_now is not None and not dropin_now.startswith("# managed by infertune"):
        dropin_after = dropin_now
    env_now = grubcfg.read_env(root)
    entry_now = env_now.get("saved_entry")
    entry_after = saved.get("saved_entry") if saved and grub else entry_now
    setting, spec, entry = _next_default(root, dropin_after, entry_after)
    release = _release_of(entry["linux"]) if entry else None
    problem = _not_booting(root, release, running)
    if problem:
        raise TuningError("the default boot entry would go back to %s (GRUB_DEFAULT %s), where the NVIDIA module will"
                          " not load: %s; or keep the entry: --skip-tags boot_kernel" % (release, spec, problem))
    setting_now = _next_default(root, dropin_now, entry_now)[0]
    before = "GRUB_DEFAULT=%s, boots %s" % (setting_now, default_release(root, gate.runner)["release"] or "an unknown kernel")
    if dropin_now != dropin_after:
        if dropin_after is None:
            gate.remove(sysfs.path(root, DROPIN))
        else:
            gate.write_file(sysfs.path(root, DROPIN), dropin_after)
    envfile = sysfs.path(root, grubcfg.GRUBENV)
    if entry_now != entry_after:
        if entry_after:
            gate.run_or_fail(["grub-set-default", "--boot-directory=%s" % sysfs.path(root, "/boot"), entry_after])
        else:
            gate.run_or_fail(["grub-editenv", envfile, "unset", "saved_entry"])
    # grubenv made by infertune's grub-set-default holds nothing else: gone, as it was.
    if saved and grub and not saved.get("grubenv") and not entry_after and os.path.exists(envfile) and not (
            set(env_now) - {"saved_entry"}):
        gate.remove(envfile)
    if dropin_now != dropin_after:
        gate.run_or_fail(["update-grub"])
    if not gate.check_mode:
        release = default_release(root, gate.runner)["release"]
    after = "GRUB_DEFAULT=%s, boots %s" % (setting, release or "an unknown kernel")
    msg = "grub boots %s by default, as before infertune (GRUB_DEFAULT=%s%s)" % (
        release or "an unknown kernel", setting, ": saved entry %s" % spec if setting == "saved" else "")
    if saved is None:
        msg += "; no record of grubenv's saved entry before infertune: left %s" % (entry_now or "unset")
    changed = len(gate.actions) > writes
    return {"changed": changed, "before": before, "after": after, "differs": "%s -> %s" % (before, after) if changed else "",
            "loader": "grub", "running": running, "reboot_required": bool(release) and release != running, "msg": msg}


KIND = Kind("boot_kernel", _apply, {"release": (str, REQUIRED)}, say=lambda value: "default entry %s" % value,
            nothing="default entry unknown", original=original,
            revert=lambda root, a, saved, gate: revert_boot_kernel(root, saved, gate))
