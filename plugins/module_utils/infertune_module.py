"""The Ansible side of the modules: one gate, one error path, one diff shape, one command runner.

plugins/module_utils/infertune_node stays free of Ansible so the boot-time tool can import
it; this is the thin layer the modules in plugins/modules/ share.
"""
import os

from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node import timed
from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node.gate import Gate, TuningError


def _diff_side(value):
    return value if isinstance(value, dict) else "%s\n" % ("" if value is None else value)


def run_knob(module, apply, *args):
    """Exit the module with apply("/", *args, gate); a TuningError fails it with its message."""
    try:
        result = apply("/", *args, Gate(check_mode=module.check_mode))
    except TuningError as exc:
        module.fail_json(msg=str(exc))
    if not module._diff:
        result.pop("diff", None)
    elif "diff" not in result:
        result["diff"] = {"before": _diff_side(result["before"]), "after": _diff_side(result["after"])}
    module.exit_json(**result)


def runner(module):
    """run(argv) -> (rc, stdout, stderr) for the host-side readers: the binary from PATH, C locale.
    A missing binary answers rc 127 and "NAME: command not found", as gate.run does at boot
    (run_command would fail the whole module instead)."""
    def run(argv):
        executable = module.get_bin_path(argv[0])
        if executable is None:
            return 127, "", "%s: command not found" % argv[0]
        return module.run_command([executable] + list(argv[1:]), environ_update={"LC_ALL": "C"})
    return run


def timed_runner(module, timeout):
    """runner(module), each command under `timeout` seconds (timed.Unresponsive past it): for a
    reader that a stuck driver could hang (run_command has no time limit)."""
    def run(argv):
        executable = module.get_bin_path(argv[0])
        if executable is None:
            return 127, "", "%s: command not found" % argv[0]
        return timed.run([executable] + list(argv[1:]), timeout, env=dict(os.environ, LC_ALL="C"))
    return run
