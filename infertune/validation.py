"""Controller-side check of every infertune variable before any host is changed.

Each part held once:

* ``roles/*/meta/argument_specs.yml`` (every entry point; read by infertune/specs.py): which variables exist, their type,
  ``elements``, ``choices``, ``default``, ``no_log`` and description. The rollout shape is not
  a role; its declaration is ``playbooks/meta/argument_specs.yml`` (entry ``rollout``), from which
  ``playbooks/vars/rollout.yml`` is generated.
* What an argument spec cannot express (ranges, character sets, per-element and per-key
  rules), each rule with the text docs/variables.md's table shows: for a variable a knob's arguments
  read, in that knob's catalog entry (``rules`` in ``roles/infertune/vars/main.yml``, data
  naming the rule makers of ``MAKERS``); for the others, ``RULES``; both in infertune/rules.py,
  whose ``rules()`` joins them.

Applied to every declared variable on top: no control characters (newlines included) anywhere,
keys of mappings too, and ``type: path`` means an absolute path. Cross-variable rules live in
``_cross_checks``.

``validate(variables)`` returns a list of ``Problem``; it never raises on odd input (None,
nested lists, ints for strings, huge numbers, cycles). The declarations are infertune/specs.py's,
the rules infertune/rules.py's; this module is the check.
"""
from __future__ import annotations

import difflib
import math
import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass

from infertune_node import cmdline

from .report import SUMMARY_PREFIX
from .rules import _MISSING, HIDDEN, _ok_int, catalog_rules, rules, show
from .specs import PROJECT, declared, internal_names, load_specs, prefixes, vars_names

_MAX_DEPTH = 32
_MAX_NODES = 100_000


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


# Keys the pcie role puts on the command line (plugins/module_utils/infertune_node/pcie_fabric.py).
IOMMU_CMDLINE_KEYS = ("iommu", "amd_iommu", "intel_iommu", "iommu.passthrough")
LINK_PM_CMDLINE_KEYS = ("pcie_aspm", "pcie_port_pm")


def _cross_checks(values, add):
    """Rules that relate variables; values holds the converted value of every variable (or default)."""
    params = values.get("kernel_cmdline_params")
    remove = values.get("kernel_cmdline_remove")
    if _all_str(params):
        seen = {}
        for index, token in enumerate(params):
            key = cmdline.key(token)
            if key in seen:
                add("kernel_cmdline_params", "key %s appears twice (entries %d and %d)" % (key, seen[key], index),
                    "kernel_cmdline_params[%d]" % index, token)
            seen[key] = index
        if _all_str(remove):
            for index, token in enumerate(remove):
                if cmdline.key(token) in seen:
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
                if cmdline.key(token) in fabric:
                    add(variable, "%s comes from %s (role pcie); do not list it here"
                        % (token.split("=", 1)[0], fabric[cmdline.key(token)]), "%s[%d]" % (variable, index), token)
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
