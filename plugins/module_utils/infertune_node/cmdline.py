"""Configured kernel command line: GRUB drop-in or systemd-boot's /etc/kernel/cmdline."""
import glob
import os
import re
import shlex
import shutil

from . import sysfs
from .gate import TuningError, run

GRUB_DEFAULT_FILE = "/etc/default/grub"
GRUB_DROPIN_DIR = "/etc/default/grub.d"
KERNEL_CMDLINE = "/etc/kernel/cmdline"
VARIABLE = "GRUB_CMDLINE_LINUX_DEFAULT"
HEADER = ("# managed by infertune (kernel_cmdline): the full %s, so parameters set\n"
          "# in /etc/default/grub can be replaced or removed without editing that file.\n" % VARIABLE)

# Sources the files in the order update-grub does and prints the resulting value.
_SOURCE_SCRIPT = 'unset %s; for f in "$@"; do . "$f" || exit 1; done; printf %%s "$%s"' % (VARIABLE, VARIABLE)


def split(cmdline):
    """Tokens of a command line, keeping quoted values such as foo="a b" whole."""
    return re.findall(r'(?:[^\s"]|"[^"]*")+', cmdline or "")


def key(token):
    # The kernel treats - and _ alike in parameter names.
    return token.split("=", 1)[0].replace("-", "_")


def merge(current, params, remove):
    """Replace same-key tokens in place, drop removed keys, append new ones, keep the rest."""
    wanted = {key(p): p for p in params}
    dropped = {key(k) for k in remove}
    result, placed = [], set()
    for token in current:
        k = key(token)
        if k in dropped or k in placed:
            continue
        if k in wanted:
            result.append(wanted[k])
            placed.add(k)
        else:
            result.append(token)
    result.extend(p for p in params if key(p) not in placed and key(p) not in dropped)
    return result


def source_value(files, preset=None):
    """GRUB_CMDLINE_LINUX_DEFAULT after sourcing files with sh, as update-grub would."""
    script = _SOURCE_SCRIPT
    if preset is not None:
        script = script.replace("unset %s;" % VARIABLE, "%s=%s;" % (VARIABLE, shlex.quote(preset)))
    rc, out, err = run(["sh", "-c", script, "sh"] + files)
    if rc != 0:
        raise TuningError("sourcing %s failed: %s" % (" ".join(files), err.strip()))
    return out


def reboot_required(running, params, remove):
    tokens = split(running)
    pairs = {(key(t), t.partition("=")[2]) for t in tokens}
    missing = [p for p in params if (key(p), p.partition("=")[2]) not in pairs]
    lingering = [k for k in remove if key(k) in {key(t) for t in tokens}]
    return bool(missing or lingering)


def _grub_plan(root, params, remove, dropin):
    if os.path.dirname(dropin) != GRUB_DROPIN_DIR or not dropin.endswith(".cfg"):
        raise TuningError("dropin=%r must be a .cfg file in %s, or update-grub ignores it" % (dropin, GRUB_DROPIN_DIR))
    dropin_path = sysfs.path(root, dropin)
    grub_file = sysfs.path(root, GRUB_DEFAULT_FILE)
    head = [grub_file] if os.path.exists(grub_file) else []
    directory = sysfs.path(root, GRUB_DROPIN_DIR)
    cfgs = sorted(glob.glob(os.path.join(directory, "*.cfg")))
    others = [p for p in cfgs if p != dropin_path]
    before = source_value(head + cfgs)
    # Our own drop-in is left out, so a second run computes the same value (idempotence).
    wanted = " ".join(merge(split(source_value(head + others)), params, remove))
    later = [p for p in others if p > dropin_path]
    if later and source_value(later, preset=wanted) != wanted:
        raise TuningError("%s changes %s after %s and would undo it; move that setting into the "
                          "infertune parameters" % (" or ".join(later), VARIABLE, dropin))
    content = HEADER + "%s=%s\n" % (VARIABLE, shlex.quote(wanted))
    return dropin, before, wanted, content


def apply_cmdline(root, params, remove, dropin, update, gate):
    systemd_boot = os.path.exists(sysfs.path(root, KERNEL_CMDLINE))
    if systemd_boot:
        target = KERNEL_CMDLINE
        before = sysfs.read(root, KERNEL_CMDLINE) or ""
        after = " ".join(merge(split(before), params, remove))
        content = after + "\n"
    else:
        target, before, after, content = _grub_plan(root, params, remove, dropin)
    target_path = sysfs.path(root, target)
    old_content = ""
    if os.path.exists(target_path):
        with open(target_path) as handle:
            old_content = handle.read()
    changed = old_content != content
    if changed:
        gate.write_file(target_path, content)
        if update and not systemd_boot:
            gate.run_or_fail(["update-grub"])
        elif update and shutil.which("proxmox-boot-tool"):
            gate.run_or_fail(["proxmox-boot-tool", "refresh"])
    running = sysfs.read(root, "/proc/cmdline") or ""
    return {
        "changed": changed, "before": before, "after": after, "running": running, "path": target,
        "kernel_cmdline_reboot_required": reboot_required(running, params, remove),
        "diff": {"before": old_content, "after": content, "before_header": target, "after_header": target},
        "msg": "configured command line: %s" % after,
    }
