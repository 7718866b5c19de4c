"""Controller-side check of every infertune variable before any host is changed.

Each part held once:

* ``roles/*/meta/argument_specs.yml`` (every entry point): which variables exist, their type,
  ``elements``, ``choices``, ``default``, ``no_log`` and description. The rollout shape is not
  a role; its declaration is ``ROLLOUT_SPEC`` below (or ``playbooks/meta/argument_specs.yml``,
  entry ``rollout``, when that file exists).
* What an argument spec cannot express (ranges, character sets, per-element and per-key
  rules), each rule with the text docs/variables.md's table shows: for a variable a knob's arguments
  read, in that knob's catalog entry (``rules`` in ``roles/infertune/vars/main.yml``, data
  naming the rule makers of ``MAKERS``); for the others, ``RULES`` below. ``rules()`` joins them.

Applied to every declared variable on top: no control characters (newlines included) anywhere,
keys of mappings too, and ``type: path`` means an absolute path. Cross-variable rules live in
``_cross_checks``.

``validate(variables)`` returns a list of ``Problem``; it never raises on odd input (None,
nested lists, ints for strings, huge numbers, cycles). Pure Python: yaml and the host side's
sysctl name pattern (plugins/module_utils) are the only imports beyond the standard library.
"""
from __future__ import annotations

import difflib
import ipaddress
import math
import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache, wraps
from pathlib import Path
from urllib.parse import urlsplit

import yaml
from infertune_node import sysctl

from . import COLLECTION
from . import publish
from .host_plan import PUBLISHED
from .report import SUMMARY_PREFIX

PROJECT = COLLECTION


def per_root(func):
    """Cache FUNC(root) once per project root, however it is called (load_specs() and
    load_specs(root) are one entry): the input check runs in a worker per host, each reading
    the YAML anew."""
    cached = lru_cache(maxsize=8)(func)

    @wraps(func)
    def wrapper(root=str(PROJECT)):
        return cached(str(root))
    wrapper.cache_clear = cached.cache_clear
    return wrapper


HIDDEN = "<hidden>"
_MISSING = object()
_MAX_DEPTH = 32
_MAX_NODES = 100_000
_MAX_SHOWN = 60


# --------------------------------------------------------------------------- problems

@dataclass
class Problem:
    """One refusal: where (variable, or variable[index] / variable.key), the rule, the value."""

    variable: str
    rule: str
    where: str = ""
    value: object = _MISSING
    secret: bool = False

    def __str__(self):
        text = "%s: %s" % (self.where or self.variable, self.rule)
        if self.value is not _MISSING:
            text += ", got " + (HIDDEN if self.secret else show(self.value))
        return text

    def line(self, host=None):
        return ("host %s: %s" % (host, self) if host is not None else str(self))


def show(value):
    """A short, single-line rendering of any value; never raises."""
    try:
        if isinstance(value, bool) or value is None:
            text = repr(value)
        elif isinstance(value, int):
            text = repr(int(value)) if value.bit_length() < 200 else "an integer of %d bits" % value.bit_length()
        elif isinstance(value, float):
            text = repr(float(value))
        elif isinstance(value, str):
            text = repr(str(value))
        elif isinstance(value, Mapping):
            text = "a mapping" if value else "{}"
        elif isinstance(value, (list, tuple)):
            text = "a list" if value else "[]"
        else:
            text = "a %s" % type(value).__name__
    except Exception:  # noqa: BLE001 - a message must come out whatever the value is
        text = "an unprintable %s" % type(value).__name__
    if len(text) > _MAX_SHOWN:
        text = text[:_MAX_SHOWN - 5] + "...'" if text.startswith("'") else text[:_MAX_SHOWN - 3] + "..."
    return text


# --------------------------------------------------------------------------- rules

class Rule:
    """check(value, emit) calls emit(rule_text, suffix="", value=...) for each problem."""

    def __init__(self, doc, check):
        self.doc = doc
        self.check = check


def _ok_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def number_range(low=None, high=None, unit=""):
    """Numbers low..high (inclusive); values were converted to the declared type already."""
    if high is None:
        doc = ">= %s" % low
    elif low is None:
        doc = "<= %s" % high
    else:
        doc = "%s-%s" % (low, high)
    doc += unit

    def check(value, emit):
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            if (low is not None and value < low) or (high is not None and value > high):
                emit("must be " + doc)
    return Rule(doc, check)


def fraction_or_zero():
    def check(value, emit):
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            if not (value == 0 or 0 < value < 1):
                emit("must be 0 (sglang's default) or a fraction 0 < x < 1")
    return Rule("0 (sglang's default) or 0 < x < 1", check)


def pattern(regex, doc, allow_empty=False):
    compiled = re.compile(regex)

    def check(value, emit):
        if not isinstance(value, str):
            return
        if value == "":
            if not allow_empty:
                emit("must not be empty")
            return
        if len(value) > 4096 or not compiled.fullmatch(value):
            emit("must be " + doc)
    return Rule(doc + ("" if not allow_empty else " or empty"), check)


def non_empty():
    def check(value, emit):
        if isinstance(value, (list, tuple, Mapping)) and len(value) == 0:
            emit("must not be empty")
    return Rule("non-empty", check)


def each(rule, doc=None):
    """Apply rule to every element of a list."""
    def check(value, emit):
        if isinstance(value, (list, tuple)):
            for index, item in enumerate(value):
                rule.check(item, _sub(emit, "[%d]" % index, item))
    return Rule(doc or "each " + rule.doc, check)


def _sub(emit, suffix, item):
    def inner(text, sub="", value=_MISSING):
        emit(text, suffix + sub, item if value is _MISSING else value)
    return inner


def file_suffix(suffix, directory=None):
    doc = "a %s file" % suffix + (" in %s" % directory if directory else "")

    def check(value, emit):
        if not isinstance(value, str):
            return
        if not value.endswith(suffix) or value.endswith("/" + suffix):
            emit("must be a *%s file (other names are ignored)" % suffix)
        elif directory and value.rsplit("/", 1)[0] != directory:
            emit("must be in %s (other directories are ignored)" % directory)
    return Rule(doc, check)


def file_mode():
    """A file mode as an octal string ("0644"): no setuid, setgid or sticky bit, no world write."""
    def check(value, emit):
        text = str(value) if _ok_int(value) or isinstance(value, str) else None
        if text is None or not re.fullmatch(r"0?[0-7]{3,4}", text):
            emit('must be an octal mode string such as "0644"')
            return
        mode = int(text, 8)
        if mode & 0o7000:
            emit("must not set setuid, setgid or the sticky bit")
        elif mode & 0o002:
            emit("must not be world-writable")
    return Rule('octal string, no setuid/setgid/sticky, not world-writable', check)


# Kernel command line: key, key=value, key="value"; the kernel treats - and _ alike in keys.
_CMDLINE_KEY = r"[A-Za-z0-9_][A-Za-z0-9_.-]*"
_CMDLINE_VALUE = r"[A-Za-z0-9_.,:/+=@-]*"
_CMDLINE_QUOTED = r'"[A-Za-z0-9_.,:/+=@ -]*"'
_CMDLINE_PARAM = re.compile(r"(%s)(=(%s|%s))?" % (_CMDLINE_KEY, _CMDLINE_VALUE, _CMDLINE_QUOTED))
PROTECTED_CMDLINE_KEYS = ("root", "boot", "init", "ro", "rw")
# Keys the pcie role puts on the command line (plugins/module_utils/infertune_node/pcie_fabric.py).
IOMMU_CMDLINE_KEYS = ("iommu", "amd_iommu", "intel_iommu", "iommu.passthrough")
LINK_PM_CMDLINE_KEYS = ("pcie_aspm", "pcie_port_pm")


def _cmdline_key(token):
    return token.split("=", 1)[0].replace("-", "_")


def cmdline_param():
    doc = 'key, key=value or key="value"; keys [A-Za-z0-9_.-], values [A-Za-z0-9_.,:/+=@-] (spaces only inside quotes)'

    def check(value, emit):
        if not isinstance(value, str):
            return
        if value.strip() == "":
            emit("must not be an empty entry")
        elif not _CMDLINE_PARAM.fullmatch(value):
            emit("must be " + doc)
        elif _cmdline_key(value) == "amd_pstate":
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
        elif _cmdline_key(value) in PROTECTED_CMDLINE_KEYS:
            emit("must not remove %s (the host would not boot)" % value)
    return Rule(doc, check)


_LABEL = re.compile(r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?")


def host_address():
    def check(value, emit):
        if not isinstance(value, str):
            return
        try:
            ipaddress.ip_address(value)
            return
        except ValueError:
            pass
        labels = value.split(".")
        if (len(value) > 253 or not all(_LABEL.fullmatch(label) for label in labels)
                or all(label.isdigit() for label in labels)):
            emit("must be an IP address or a host name")
    return Rule("an IP address or a host name", check)


_HUB_PART = r"[A-Za-z0-9][A-Za-z0-9._-]{0,95}"
_HUB_ID = re.compile(r"%s(/%s)?" % (_HUB_PART, _HUB_PART))


def model_path():
    doc = "an absolute path or a hub id (org/name: [A-Za-z0-9._-])"

    def check(value, emit):
        if not isinstance(value, str):
            return
        if value.startswith("/"):
            if "/../" in value + "/":
                emit("must not contain '..'")
            return
        if not _HUB_ID.fullmatch(value) or ".." in value:
            emit("must be " + doc)
    return Rule(doc, check)


def unit_text():
    """Text that reaches a systemd unit line: systemd expands % specifiers and \\ escapes."""
    doc = "no % or \\ (systemd specifiers and escapes in the unit)"

    def check(value, emit):
        if not isinstance(value, str):
            return
        if value.strip() == "":
            emit("must not be empty")
        elif "%" in value or "\\" in value:
            emit("must not contain % or \\ (it reaches the unit's Description=, where systemd expands them)")
        elif len(value) > 256:
            emit("must be at most 256 characters")
    return Rule(doc, check)


_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
RESERVED_ENV = ("INFERTUNE_SGLANG_API_KEY",)


def environment():
    doc = "names [A-Za-z_][A-Za-z0-9_]*, scalar values"

    def check(value, emit):
        if not isinstance(value, Mapping):
            return
        for name, item in value.items():
            if not isinstance(name, str) or not _ENV_NAME.fullmatch(name) or len(name) > 256:
                emit("environment name must match [A-Za-z_][A-Za-z0-9_]*", "", name)
            elif name in RESERVED_ENV:
                emit("%s is reserved (sglang_api_key sets it)" % name, "", name)
            elif isinstance(item, (Mapping, list, tuple)) or item is None:
                emit("value must be a string, number or boolean", ".%s" % name, item)
    return Rule(doc, check)


_MODULE_NAME = re.compile(r"[A-Za-z0-9_-]+")


def module_options():
    doc = "module -> {parameter: value}; names [A-Za-z0-9_-]+, values without whitespace or #"

    def check(value, emit):
        if not isinstance(value, Mapping):
            return
        for module, params in value.items():
            if not isinstance(module, str) or not _MODULE_NAME.fullmatch(module) or len(module) > 64:
                emit("module name must match [A-Za-z0-9_-]+", "", module)
                continue
            if params is None:
                continue
            if not isinstance(params, Mapping):
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
                if _ok_int(item):
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


# Names in the dotted form the host side takes (a name becomes a path under /proc/sys); values
# are what sysctl -n prints: words of this set separated by single spaces (multi-field sysctls),
# nothing a shell, a unit or sysctl.d would read as syntax.
_SYSCTL_NAME = sysctl.NAME
_SYSCTL_VALUE = re.compile(r"[A-Za-z0-9_.,:/+=@-]+( [A-Za-z0-9_.,:/+=@-]+)*")


# Sysctls whose range the kernel documents: a value outside it would be refused by the kernel
# only when the runtime stage writes it, after the drain, rather than before any change.
SYSCTL_RANGES = {"kernel.numa_balancing": (0, 3), "vm.swappiness": (0, 200)}


def sysctl_settings():
    doc = ("a list of {name, value}: names dotted [a-z0-9_]+(.[A-Za-z0-9_-]+)+, each once; values"
           " [A-Za-z0-9_.,:/+=@-] words separated by single spaces; %s" % ", ".join(
               "%s %d-%d" % (name, low, high) for name, (low, high) in SYSCTL_RANGES.items()))

    def check(value, emit):
        if not isinstance(value, (list, tuple)):
            return
        seen = set()
        for index, item in enumerate(value):
            where = "[%d]" % index
            if not isinstance(item, Mapping) or set(item) != {"name", "value"}:
                emit("must be a mapping with the keys name and value, no other", where,
                     ", ".join(sorted(map(str, item))) if isinstance(item, Mapping) else item)
                continue
            name, setting = item["name"], item["value"]
            if not isinstance(name, str) or len(name) > 256 or not _SYSCTL_NAME.fullmatch(name):
                emit("name must be a dotted sysctl name [a-z0-9_]+(.[A-Za-z0-9_-]+)+", where + ".name", name)
            elif name in seen:
                emit("name must appear once (%s is set twice)" % name, where + ".name", name)
            seen.add(name)
            # A number is what it prints as; a boolean would become True, which no sysctl takes.
            if _ok_int(setting):
                setting = str(setting)
            if not isinstance(setting, str):
                emit("value must be a string or an integer", where + ".value", setting)
            elif len(setting) > 4096 or not _SYSCTL_VALUE.fullmatch(setting):
                emit("value must be [A-Za-z0-9_.,:/+=@-] words separated by single spaces", where + ".value", setting)
            elif name in SYSCTL_RANGES:
                low, high = SYSCTL_RANGES[name]
                if not (setting.isdigit() and low <= int(setting) <= high):
                    emit("value must be an integer %d-%d for %s" % (low, high, name), where + ".value", setting)
    return Rule(doc, check)


SECRET_FLAGS = ("--api-key", "--admin-api-key", "--config")


def no_secret_flags():
    doc = "no %s (secrets go through sglang_api_key)" % ", ".join(SECRET_FLAGS)

    def check(value, emit):
        if not isinstance(value, str) or not value.startswith("--"):
            return
        name = value.split("=", 1)[0].replace("_", "-")
        for flag in SECRET_FLAGS:
            if name == flag or (len(name) >= 5 and flag.startswith(name)):
                emit("must not carry %s (the server's secret flags; use sglang_api_key)" % flag)
                return
    return Rule(doc, check)


def batch():
    doc = 'a count >= 1 or a percentage "N%" with 0 < N <= 100'

    def check(value, emit):
        if _ok_int(value):
            if value < 1:
                emit("must be " + doc)
            return
        if isinstance(value, str):
            match = re.fullmatch(r"(\d{1,3})%", value)
            if re.fullmatch(r"\d{1,9}", value) and int(value) >= 1:
                return
            if match and 0 < int(match.group(1)) <= 100:
                return
        emit("must be " + doc)
    return Rule(doc, check)


def count_or_percent(allow_empty=False):
    doc = 'a count >= 0 or a percentage "N%" with 0 <= N <= 100'

    def check(value, emit):
        if allow_empty and isinstance(value, str) and value.strip() == "":
            return
        if _ok_int(value):
            if value < 0:
                emit("must be " + doc)
            return
        if isinstance(value, str):
            if re.fullmatch(r"\d{1,9}", value):
                return
            match = re.fullmatch(r"(\d{1,3})%", value)
            if match and int(match.group(1)) <= 100:
                return
        emit("must be " + doc + (" or empty" if allow_empty else ""))
    return Rule(("empty, or " if allow_empty else "") + doc, check)


def hook_command():
    """A hook's argv: run without a shell, so only the program needs vetting."""
    doc = "empty, or argv: the program as an absolute path, then its arguments (no shell)"

    def check(value, emit):
        if not isinstance(value, (list, tuple)) or not value or not isinstance(value[0], str):
            return
        if not value[0].startswith("/") or "/../" in value[0] + "/":
            emit("must start with the program as an absolute path (it runs without a shell)", "[0]", value[0])
    return Rule(doc, check)


def http_url():
    """An http(s) URL the control node calls; credentials in it would be logged."""
    doc = "empty, or an http:// or https:// URL without user:password@"

    def check(value, emit):
        if not isinstance(value, str) or value == "":
            return
        try:
            parts = urlsplit(value)
            port = parts.port
        except ValueError:
            parts, port = None, None
        if parts is None or parts.scheme not in ("http", "https") or not parts.hostname or port == 0:
            emit("must be an http:// or https:// URL with a host")
        elif "@" in parts.netloc:
            emit("must not carry credentials (the URL is logged)", "",
                 parts._replace(netloc=HIDDEN + "@" + parts.netloc.rsplit("@", 1)[1]).geturl())
        elif any(c.isspace() for c in value) or len(value) > 2048:
            emit("must have no whitespace and at most 2048 characters")
    return Rule(doc, check)


_IDENT = r"[A-Za-z0-9][A-Za-z0-9_.-]*"
# A tool the benchmark runs on the host: a bare name (looked up there) or an absolute path.
_TOOL, _TOOL_DOC = r"[A-Za-z0-9._+-]+|/[A-Za-z0-9._+/-]+", "a bare name or an absolute path [A-Za-z0-9._+/-]"
_SECONDS_DAY = 86400

# Rules per variable, on top of the argument spec (type, elements, choices) and the checks
# every variable gets, for the variables no knob's arguments read; a knob's own variables
# have theirs in its catalog entry (rules()).
RULES = {
    # kernel
    "kernel_apt_cache_valid_time": [number_range(0, 31_536_000, " s")],
    # kernel_reboot
    "kernel_reboot_timeout": [number_range(10, _SECONDS_DAY, " s")],
    # gpu_gate
    "gpu_gate_expected_count": [number_range(1, 1024)],
    "gpu_gate_compute_capability": [pattern(r"\d{1,3}\.\d{1,3}", "major.minor, e.g. 12.0")],
    "gpu_gate_min_driver": [pattern(r"\d{1,5}(\.\d{1,5}){0,3}", "dotted numbers, e.g. 570 or 580.95.05",
                                    allow_empty=True)],
    "gpu_gate_timeout": [number_range(1, 3600, " s")],
    "gpu_gate_health_rma_after_reboots": [number_range(1, 10)],
    "gpu_gate_health_sram_uncorrectable_max": [number_range(0, 1_000_000)],
    "gpu_gate_health_remap_uncorrectable_max": [number_range(0, 1_000_000)],
    # sglang
    "sglang_model_path": [model_path()],
    "sglang_served_model_name": [unit_text()],
    "sglang_weights_manifest": [pattern(r"(?!.*\.\.)[A-Za-z0-9_][A-Za-z0-9_./-]*", "a relative path [A-Za-z0-9_./-], no ..",
                                        allow_empty=True)],
    "sglang_tp": [number_range(1, 1024)],
    "sglang_ep": [number_range(1, 1024)],
    "sglang_moe_runner_backend": [pattern(_IDENT, "a name [A-Za-z0-9_.-]")],
    "sglang_quantization": [pattern(_IDENT, "a name [A-Za-z0-9_.-]")],
    "sglang_attention_backend": [pattern(_IDENT, "a name [A-Za-z0-9_.-]", allow_empty=True)],
    "sglang_kv_cache_dtype": [pattern(_IDENT, "a name [A-Za-z0-9_.-]")],
    "sglang_max_running_requests": [number_range(0, 1_000_000)],
    "sglang_mem_fraction_static": [fraction_or_zero()],
    "sglang_cuda_graph_max_bs": [number_range(0, 65_536)],
    "sglang_host": [host_address()],
    "sglang_port": [number_range(1, 65_535)],
    "sglang_extra_args": [each(no_secret_flags(), no_secret_flags().doc)],
    "sglang_nccl_environment": [environment()],
    "sglang_environment": [environment()],
    "sglang_secret_environment": [environment()],
    "sglang_health_timeout": [number_range(10, 7 * _SECONDS_DAY, " s")],
    "sglang_drain_timeout": [number_range(0, _SECONDS_DAY, " s")],
    "sglang_before_drain_command": [hook_command()],
    "sglang_before_drain_url": [http_url()],
    "sglang_after_serve_command": [hook_command()],
    "sglang_after_serve_url": [http_url()],
    # benchmark
    "benchmark_backends": [non_empty(), each(pattern(_IDENT, "a name [A-Za-z0-9_.-]"))],
    "benchmark_batch_sizes": [non_empty(), each(number_range(1, 4096))],
    "benchmark_trials": [number_range(1, 1000)],
    "benchmark_warmup": [number_range(0, 1000)],
    "benchmark_max_new_tokens": [number_range(2, 1_000_000)],
    "benchmark_request_timeout": [number_range(1, _SECONDS_DAY, " s")],
    "benchmark_interconnect_timeout": [number_range(1, _SECONDS_DAY, " s")],
    "benchmark_p2p_test_path": [pattern(_TOOL, _TOOL_DOC)],
    "benchmark_all_reduce_path": [pattern(_TOOL, _TOOL_DOC)],
    "benchmark_all_reduce_args": [each(pattern(r"[A-Za-z0-9._=:,+/-]+", "an argument [A-Za-z0-9._=:,+/-]"))],
    "benchmark_gpu": [pattern(r"[A-Za-z0-9 ._()/+-]*", "a GPU key or name [A-Za-z0-9 ._()/+-]", allow_empty=True)],
    # infertune
    "infertune_fleet_size": [number_range(0, 1_000_000)],
    # report
    "report_drift_textfile_dir": [pattern(r"(?!.*/\.\.(?:/|$))/[A-Za-z0-9._+@/-]*",
                                          "an absolute path [A-Za-z0-9._+@/-] without ..", allow_empty=True)],
    # rollout (playbooks/vars/rollout.yml)
    "rollout_canary_count": [number_range(1, 100_000)],
    "rollout_batches": [non_empty(), each(batch())],
    "rollout_max_failures": [count_or_percent()],
    "rollout_connect_timeout": [number_range(1, _SECONDS_DAY, " s")],
    "rollout_slice_max_failures": [count_or_percent(allow_empty=True)],
}

# The rule makers a catalog entry's rules may name: {maker: [arguments]} (a bare name without
# arguments; each's argument is itself a rule).
MAKERS = {
    "number_range": number_range, "fraction_or_zero": fraction_or_zero, "pattern": pattern,
    "non_empty": non_empty, "each": each, "file_suffix": file_suffix, "file_mode": file_mode,
    "cmdline_param": cmdline_param, "cmdline_remove_key": cmdline_remove_key, "host_address": host_address,
    "model_path": model_path, "unit_text": unit_text, "environment": environment,
    "module_options": module_options, "sysctl_settings": sysctl_settings, "no_secret_flags": no_secret_flags, "batch": batch,
    "count_or_percent": count_or_percent, "hook_command": hook_command, "http_url": http_url,
}


def make_rule(spec, where="rule"):
    """A Rule from its catalog form: "maker", {maker: [arguments]} or {each: rule}; ValueError
    naming where for anything else."""
    if isinstance(spec, str):
        name, args = spec, []
    elif isinstance(spec, Mapping) and len(spec) == 1:
        name, args = next(iter(spec.items()))
    else:
        raise ValueError("%s: a rule is a maker's name or {maker: [arguments]}, got %s" % (where, show(spec)))
    if name not in MAKERS:
        raise ValueError("%s: no rule maker %s (known: %s)" % (where, show(name), ", ".join(sorted(MAKERS))))
    if name == "each":
        return each(make_rule(args, where))
    if not isinstance(args, list):
        raise ValueError("%s: the arguments of %s must be a list" % (where, name))
    try:
        return MAKERS[name](*args)
    except (TypeError, re.error) as exc:
        raise ValueError("%s: %s(%s): %s" % (where, name, ", ".join(map(show, args)), exc)) from exc


@per_root
def rules(root=str(PROJECT)):
    """{variable: [Rule]}: RULES and every entry's rules of the catalog file; ValueError for a
    variable whose rules live in two places."""
    return catalog_rules(_load_yaml(Path(root) / CATALOG)["infertune_knobs"])


def catalog_rules(catalog):
    """rules() for a catalog already read: the run's (infertune_knobs as Ansible read it), so that
    the input check does not read the catalog file again in every worker."""
    result = dict(RULES)
    for entry in catalog:
        for name, specs in (entry.get("rules") or {}).items():
            where = "%s: %s rules of %s" % (CATALOG, entry["name"], name)
            if name in result:
                raise ValueError("%s: %s has rules elsewhere already" % (where, name))
            result[name] = [make_rule(spec, where) for spec in specs]
    return result


# The rollout shape is no role: declared here, in argument_specs form, until it has a spec file
# (playbooks/meta/argument_specs.yml, entry "rollout", replaces this when present).
ROLLOUT_SPEC = {
    "short_description": "Rollout shape: canary, batches and the failures a batch may have (playbooks/vars/rollout.yml or -e).",
    "options": {
        "rollout_canary_count": {
            "type": "int", "default": 1,
            "description": "Hosts converged first, alone; if any of them fails, no other host is touched.",
        },
        "rollout_batches": {
            "type": "list", "elements": "raw", "default": ["25%"],
            "description": "Batch sizes after the canary (Ansible serial); the last one repeats until every host is done.",
        },
        "rollout_max_failures": {
            "type": "raw", "default": "25%",
            "description": "Failures the whole rollout may have before it stops (checked before every batch), as a"
                           " count or a percentage of the run's hosts; failed plans and lost hosts count.",
        },
        "rollout_connect_timeout": {
            "type": "int", "default": 60,
            "description": "Seconds a host is waited for at the start of its batch; one that does not answer by then"
                           " fails with the reason and counts against rollout_max_failures.",
        },
        "rollout_allow_single_batch": {
            "type": "bool", "default": False,
            "description": 'Allow a batch of the whole fleet ("100%"); refused otherwise.',
        },
        "rollout_slice_max_failures": {
            "type": "raw", "default": "",
            "description": "Failures each slice of a sliced apply may have (AWX job slicing: the inventory's gpu_nodes"
                           " holds fewer hosts than infertune_fleet_size), replacing rollout_max_failures there;"
                           " empty refuses an apply on a slice. Every slice runs its own canary at the same time and"
                           " the fleet may lose this many hosts per slice (docs/awx.md).",
        },
    },
}
ROLLOUT_DEFAULTS = "playbooks/vars/rollout.yml"
# The knob catalog, whose entries carry their variables' rules.
CATALOG = "roles/infertune/vars/main.yml"


def _cross_checks(values, add):
    """Rules that relate variables; values holds the converted value of every variable (or default)."""
    params = values.get("kernel_cmdline_params")
    remove = values.get("kernel_cmdline_remove")
    if _all_str(params):
        seen = {}
        for index, token in enumerate(params):
            key = _cmdline_key(token)
            if key in seen:
                add("kernel_cmdline_params", "key %s appears twice (entries %d and %d)" % (key, seen[key], index),
                    "kernel_cmdline_params[%d]" % index, token)
            seen[key] = index
        if _all_str(remove):
            for index, token in enumerate(remove):
                if _cmdline_key(token) in seen:
                    add("kernel_cmdline_remove", "removes a key that kernel_cmdline_params sets",
                        "kernel_cmdline_remove[%d]" % index, token)
        # The fabric's parameters come from the pcie role; the same key twice would fight over the value.
        fabric = {}
        if values.get("pcie_iommu_mode") in ("passthrough", "off"):
            fabric.update(dict.fromkeys(IOMMU_CMDLINE_KEYS, "pcie_iommu_mode"))
        if values.get("pcie_link_pm_off") is True:
            fabric.update(dict.fromkeys(LINK_PM_CMDLINE_KEYS, "pcie_link_pm_off"))
        for variable, tokens in (("kernel_cmdline_params", params), ("kernel_cmdline_remove", remove)):
            for index, token in enumerate(tokens if _all_str(tokens) else []):
                if _cmdline_key(token) in fabric:
                    add(variable, "%s comes from %s (role pcie); do not list it here"
                        % (token.split("=", 1)[0], fabric[_cmdline_key(token)]), "%s[%d]" % (variable, index), token)
    secret = values.get("sglang_secret_environment")
    for variable in ("sglang_nccl_environment", "sglang_environment"):
        env = values.get(variable)
        if isinstance(env, Mapping) and isinstance(secret, Mapping):
            for name in env:
                if name in secret:
                    add(variable, "also set in sglang_secret_environment", variable, name)
    budget = values.get("rollout_slice_max_failures")
    if isinstance(budget, (str, int)) and str(budget).strip() != "" and values.get("infertune_fleet_size") == 0:
        add("rollout_slice_max_failures", "needs infertune_fleet_size (the hosts of the whole fleet's gpu_nodes),"
            " which tells a slice from the fleet", "rollout_slice_max_failures", budget)
    batches = values.get("rollout_batches")
    if isinstance(batches, (list, tuple)) and values.get("rollout_allow_single_batch") is not True:
        for index, item in enumerate(batches):
            if isinstance(item, str) and item == "100%":
                add("rollout_batches", "a batch of the whole fleet needs rollout_allow_single_batch: true",
                    "rollout_batches[%d]" % index, item)


def _all_str(value):
    return isinstance(value, (list, tuple)) and all(isinstance(item, str) for item in value)


# --------------------------------------------------------------------------- types

# Exactly what Ansible's bool filter maps (any case, no surrounding blanks): the tasks read
# every boolean through it, so a value it would coerce with a warning ("y", " true") is refused.
BOOL_TRUE = ("true", "yes", "on", "1")
BOOL_FALSE = ("false", "no", "off", "0")
BOOL_RULE = "must be a boolean: true/false, yes/no, on/off or 1/0 (any case)"


def convert(value, kind):
    """(converted value, None) or (None, rule text), the way Ansible's argument spec would convert.

    Stricter than Ansible where the role's tasks use the raw variable: a list must be a list and
    a mapping a mapping (Ansible would split "a,b" for a list, but the tasks would not).
    """
    if value is None:
        return None, "must not be null"
    if kind in (None, "raw"):
        return value, None
    if kind in ("str", "path"):
        if isinstance(value, bool) or isinstance(value, (Mapping, list, tuple)):
            return None, "must be a string"
        if isinstance(value, str):
            text = str(value)
        elif _ok_int(value) and value.bit_length() < 64 or isinstance(value, float):
            text = str(value)
        else:
            return None, "must be a string"
        if kind == "path":
            if not text.startswith("/"):
                return None, "must be an absolute path"
            if "/../" in text + "/":
                return None, "must be an absolute path without '..'"
        return text, None
    if kind == "int":
        if _ok_int(value):
            return int(value), None
        if isinstance(value, float) and math.isfinite(value) and value.is_integer():
            return int(value), None
        if isinstance(value, str) and re.fullmatch(r"\s*[+-]?\d{1,18}\s*", value):
            return int(value), None
        return None, "must be an integer"
    if kind == "float":
        if isinstance(value, bool):
            return None, "must be a number"
        if _ok_int(value):
            return (float(value), None) if value.bit_length() < 64 else (None, "must be a number")
        if isinstance(value, float):
            return (float(value), None) if math.isfinite(value) else (None, "must be a finite number")
        if isinstance(value, str) and re.fullmatch(r"\s*[+-]?(\d{1,18}(\.\d{0,18})?|\.\d{1,18})([eE][+-]?\d{1,3})?\s*", value):
            number = float(value)
            return (number, None) if math.isfinite(number) else (None, "must be a finite number")
        return None, "must be a number"
    if kind == "bool":
        if isinstance(value, bool):
            return value, None
        if isinstance(value, str) and value.lower() in BOOL_TRUE + BOOL_FALSE:
            return value.lower() in BOOL_TRUE, None
        if _ok_int(value) and value in (0, 1):
            return bool(value), None
        return None, BOOL_RULE
    if kind == "list":
        if isinstance(value, (list, tuple)):
            return list(value), None
        return None, "must be a list"
    if kind == "dict":
        if isinstance(value, Mapping):
            return value, None
        return None, "must be a mapping"
    return value, None


# --------------------------------------------------------------------------- control characters

def _bad_char(text):
    """The first control, format or line/paragraph separator character, or None."""
    for char in text:
        if char in "\n\r\t" or unicodedata.category(char) in ("Cc", "Cf", "Zl", "Zp", "Cs"):
            return char
    return None


def _walk_controls(value, where, emit, secret):
    """Iterative walk of nested lists/dicts: control characters in strings and keys, depth, cycles."""
    stack = [(value, where, 0)]
    seen = set()
    nodes = 0
    while stack:
        item, path, depth = stack.pop()
        nodes += 1
        if nodes > _MAX_NODES:
            emit("has more than %d nested elements" % _MAX_NODES, path, _MISSING)
            return
        if isinstance(item, str):
            char = _bad_char(item)
            if char is not None:
                emit("must not contain control characters or newlines (found %s)" % _char_name(char), path,
                     HIDDEN if secret else item)
            continue
        if isinstance(item, (Mapping, list, tuple)):
            if id(item) in seen:
                emit("must not refer to itself", path, _MISSING)
                continue
            if depth >= _MAX_DEPTH:
                emit("is nested more than %d levels deep" % _MAX_DEPTH, path, _MISSING)
                continue
            seen.add(id(item))
            if isinstance(item, Mapping):
                try:
                    pairs = list(item.items())
                except Exception:  # noqa: BLE001
                    emit("cannot be read as a mapping", path, _MISSING)
                    continue
                for key, sub in pairs:
                    if isinstance(key, str):
                        char = _bad_char(key)
                        if char is not None:
                            emit("keys must not contain control characters or newlines (found %s)" % _char_name(char),
                                 path, key)
                            continue
                    stack.append((sub, "%s.%s" % (path, _key_text(key)), depth + 1))
            else:
                for index, sub in enumerate(item):
                    stack.append((sub, "%s[%d]" % (path, index), depth + 1))


def _char_name(char):
    names = {"\n": "a newline", "\r": "a carriage return", "\t": "a tab"}
    return names.get(char, "U+%04X" % ord(char))


def _key_text(key):
    text = key if isinstance(key, str) else show(key)
    return text if len(text) <= 40 else text[:37] + "..."


# --------------------------------------------------------------------------- specs

@dataclass
class Option:
    name: str
    role: str
    spec: dict = field(default_factory=dict)

    @property
    def type(self):
        return self.spec.get("type", "str")

    @property
    def secret(self):
        return bool(self.spec.get("no_log"))


@dataclass
class RoleSpec:
    role: str
    source: str
    short_description: str
    options: dict  # name -> Option, all entry points merged
    defaults_file: str


_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _load_yaml(path):
    with open(path, encoding="utf-8") as handle:
        return yaml.load(handle, Loader=_LOADER)  # noqa: S506 - a safe loader


@per_root
def load_specs(root=str(PROJECT)):
    """{role: RoleSpec} from every roles/*/meta/argument_specs.yml plus the rollout declaration."""
    base = Path(root)
    specs = {}
    for spec_file in sorted(base.glob("roles/*/meta/argument_specs.yml")):
        role = spec_file.parent.parent.name
        data = _load_yaml(spec_file) or {}
        entries = data.get("argument_specs") or {}
        options, short = {}, ""
        for entry_name in sorted(entries, key=lambda n: (n != "main", n)):
            entry = entries[entry_name] or {}
            short = short or entry.get("short_description", "")
            for name, spec in (entry.get("options") or {}).items():
                options.setdefault(name, Option(name, role, dict(spec or {})))
        specs[role] = RoleSpec(role, str(spec_file.relative_to(base)), short, options,
                               "roles/%s/defaults/main.yml" % role)
    rollout_file = base / "playbooks" / "meta" / "argument_specs.yml"
    rollout = ROLLOUT_SPEC
    source = "infertune/validation.py (ROLLOUT_SPEC)"
    if rollout_file.exists():
        rollout = ((_load_yaml(rollout_file) or {}).get("argument_specs") or {}).get("rollout") or rollout
        source = str(rollout_file.relative_to(base))
    specs["rollout"] = RoleSpec("rollout", source, rollout.get("short_description", ""),
                                {n: Option(n, "rollout", dict(s or {})) for n, s in rollout["options"].items()},
                                ROLLOUT_DEFAULTS)
    return specs


def declared(root=str(PROJECT)):
    """{variable: Option} over every role and the rollout shape."""
    result = {}
    for spec in load_specs(root).values():
        for name, option in spec.options.items():
            result.setdefault(name, option)
    return result


def prefixes(roles=None, root=str(PROJECT)):
    """Prefixes that mark a variable as ours: each role's name plus "_"."""
    specs = load_specs(root)
    chosen = [r for r in specs if roles is None or r in roles]
    return tuple(sorted({r + "_" for r in chosen}))


# add_host's own options; its other keys become variables of the host it names.
ADD_HOST_OPTIONS = frozenset(("name", "host", "hostname", "groups", "group", "groupname"))


@per_root
def vars_names(root=str(PROJECT)):
    """The names of the roles' vars/ files and the playbooks' vars files, the plan's published
    variables and the run's record (infertune_publish): what a play sees before its first task has
    set anything."""
    base = Path(root)
    names = set(PUBLISHED) | set(publish.NAMES)
    for path in sorted(base.glob("roles/*/vars/*.yml")) + sorted(base.glob("playbooks/vars/*.yml")):
        data = _safe_yaml(path)
        if isinstance(data, Mapping):
            names.update(k for k in data if isinstance(k, str))
    return frozenset(names)


@per_root
def internal_names(root=str(PROJECT)):
    """Names the project sets itself: role vars/, register:, set_fact:, add_host's host variables,
    vars:, loop_var, our modules' facts, the plan's published variables."""
    base = Path(root)
    names = set(vars_names(root))
    files = list(base.glob("roles/*/tasks/*.yml")) + list(base.glob("roles/*/handlers/*.yml"))
    files += list(base.glob("playbooks/**/*.yml")) + list(base.glob("*.yml"))
    for path in sorted(files):
        _collect_set_names(_safe_yaml(path), names)
    # Facts our modules return (ansible_facts={"infertune_hw": ...}) become host variables too.
    for path in sorted(base.glob("plugins/modules/*.py")):
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        for block in re.findall(r"ansible_facts\s*=\s*\{([^}]*)\}", text):
            names.update(re.findall(r"[\"'](\w+)[\"']\s*:", block))
    return frozenset(names)


def _safe_yaml(path):
    try:
        return _load_yaml(path)
    except Exception:  # noqa: BLE001 - an unreadable file only means fewer known names
        return None


def _collect_set_names(node, names):
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, Mapping):
            for key, value in item.items():
                if key == "register" and isinstance(value, str):
                    names.add(value)
                elif key in ("set_fact", "ansible.builtin.set_fact", "vars") and isinstance(value, Mapping):
                    names.update(k for k in value if isinstance(k, str))
                elif key in ("add_host", "ansible.builtin.add_host") and isinstance(value, Mapping):
                    names.update(k for k in value if isinstance(k, str) and k not in ADD_HOST_OPTIONS)
                elif key == "loop_var" and isinstance(value, str):
                    names.add(value)
                stack.append(value)


def role_defaults(root=str(PROJECT)):
    """{variable: value} as written in each role's defaults/main.yml and the rollout vars file."""
    return dict(_role_defaults(root))


@per_root
def _role_defaults(root):
    result = {}
    for spec in load_specs(root).values():
        path = Path(root) / spec.defaults_file
        data = _safe_yaml(path) if path.exists() else None
        if isinstance(data, Mapping):
            result.update(data)
    return result


# --------------------------------------------------------------------------- validate

# Variables a release removed, with what replaces them: set in an inventory, they would
# otherwise be ignored without a word (their prefix is no role's any more).
RETIRED = {
    "numa_balancing_mode": "retired: kernel.numa_balancing is an entry of sysctl_settings (a list of {name, value})",
    "numa_balancing_sysctl_file": "retired: set sysctl_file",
}


def validate(variables, roles=None, check_unknown=True, root=str(PROJECT), catalog=None):
    """Problems of the given variables (a mapping name -> value, already templated).

    roles: names of the roles (and "rollout") whose variables are checked; None = all.
    check_unknown: also report variables with one of those roles' prefixes that nobody declares.
    catalog: the knob catalog's entries as the run read them (their rules); None reads the file.
    Variables not given are not checked (their defaults are tested to pass).
    """
    problems = []
    if not isinstance(variables, Mapping):
        return [Problem("variables", "must be a mapping of variable name to value")]
    specs = load_specs(root)
    unknown_roles = [r for r in (roles or []) if r not in specs]
    for role in unknown_roles:
        problems.append(Problem("roles", "no such role (known: %s)" % ", ".join(sorted(specs)), "roles", role))
    chosen = [r for r in specs if roles is None or r in roles]
    try:
        known_rules = rules(root) if catalog is None else catalog_rules(catalog)
    except ValueError as exc:  # a catalog entry's rules that cannot be built: nothing is checked
        return problems + [Problem("infertune_knobs", str(exc))]
    converted = {}
    all_declared = declared(root)

    for role in chosen:
        for name, option in specs[role].options.items():
            if name in converted or name not in variables:
                continue
            found = []
            try:
                converted[name] = _check_one(name, option, variables[name], found, known_rules)
            except Exception as exc:  # noqa: BLE001 - a bug here must not become a traceback
                found.append(Problem(name, "could not be checked (%s)" % type(exc).__name__))
            problems.extend(found)

    values = {}
    for name, option in all_declared.items():
        if name in converted:
            values[name] = converted[name]
        elif name not in variables and "default" in option.spec:
            values[name] = option.spec["default"]

    def add(variable, rule, where="", value=_MISSING):
        if variable in all_declared and all_declared[variable].role in chosen:
            problems.append(Problem(variable, rule, where, value, all_declared[variable].secret))
    try:
        _cross_checks(values, add)
    except Exception as exc:  # noqa: BLE001
        problems.append(Problem("variables", "cross-variable check failed (%s)" % type(exc).__name__))

    if check_unknown:
        problems.extend(unknown_variables(variables, roles=chosen, root=root))
    problems.extend(Problem(name, why) for name, why in RETIRED.items() if name in variables)
    return problems


def _check_one(name, option, raw, found, known_rules):
    """Check one variable; append Problems to found; return the converted value (or None)."""
    secret = option.secret

    def emit(rule, where="", value=_MISSING):
        found.append(Problem(name, rule, where or name, value, secret))

    before = len(found)
    _walk_controls(raw, name, emit, secret)
    if len(found) > before:
        return None
    value, error = convert(raw, option.type)
    if error:
        emit(error, name, raw)
        return None
    elements = option.spec.get("elements")
    if option.type == "list" and elements:
        items = []
        for index, item in enumerate(value):
            item_value, item_error = convert(item, elements)
            if item_error:
                emit(item_error, "%s[%d]" % (name, index), item)
            items.append(item_value)
        if len(found) > before:
            return None
        value = items
    choices = option.spec.get("choices")
    if isinstance(choices, list):
        members = value if option.type == "list" else [value]
        for index, item in enumerate(members):
            if item not in choices:
                where = "%s[%d]" % (name, index) if option.type == "list" else name
                emit("must be one of %s" % ", ".join(str(c) for c in choices), where, item)
    for rule in known_rules.get(name, ()):
        rule.check(value, lambda text, sub="", val=_MISSING: emit(text, name + sub, value if val is _MISSING else val))
    return value if len(found) == before else None


def unknown_variables(variables, roles=None, root=str(PROJECT)):
    """Variables with one of our prefixes that no role declares, with the closest declared name.
    An earlier run's summary (an AWX workflow passes it to the next node as an extra variable) is
    none of them."""
    known = declared(root)
    marks = prefixes(roles, root)
    explained = vars_names(root)
    suspects = [n for n in sorted(n for n in variables if isinstance(n, str))
                if n not in known and n.startswith(marks) and not n.startswith(SUMMARY_PREFIX)
                and n not in explained]
    # Every task file is read only for a name still unexplained: a play's first task (where the
    # input check runs, in a worker per host) sees no name a task sets unless the user set it.
    internal = internal_names(root) if suspects else frozenset()
    problems = []
    for name in suspects:
        if name in internal:
            continue
        close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
        hint = "; did you mean %s?" % close[0] if close else ""
        problems.append(Problem(name, "no role declares this variable" + hint))
    return problems


def report(variables, host=None, **kwargs):
    """The problems as lines "host X: variable: rule, got 'value'"."""
    return [problem.line(host) for problem in validate(variables, **kwargs)]
