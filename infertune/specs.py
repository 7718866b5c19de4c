"""Which infertune variables exist: every role's meta/argument_specs.yml (every entry point) and the
rollout shape's playbooks/meta/argument_specs.yml: their type, elements, choices, default, no_log
and description; the names roles and plays set for themselves; the defaults as the roles' files
hold them. infertune/validation.py checks values against these, with infertune/rules.py's rules.
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache, wraps
from pathlib import Path

import yaml

from . import COLLECTION, publish
from .host_plan import PUBLISHED

PROJECT = COLLECTION
# The rollout shape is no role's: its declaration, in argument_specs form, and the vars file generated
# from it (infertune.role_defaults) that the playbooks read.
ROLLOUT_SPEC_FILE = "playbooks/meta/argument_specs.yml"
ROLLOUT_DEFAULTS = "playbooks/vars/rollout.yml"
# The knob catalog, whose entries carry their variables' rules.
CATALOG = "roles/infertune/vars/main.yml"


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
    rollout_file = base / ROLLOUT_SPEC_FILE
    if rollout_file.exists():
        rollout = (_load_yaml(rollout_file) or {})["argument_specs"]["rollout"]
        specs["rollout"] = RoleSpec("rollout", ROLLOUT_SPEC_FILE, rollout.get("short_description", ""),
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
