"""The Ansible side of a knob module: one gate, one error path, one diff shape.

plugins/module_utils/infertune_node stays free of Ansible so the boot-time tool can import
it; this is the thin layer every knob module in plugins/modules/ shares.
"""
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
