"""Call a tests/verify check directly, outside a pytest-testinfra run."""
import importlib.util
import sys
from pathlib import Path

import pytest

VERIFY = Path(__file__).resolve().parents[1] / "verify"
# What the suite's conftest.py puts on the path for its checks (its own helpers, the
# host-side readers of plugins/module_utils): a test file run alone finds them too.
for _path in (VERIFY, VERIFY.parents[1] / "plugins" / "module_utils"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))


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
    from infertune import specs

    return dict(specs.role_defaults(), **(overrides or {}))
