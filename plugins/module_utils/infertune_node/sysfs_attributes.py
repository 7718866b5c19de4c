"""Any kernel attribute under /sys, as data: each setting names its files by a glob (optionally only
those of the PCI devices a vendor and class filter keeps) and the value to write. Set live, read
back, re-applied by the boot-time oneshot and verified on its own reading (observe, judge): the
next sysfs knob is an entry of sysctl_sysfs_settings, no code.

A choice attribute reads as its list with the selection in brackets ("always [madvise] never") and
takes the bare word: the selection is what it is set to.
"""
import fnmatch
import glob
import re

from . import pcie, sysfs, words
from .gate import TuningError
from .kind import REQUIRED, Kind, Rule

# A glob under /sys: no "..", no whitespace, nothing a shell would read but the glob characters.
PATH = re.compile(r"/sys/[A-Za-z0-9_.:,+@*?\[\]/-]*[A-Za-z0-9_.:,+@*?\]-]")
# What sysfs attributes take: words of this set separated by single spaces.
VALUE = re.compile(r"[A-Za-z0-9_.,:/+=@-]+( [A-Za-z0-9_.,:/+=@-]+)*")
HEX = re.compile(r"0x[0-9a-fA-F]{4}")
BDF = re.compile(r"[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]")
KEYS = ("path", "value", "devices", "required", "drain")


def current(text):
    """What an attribute is set to: a choice attribute's selection, else its text."""
    return sysfs.bracketed(text) or (text or "").strip()


def device_of(rel):
    """The PCI function an attribute belongs to: the last BDF on its path, or None."""
    found = BDF.findall(rel)
    return found[-1] if found else None


def matches(root, setting):
    """The attribute files (absolute, as on the host) a setting names, sorted; those of PCI devices
    its devices filter keeps where it has one."""
    prefix = sysfs.path(root, "/")
    found = sorted("/" + p[len(prefix):].lstrip("/") for p in glob.glob(sysfs.path(root, setting["path"])))
    devices = setting.get("devices")
    if devices:
        keep = set(pcie.find_devices(root, devices.get("vendor", pcie.NVIDIA),
                                     devices.get("classes", list(pcie.GPU_CLASSES))))
        found = [path for path in found if device_of(path) in keep]
    return found


def _checked(setting):
    if not isinstance(setting, dict) or not {"path", "value"} <= set(setting) or set(setting) - set(KEYS):
        raise TuningError("a sysfs setting is a mapping with path and value (and devices, required, drain), got %r"
                          % (setting,))
    path, value = str(setting["path"]), str(setting["value"])
    if not PATH.fullmatch(path) or "/../" in path + "/" or "/./" in path + "/":
        raise TuningError("sysfs path %r is not a glob under /sys without .." % path)
    if not VALUE.fullmatch(value):
        raise TuningError("sysfs value %r for %s is not words of [A-Za-z0-9_.,:/+=@-]" % (value, path))
    return dict(setting, path=path, value=value)


def apply_settings(root, settings, gate):
    """Every setting's files read first (a glob that matches nothing, where required, fails before any
    write), then each file that differs written and read back."""
    settings = [_checked(setting) for setting in settings]
    before, wanted, drains = {}, {}, {}
    for setting in settings:
        files = matches(root, setting)
        if not files and setting.get("required", True) not in (False, "false", "no", "0"):
            raise TuningError("%s matches no attribute on this host%s" % (
                setting["path"], " of the devices its filter keeps" if setting.get("devices") else ""))
        for path in files:
            if path in wanted and wanted[path] != setting["value"]:
                raise TuningError("%s is set twice, to %s and %s" % (path, wanted[path], setting["value"]))
            text = sysfs.read(root, path)
            if text is None:
                raise TuningError("cannot read %s" % path)
            before[path], wanted[path] = current(text), setting["value"]
            drains[path] = setting.get("drain", True) not in (False, "false", "no", "0")
    todo = [path for path in wanted if before[path] != wanted[path]]
    for path in todo:
        gate.write_sysfs(sysfs.path(root, path), wanted[path] + "\n")
    after = dict(before)
    for path in todo:
        after[path] = wanted[path] if gate.check_mode else current(sysfs.read(root, path))
    wrong = ["%s reads %s after writing %s" % (path, after[path], wanted[path]) for path in todo
             if after[path] != wanted[path]]
    if wrong:
        raise TuningError("the kernel did not take it: " + "; ".join(wrong))
    return {"changed": bool(todo), "before": before, "after": after, "runtime_pending": bool(todo),
            # Whether the change disturbs a serving host, by its settings' drain (yes unless said).
            "disturbs": any(drains[path] for path in todo),
            "msg": "%d sysfs attribute(s) of %d setting(s) as asked" % (len(wanted), len(settings))}


# Each file of the globs, then every PCI function's vendor and class: its path, a tab, its content.
_EACH = 'for f in %s; do [ -r "$f" ] && printf \'%%s\\t%%s\\n\' "$f" "$(cat "$f")"; done'
PCI_IDS = "/sys/bus/pci/devices/*/vendor /sys/bus/pci/devices/*/class"


def observe(args):
    """The verification's read of the settings' files, then (for the device filters) every PCI
    function's vendor and class: one shell command; the globs are checked, never quoted away."""
    return "%s; echo @@; %s" % (_EACH % " ".join(_checked(setting)["path"] for setting in args["settings"]),
                                _EACH % PCI_IDS)


def _read(text):
    return dict(line.split("\t", 1) for line in text.splitlines() if "\t" in line)


def judge(args, output):
    """What differs from the settings in what observe read, one line each; [] when every file is set."""
    files_part, pci_part = (output.split("@@\n", 1) + [""])[:2]
    found, pci = _read(files_part), _read(pci_part)
    problems = []
    for setting in args["settings"]:
        setting = _checked(setting)
        files = [path for path in sorted(found) if fnmatch.fnmatchcase(path, setting["path"])]
        devices = setting.get("devices")
        if devices:
            vendor = int(devices.get("vendor", pcie.NVIDIA), 16)
            classes = {int(c, 16) for c in devices.get("classes", pcie.GPU_CLASSES)}
            files = [path for path in files if _kept(pci, device_of(path), vendor, classes)]
        if not files and setting.get("required", True) not in (False, "false", "no", "0"):
            problems.append("%s: no such attribute" % setting["path"])
        problems += ["%s %s, expected %s" % (path, current(found[path]), setting["value"]) for path in files
                     if current(found[path]) != setting["value"]]
    return problems


def _kept(pci, bdf, vendor, classes):
    base = "/sys/bus/pci/devices/%s/" % bdf
    try:
        return int(pci[base + "vendor"], 16) == vendor and int(pci[base + "class"], 16) >> 8 in classes
    except (KeyError, ValueError):
        return False


def sysfs_settings():
    """The rule of sysctl_sysfs_settings: each entry {path, value} (devices, required, drain optional)."""
    doc = ("a list of {path, value}: path a glob under /sys [A-Za-z0-9_.:,+@*?[]/-] without ..; value"
           " [A-Za-z0-9_.,:/+=@-] words; optional devices {vendor, classes} (hex), required, drain (booleans)")

    def check(value, emit):
        if not isinstance(value, (list, tuple)):
            return
        for index, item in enumerate(value):
            where = "[%d]" % index
            if not isinstance(item, dict) or not {"path", "value"} <= set(item) or set(item) - set(KEYS):
                emit("must be a mapping with path and value (devices, required, drain optional), no other key",
                     where, ", ".join(sorted(map(str, item))) if isinstance(item, dict) else item)
                continue
            path, setting = item["path"], item["value"]
            if not isinstance(path, str) or len(path) > 512 or not PATH.fullmatch(path) or "/../" in path + "/":
                emit("path must be a glob under /sys [A-Za-z0-9_.:,+@*?[]/-], without ..", where + ".path", path)
            if isinstance(setting, bool) or not isinstance(setting, (str, int)) or not VALUE.fullmatch(str(setting)):
                emit("value must be [A-Za-z0-9_.,:/+=@-] words separated by single spaces", where + ".value", setting)
            devices = item.get("devices")
            if devices is not None:
                if not isinstance(devices, dict) or set(devices) - {"vendor", "classes"}:
                    emit("devices must be a mapping of vendor and classes", where + ".devices", devices)
                else:
                    if "vendor" in devices and not (isinstance(devices["vendor"], str) and HEX.fullmatch(devices["vendor"])):
                        emit("vendor must be hex, 0x and 4 digits", where + ".devices.vendor", devices["vendor"])
                    classes = devices.get("classes", [])
                    if not isinstance(classes, list) or not classes or not all(
                            isinstance(c, str) and HEX.fullmatch(c) for c in classes):
                        emit("classes must be a non-empty list of hex, 0x and 4 digits", where + ".devices.classes",
                             classes)
    return Rule(doc, check)


def original(root, args):
    """{file: what it is set to} of every file the settings name."""
    found = {}
    for setting in (_checked(setting) for setting in args["settings"]):
        for path in matches(root, setting):
            text = sysfs.read(root, path)
            if text is not None:
                found[path] = current(text)
    return found


def revert_settings(root, settings, saved, gate):
    """Each recorded file back to what it was set to, written and read back. A file no record names
    is left: the kernel's default of an attribute is known only to the kernel (the next boot gives it)."""
    drains = {}
    for setting in (_checked(setting) for setting in settings):
        for path in matches(root, setting):
            drains[path] = setting.get("drain", True) not in (False, "false", "no", "0")
    recorded = {path: str(value) for path, value in (saved or {}).items() if sysfs.read(root, path) is not None}
    before = {path: current(sysfs.read(root, path)) for path in sorted(set(recorded) | set(drains))
              if sysfs.read(root, path) is not None}
    todo = [path for path in sorted(recorded) if before[path] != recorded[path]]
    for path in todo:
        gate.write_sysfs(sysfs.path(root, path), recorded[path] + "\n")
    after = dict(before)
    for path in todo:
        after[path] = recorded[path] if gate.check_mode else current(sysfs.read(root, path))
    wrong = ["%s reads %s after writing %s" % (path, after[path], recorded[path]) for path in todo
             if after[path] != recorded[path]]
    if wrong:
        raise TuningError("the kernel did not take it: " + "; ".join(wrong))
    left = sorted(set(before) - set(recorded))
    msg = "%d sysfs attribute(s) as before infertune" % len(recorded)
    if left:
        msg += "; %s left as %s: no record of %s before infertune" % (
            ", ".join(left), "it is" if len(left) == 1 else "they are", "it" if len(left) == 1 else "them")
    return {"changed": bool(todo), "before": before, "after": after, "runtime_pending": bool(todo),
            # A file the settings no longer name drains: its effect on a running server is not known.
            "disturbs": any(drains.get(path, True) for path in todo), "msg": msg}


KIND = Kind("sysfs", lambda root, a, gate: apply_settings(root, a["settings"], gate), {"settings": (list, REQUIRED)},
            say=words.mapping(lambda value: words.per_device(value, str, "attribute")),
            makers={"sysfs_settings": sysfs_settings}, observe=observe, judge=judge, original=original,
            revert=lambda root, a, saved, gate: revert_settings(root, a["settings"], saved, gate))
