"""Expected values for one host: its inventory variables over the roles' defaults.

The roles read the same variables, so the suite expects exactly what a converge
would apply; no value is repeated here.
"""
from pathlib import Path

import yaml

ROLES = Path(__file__).resolve().parents[2] / "roles"


def role_defaults(roles=ROLES):
    """Every role's defaults/main.yml merged (the variable names do not overlap)."""
    merged = {}
    for path in sorted(roles.glob("*/defaults/main.yml")):
        merged.update(yaml.safe_load(path.read_text()) or {})
    return merged


class Expected(dict):
    """Variables that render Jinja on lookup, so only the knobs a test reads are rendered."""

    def __getitem__(self, key):
        value = super().__getitem__(key)
        if not (isinstance(value, str) and "{{" in value):
            return value
        import jinja2  # only when an inventory really templates a knob

        return yaml.safe_load(jinja2.Template(value).render(**self))

    def get(self, key, default=None):
        return self[key] if key in self else default


def expected_values(inventory_vars, defaults=None):
    variables = Expected(role_defaults() if defaults is None else defaults)
    variables.update(inventory_vars)
    return variables


def truthy(value):
    """A boolean variable as Ansible's bool filter reads it (-e passes "false" as a string)."""
    return str(value).strip().lower() in ("true", "yes", "on", "1", "y", "t")
