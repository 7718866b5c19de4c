"""Configured kernel command line: GRUB drop-in or systemd-boot's /etc/kernel/cmdline."""
import glob
import os
import re
import shlex
import shutil
from collections import Counter

from . import cpu, grubcfg, pcie_fabric, sysfs
from .gate import TuningError, run
from .kind import REQUIRED, Kind, Rule
from .original import give_back

GRUB_DEFAULT_FILE = "/etc/default/grub"
GRUB_DROPIN_DIR = "/etc/default/grub.d"
KERNEL_CMDLINE = "/etc/kernel/cmdline"
GRUB_CFG = "/boot/grub/grub.cfg"
# Put on the command line by the boot loader itself (GRUB, the EFI stub), named by no configuration.
LOADER_KEYS = ("BOOT_IMAGE", "initrd")
VARIABLE = "GRUB_CMDLINE_LINUX_DEFAULT"
HEADER = ("# managed by infertune (kernel_cmdline): the full %s, so parameters set\n"
          "# in /etc/default/grub can be replaced or removed without editing that file.\n" % VARIABLE)

# Sources the files in the order update-grub does and prints the resulting value.
_SOURCE_SCRIPT = 'unset {0}; for f in "$@"; do . "$f" || exit 1; done; printf %s "${0}"'


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


def source_value(files, preset=None, variable=VARIABLE):
    """GRUB_CMDLINE_LINUX_DEFAULT (or another variable of GRUB's: GRUB_DEFAULT) after sourcing files
    with sh, as update-grub would."""
    script = _SOURCE_SCRIPT.format(variable)
    if preset is not None:
        script = script.replace("unset %s;" % variable, "%s=%s;" % (variable, shlex.quote(preset)))
    rc, out, err = run(["sh", "-c", script, "sh"] + files)
    if rc != 0:
        raise TuningError("sourcing %s failed: %s" % (" ".join(files), err.strip()))
    return out


def norm(token):
    """A token as the kernel compares it: - and _ alike in the name, the value as written."""
    name, sep, value = token.partition("=")
    return name.replace("-", "_") + sep + value


def boot_differs(running, next_boot, optional=()):
    """(missing, lingering): tokens the next boot's command line has and the running one lacks, and
    tokens the running one has and the next boot will not (a parameter infertune, or anyone, stopped
    adding). The boot loader's own tokens (BOOT_IMAGE=, initrd=) are left out on both sides; optional
    tokens (what a GRUB variable of the entry may expand to) may run or not."""
    run = [t for t in split(running) if key(t) not in LOADER_KEYS]
    wanted = [t for t in next_boot if key(t) not in LOADER_KEYS]
    have, want = Counter(map(norm, run)), Counter(map(norm, wanted))
    missing, extra = want - have, have - want
    lingering = [t for t in run if extra[norm(t)] > 0 and norm(t) not in set(map(norm, optional))]
    return [t for t in wanted if missing[norm(t)] > 0], lingering


def grub_next_boot(root, before, after):
    """(tokens, optional) of the command line GRUB's default entry boots with once grub.cfg is
    generated from `after` (GRUB_CMDLINE_LINUX_DEFAULT's tokens), whether it was generated from
    `before` or already from `after`: the entry's tokens neither value accounts for are the boot
    loader's and the other generators' (root=, ro, GRUB_CMDLINE_LINUX's) and stay; optional are the
    values the entry's GRUB variables may expand to. None when grub.cfg has no default entry."""
    text = sysfs.read(root, GRUB_CFG)
    entry = grubcfg.default_entry(text, grubcfg.read_env(root)) if text else None
    if entry is None or entry.get("args") is None:
        return None
    accounted = Counter(map(norm, before)) | Counter(map(norm, after))
    own, optional = [], []
    for token in split(entry["args"]):
        if token.startswith("$"):
            optional += [t for value in grubcfg.assignments(text, token.strip("${}")) for t in split(value)]
        elif accounted[norm(token)] > 0:
            accounted[norm(token)] -= 1
        else:
            own.append(token)
    return own + list(after), optional


def pending_reboot(root, running, params, remove, before, after, systemd_boot):
    """(missing, lingering, compared with): how the running command line differs from the one the
    boot loader gives at the next boot, ours and the distribution's alike. Without a grub.cfg entry
    to read, the parameters asked for and the removed keys are checked, and any token of the
    configured value before this run (infertune's earlier parameters among them) that the next
    value drops."""
    if systemd_boot:
        return boot_differs(running, split(after)) + (KERNEL_CMDLINE,)
    found = grub_next_boot(root, split(before), split(after))
    if found is not None:
        return boot_differs(running, *found) + (GRUB_CFG,)
    tokens = split(running)
    pairs = {norm(t) for t in tokens}
    dropped = {key(k) for k in remove} | {norm(t) for t in split(before)} - {norm(t) for t in split(after)}
    missing = [p for p in params if norm(p) not in pairs]
    lingering = [t for t in tokens if key(t) in dropped or norm(t) in dropped]
    return missing, lingering, "the configured value (no grub.cfg entry to read)"


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
    missing, lingering, compared = pending_reboot(root, running, params, remove, before, after, systemd_boot)
    msg = "configured command line: %s" % after
    if missing or lingering:
        msg += "; the running kernel's differs from the next boot's (%s): %s" % (compared, "; ".join(filter(None, [
            "not running " + " ".join(missing) if missing else "",
            "still running " + " ".join(lingering) + " (not configured)" if lingering else ""])))
    return {
        "changed": changed, "before": before, "after": after, "running": running, "path": target,
        "kernel_cmdline_reboot_required": bool(missing or lingering), "missing": missing, "lingering": lingering,
        "diff": {"before": old_content, "after": content, "before_header": target, "after_header": target},
        "msg": msg,
    }


# The variables' rules (input validation, on the control node): key, key=value, key="value".
_CMDLINE_KEY = r"[A-Za-z0-9_][A-Za-z0-9_.-]*"
_CMDLINE_VALUE = r"[A-Za-z0-9_.,:/+=@-]*"
_CMDLINE_QUOTED = r'"[A-Za-z0-9_.,:/+=@ -]*"'
_CMDLINE_PARAM = re.compile(r"(%s)(=(%s|%s))?" % (_CMDLINE_KEY, _CMDLINE_VALUE, _CMDLINE_QUOTED))
PROTECTED_CMDLINE_KEYS = ("root", "boot", "init", "ro", "rw")


def cmdline_param():
    doc = 'key, key=value or key="value"; keys [A-Za-z0-9_.-], values [A-Za-z0-9_.,:/+=@-] (spaces only inside quotes)'

    def check(value, emit):
        if not isinstance(value, str):
            return
        if value.strip() == "":
            emit("must not be an empty entry")
        elif not _CMDLINE_PARAM.fullmatch(value):
            emit("must be " + doc)
        elif key(value) == "amd_pstate":
            emit("amd_pstate comes from cpu_power_amd_pstate_mode; do not list it here")
    return Rule(doc, check)


def cmdline_remove_key():
    doc = "a key [A-Za-z0-9_.-], not %s" % ", ".join(PROTECTED_CMDLINE_KEYS)

    def check(value, emit):
        if not isinstance(value, str):
            return
        if value.strip() == "":
            emit("must not be an empty entry")
        elif not re.fullmatch(_CMDLINE_KEY, value):
            emit("must be a parameter key [A-Za-z0-9_.-] (no =value)")
        elif key(value) in PROTECTED_CMDLINE_KEYS:
            emit("must not remove %s (the host would not boot)" % value)
    return Rule(doc, check)


def _params(root, args):
    """(parameters, keys to remove): the parameters plus those meant for this host's CPU vendor
    (amd_pstate= on AMD only) and the PCIe fabric's (IOMMU parameter named for the vendor)."""
    vendor = cpu.vendor(root)
    params = list(args["params"]) + list((args["vendor_params"] or {}).get(vendor, []))
    remove = list(args["remove"])
    fabric = args["fabric"]
    if fabric:
        extra, dropped = pcie_fabric.cmdline_params(vendor, fabric["iommu"], fabric.get("link_pm_off", True))
        params += extra
        remove += [k for k in dropped if k not in remove]
    return params, remove


def _apply(root, args, gate):
    params, remove = _params(root, args)
    result = apply_cmdline(root, params, remove, args["dropin"], args["update"], gate)
    result["reboot_required"] = result["kernel_cmdline_reboot_required"]
    return result


def _change(before, after, differs):
    """The parameters added and removed, where the value is a command line."""
    if not (isinstance(before, str) and isinstance(after, str)):
        return None
    old, new = before.split(), after.split()
    added, removed = [w for w in new if w not in old], [w for w in old if w not in new]
    parts = (["added " + " ".join(added)] if added else []) + (["removed " + " ".join(removed)] if removed else [])
    return "; ".join(parts) or None


def original(root, args):
    """The file the knob writes, as it was: /etc/kernel/cmdline's content (systemd-boot), or the
    GRUB drop-in's (None: absent, as before a first run)."""
    target = KERNEL_CMDLINE if os.path.exists(sysfs.path(root, KERNEL_CMDLINE)) else args["dropin"]
    return {"files": {target: sysfs.content(root, target)}}


def revert_cmdline(root, dropin, update, saved, gate):
    """The GRUB drop-in removed (or given back what it held before infertune), update-grub; on
    systemd-boot /etc/kernel/cmdline given back its recorded content (no record: left, since the
    tokens there before infertune are not known). The running kernel's command line differs from
    the next boot's until a reboot (reboot_required)."""
    systemd_boot = os.path.exists(sysfs.path(root, KERNEL_CMDLINE))
    files = dict((saved or {}).get("files") or {})
    if not systemd_boot:
        files.setdefault(dropin, None)
    grub_file = sysfs.path(root, GRUB_DEFAULT_FILE)
    head = [grub_file] if os.path.exists(grub_file) else []
    cfgs = sorted(glob.glob(os.path.join(sysfs.path(root, GRUB_DROPIN_DIR), "*.cfg")))
    before = (sysfs.read(root, KERNEL_CMDLINE) or "") if systemd_boot else source_value(head + cfgs)
    changes, changed, diffs = give_back(root, files, saved, HEADER, gate)
    gone = [sysfs.path(root, change[0]) for change in changes]
    if systemd_boot:
        after = " ".join(split(files.get(KERNEL_CMDLINE))) if KERNEL_CMDLINE in files else before
    elif gate.check_mode:
        # The drop-ins as they will be (one given back its own content is read as gone: the case of a
        # file of that name before infertune's first run, which no default makes).
        after = source_value(head + [p for p in cfgs if p not in gone])
    else:
        after = source_value(head + sorted(glob.glob(os.path.join(sysfs.path(root, GRUB_DROPIN_DIR), "*.cfg"))))
    if changed and update:
        if not systemd_boot:
            gate.run_or_fail(["update-grub"])
        elif shutil.which("proxmox-boot-tool"):
            gate.run_or_fail(["proxmox-boot-tool", "refresh"])
    running = sysfs.read(root, "/proc/cmdline") or ""
    missing, lingering, compared = pending_reboot(root, running, [], [], before, after, systemd_boot)
    msg = ", ".join(changed) if changed else "no command line file of infertune's"
    if systemd_boot and saved is None:
        msg = "no record of %s before infertune: left as it is (%s)" % (KERNEL_CMDLINE, before)
    msg += "; configured command line: %s" % after
    if missing or lingering:
        msg += "; the running kernel's differs from the next boot's (%s): %s" % (compared, "; ".join(filter(None, [
            "not running " + " ".join(missing) if missing else "",
            "still running " + " ".join(lingering) + " (not configured)" if lingering else ""])))
    return {"changed": bool(changed), "before": before, "after": after, "running": running,
            "reboot_required": bool(missing or lingering), "missing": missing, "lingering": lingering, "diff": diffs,
            "msg": msg}


KIND = Kind("kernel_cmdline", _apply,
            {"params": (list, REQUIRED), "vendor_params": (dict, None), "fabric": (dict, None), "remove": (list, []),
             "dropin": (str, REQUIRED), "update": (bool, True)},
            nothing="no parameters", change=_change,
            makers={"cmdline_param": cmdline_param, "cmdline_remove_key": cmdline_remove_key}, original=original,
            revert=lambda root, a, saved, gate: revert_cmdline(root, a["dropin"], a["update"], saved, gate))
