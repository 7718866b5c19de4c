"""Run a module from plugins/modules/ in-process, as Ansible would, and return its exit code and JSON."""
import importlib.util
import json

import pytest
from ansible.module_utils.testing import patch_module_args

from fakehost import REPO


def run_module(name, args, capsys):
    spec = importlib.util.spec_from_file_location(name, REPO / "plugins" / "modules" / (name + ".py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with patch_module_args(args), pytest.raises(SystemExit) as exit_info:
        module.main()
    return exit_info.value.code, json.loads(capsys.readouterr().out)
