"""ansible-core 2.19 deprecates a module's `warnings` passed through exit_json (removed in 2.23):
every module the unit tests run goes through moduleharness.run_module, which fails the test of
a module that does so. Here, with a module that does, that it sees it."""
import pytest

from moduleharness import run_module

AER = "AER 0000:41:00.0: correctable 2"
MODULE = """
from ansible.module_utils.basic import AnsibleModule


def main():
    module = AnsibleModule(argument_spec={"through_result": {"type": "bool", "required": True}})
    if module.params["through_result"]:
        module.exit_json(changed=False, warnings=[%r])
    module.warn(%r)
    module.exit_json(changed=False)
""" % (AER, AER)


@pytest.fixture
def warner(tmp_path):
    path = tmp_path / "warner.py"
    path.write_text(MODULE)
    return path


def test_warnings_passed_through_exit_json_fail_the_modules_test(warner, capsys):
    with pytest.raises(pytest.fail.Exception, match="Passing `warnings` to `exit_json` or `fail_json` is deprecated"):
        run_module("warner", {"through_result": True}, capsys, path=warner)


def test_module_warn_gives_the_same_warning_and_passes(warner, capsys):
    rc, result = run_module("warner", {"through_result": False}, capsys, path=warner)
    assert rc == 0 and [w["event"]["msg"] for w in result["warnings"]] == [AER]
