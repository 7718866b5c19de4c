"""Run a module from plugins/modules/ in-process, as Ansible would, and return its exit code and JSON.

Every run also checks what ansible-core 2.19 deprecates of a module: a result with
`deprecations` fails the test, as passing `warnings` or `deprecations` through exit_json or
fail_json does (removed in 2.23; module.warn and module.deprecate are the ways).
"""
import importlib.util
import json
from unittest import mock

import pytest
from ansible.module_utils import _internal
from ansible.module_utils.common import warnings as module_warnings
from ansible.module_utils.testing import patch_module_args

from fakehost import REPO


def run_module(name, args, capsys, path=None):
    """Run plugins/modules/NAME.py (or the module file at path) with args."""
    spec = importlib.util.spec_from_file_location(name, path or REPO / "plugins" / "modules" / (name + ".py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    # On a host each module runs in a process of its own: no warning or deprecation of an earlier run,
    # and no controller (once a test has loaded Ansible's controller side, warnings go to its display).
    with mock.patch.object(_internal, "is_controller", False), \
            mock.patch.dict(module_warnings._global_warnings, clear=True), \
            mock.patch.dict(module_warnings._global_deprecations, clear=True), \
            patch_module_args(args), pytest.raises(SystemExit) as exit_info:
        module.main()
    result = json.loads(capsys.readouterr().out)
    if "deprecations" in result:
        pytest.fail("module %s used what ansible-core deprecates: %s" % (name, result["deprecations"]))
    return exit_info.value.code, result
