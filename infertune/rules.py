"""The rules of the input check beyond the argument specs: ranges, character sets, per-element and
per-key rules, each with the text docs/variables.md's table shows. For a variable a knob's arguments
read, its rules are data in that knob's catalog entry (``rules`` in roles/infertune/vars/main.yml,
naming rule makers of MAKERS, a kind's own among them); for the others, RULES below. rules() joins
them. infertune/validation.py applies them; infertune/specs.py declares the variables.
"""
from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlsplit

from infertune_node import kinds
from infertune_node.kind import Rule, is_int as _ok_int

from .specs import CATALOG, PROJECT, _load_yaml, per_root

HIDDEN = "<hidden>"
_MISSING = object()
_MAX_SHOWN = 60


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

# Rule (check(value, emit) calls emit(rule_text, suffix="", value=...) for each problem) is the
# kinds' too: a knob kind brings the rule makers its variables need (infertune_node/kind.py).

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
# arguments; each's argument is itself a rule). The generic ones here, a kind's own in its module
# (infertune_node, KIND.makers).
MAKERS = {
    "number_range": number_range, "fraction_or_zero": fraction_or_zero, "pattern": pattern,
    "non_empty": non_empty, "each": each, "file_suffix": file_suffix, "file_mode": file_mode,
    "host_address": host_address, "model_path": model_path, "unit_text": unit_text, "environment": environment,
    "no_secret_flags": no_secret_flags, "batch": batch, "count_or_percent": count_or_percent,
    "hook_command": hook_command, "http_url": http_url,
    **{name: maker for kind in kinds.KINDS.values() for name, maker in kind.makers.items()},
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
