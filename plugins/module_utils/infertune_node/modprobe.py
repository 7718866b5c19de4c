"""Kernel module options in /etc/modprobe.d and how they compare with the loaded modules."""
import math
import os
import re

from . import sysfs, words
from .kind import REQUIRED, Kind, Rule, is_int
from .original import give_back

HEADER = ("# managed by infertune (modprobe_options): read when a module loads;\n"
          "# a module that is already loaded keeps its values until reload or reboot.\n")
_TRUE = {"y", "yes", "1", "true", "on"}
_FALSE = {"n", "no", "0", "false", "off"}


def format_value(value):
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)


def normalize(value):
    """Compare bool parameters by meaning: sysfs shows Y/N for values written as 1/0."""
    text = str(value).strip()
    if text.lower() in _TRUE:
        return "1"
    if text.lower() in _FALSE:
        return "0"
    return text


def render(options):
    lines = [HEADER]
    for module in sorted(options):
        params = options[module] or {}
        if params:
            pairs = " ".join("%s=%s" % (p, format_value(params[p])) for p in sorted(params))
            lines.append("options %s %s\n" % (module, pairs))
    return "".join(lines)


def live(root, options):
    """Per module: loaded or not, the parameters whose running value differs, and those the loaded
    module does not show (the kernel ignores a parameter its module lacks: no reload sets it)."""
    report = {}
    for module, params in sorted(options.items()):
        sys_name = module.replace("-", "_")
        loaded = os.path.isdir(sysfs.path(root, "/sys/module/%s" % sys_name))
        differs, unknown = {}, []
        for param, value in sorted((params or {}).items()):
            current = sysfs.read(root, "/sys/module/%s/parameters/%s" % (sys_name, param)) if loaded else None
            if loaded and current is None:
                unknown.append(param)
            elif loaded and normalize(current) != normalize(format_value(value)):
                differs[param] = {"wanted": format_value(value), "live": current}
        report[module] = {"loaded": loaded, "differs": differs, "unknown": unknown}
    return report


def module_params(root, pattern="nvidia*"):
    """{module: {param: value}} of loaded modules matching pattern, for facts."""
    result = {}
    for module in sysfs.entries(root, "/sys/module/" + pattern):
        params = {}
        for param in sysfs.entries(root, "/sys/module/%s/parameters/*" % module):
            value = sysfs.read(root, "/sys/module/%s/parameters/%s" % (module, param))
            if value is not None:
                params[param] = value
        result[module] = params
    return result


def apply_options(root, options, path, gate):
    target = sysfs.path(root, path)
    before = ""
    if os.path.exists(target):
        with open(target) as handle:
            before = handle.read()
    after = render(options)
    if before != after:
        gate.write_file(target, after)
    state = "unchanged" if before == after else "would be updated" if gate.check_mode else "updated"
    report = live(root, options)
    reload_required = any(m["loaded"] and m["differs"] for m in report.values())
    return {"changed": before != after, "before": before, "after": after, "path": path,
            "live": report, "modprobe_options_reload_required": reload_required,
            "diff": {"before": before, "after": after, "before_header": path, "after_header": path},
            "msg": "%s %s; %s%s" % (path, state, "a loaded module needs a reload or reboot" if reload_required
                                    else "no loaded module runs with other values", _unknown(report))}


def _unknown(report):
    """Said, never waited for: a reboot would not change it, and one per run would never end."""
    names = ["%s.%s" % (module, param) for module, entry in report.items() for param in entry["unknown"]]
    return "; not shown by the loaded module (unknown to it?): %s" % ", ".join(names) if names else ""


_MODULE_NAME = re.compile(r"[A-Za-z0-9_-]+")


def module_options():
    doc = "module -> {parameter: value}; names [A-Za-z0-9_-]+, values without whitespace or #"

    def check(value, emit):
        if not isinstance(value, dict):
            return
        for module, params in value.items():
            if not isinstance(module, str) or not _MODULE_NAME.fullmatch(module) or len(module) > 64:
                emit("module name must match [A-Za-z0-9_-]+", "", module)
                continue
            if params is None:
                continue
            if not isinstance(params, dict):
                emit("must be a mapping of parameter to value", ".%s" % module, params)
                continue
            for param, item in params.items():
                where = ".%s" % module
                if not isinstance(param, str) or not _MODULE_NAME.fullmatch(param) or len(param) > 64:
                    emit("parameter name must match [A-Za-z0-9_-]+", where, param)
                    continue
                where += ".%s" % param
                if isinstance(item, bool):
                    continue
                if is_int(item):
                    if item.bit_length() > 64:
                        emit("must be a 64-bit number", where, item)
                    continue
                if isinstance(item, float):
                    if not math.isfinite(item):
                        emit("must be a finite number", where, item)
                    continue
                if not isinstance(item, str):
                    emit("value must be a string, number or boolean", where, item)
                elif item == "" or len(item) > 1024 or re.search(r"[\s#]", item):
                    emit("value must be non-empty, without whitespace or #", where, item)
    return Rule(doc, check)


def _flag_reload(result):
    # Load-time options of a loaded module run at the next load: a reboot.
    result["reboot_required"] = bool(result.get("modprobe_options_reload_required"))
    return result


def parse(content):
    """{module: {parameter: value}} of a file's `options` lines."""
    found = {}
    for line in (content or "").splitlines():
        fields = line.split("#", 1)[0].split()
        if len(fields) >= 2 and fields[0] == "options":
            found.setdefault(fields[1], {}).update(w.split("=", 1) for w in fields[2:] if "=" in w)
    return found


def original(root, args):
    """The options file's content (None: absent) and the running value of each option it sets, of
    the modules loaded."""
    running = {}
    for module, params in sorted((args["options"] or {}).items()):
        sys_name = module.replace("-", "_")
        values = {param: sysfs.read(root, "/sys/module/%s/parameters/%s" % (sys_name, param)) for param in params or {}}
        values = {param: value for param, value in values.items() if value is not None}
        if values:
            running[module] = values
    return {"files": {args["path"]: sysfs.content(root, args["path"])}, "live": running}


def revert_options(root, path, saved, gate):
    """The options file removed (or given back what it held before infertune). A loaded module that
    runs with one of its options, where the record says it ran otherwise (or there is no record),
    keeps it until it is loaded again: the next boot (reboot_required)."""
    files = dict((saved or {}).get("files") or {})
    files.setdefault(path, None)
    live = (saved or {}).get("live") or {}
    changes, changed, diffs = give_back(root, files, saved, HEADER, gate)
    pending = []
    for change in changes:
        for module, params in sorted(parse(change[1]).items()):
            for param, value in sorted(params.items()):
                running = sysfs.read(root, "/sys/module/%s/parameters/%s" % (module.replace("-", "_"), param))
                was = live.get(module, {}).get(param)
                if running is not None and normalize(running) == normalize(value) and (
                        was is None or normalize(was) != normalize(value)):
                    pending.append("%s.%s" % (module, param))
    before = "".join(sysfs.content(root, rel) or "" for rel in sorted(files))
    msg = ", ".join(changed) if changed else "no options file of infertune's"
    if pending:
        msg += "; a loaded module runs with infertune's %s until the next boot" % ", ".join(pending)
    return {"changed": bool(changed), "before": before, "after": "".join(files[rel] or "" for rel in sorted(files)),
            "differs": msg if changed else "", "path": path, "diff": diffs, "reboot_required": bool(pending),
            "modprobe_options_reload_required": bool(pending), "msg": msg}


KIND = Kind("modprobe_options", lambda root, a, gate: _flag_reload(apply_options(root, a["options"], a["path"], gate)),
            {"options": (dict, REQUIRED), "path": (str, REQUIRED)},
            say=lambda value: words.lines(value) or "no options", nothing="no options file",
            makers={"module_options": module_options}, original=original,
            revert=lambda root, a, saved, gate: revert_options(root, a["path"], saved, gate))
