"""Call a tests/verify check directly, outside a pytest-testinfra run."""
import importlib.util
from pathlib import Path

import pytest

VERIFY = Path(__file__).resolve().parents[1] / "verify"


def load(name):
    """tests/verify/NAME.py under another module name (tests/unit has files of the same name)."""
    spec = importlib.util.spec_from_file_location("verify_" + name, VERIFY / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def outcome(test, *args):
    """'pass', or the failure or skip message of a verification test called directly."""
    try:
        test(*args)
    except (pytest.fail.Exception, pytest.skip.Exception) as exc:
        return str(exc)
    return "pass"


def resolved(overrides=None):
    """Values as a run resolves them for a host that sets only OVERRIDES: the roles' defaults as
    written (no knob default is templated), under the overrides."""
    from infertune import validation

    return dict(validation.role_defaults(), **(overrides or {}))
