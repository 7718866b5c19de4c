#!/usr/bin/python
"""Ansible module knob: apply one entry of the infertune knob catalog."""

DOCUMENTATION = r"""
module: knob
short_description: Apply one host tuning knob and return the result contract
description:
  - Runs the apply (or, with O(verb=revert), the revert) function that O(module) names (the same code the
    boot-time tool and the plan run) with O(args), through infertune's gate, so check mode changes nothing
    and reports what would change.
  - Returns the result contract every knob shares (C(changed), C(before), C(after),
    C(reboot_required), C(runtime_pending), C(msg)), which the roles publish into the
    C(infertune_results) fact.
  - O(module) is a knob kind of C(KINDS) in the collection's C(plugins/module_utils/infertune_node/kinds.py);
    the knob catalog (C(roles/infertune/vars/main.yml)) gives each knob's O(args). An unknown module fails
    naming the known ones, a missing argument naming it.
  - A file of a C(systemd_unit) knob's O(args) may name its source on the control node (C(src), a file of
    this collection) instead of its C(content) - the action reads it there, and the result's invocation
    shows the task's own arguments, not the content.
options:
  name:
    description: The knob's name in the catalog (reported back).
    type: str
    required: true
  module:
    description: The apply function to run.
    type: str
    required: true
  args:
    description: Its arguments.
    type: dict
    default: {}
  stage:
    description: The knob's stage in the catalog; a change of a C(runtime) knob is C(runtime_pending).
    type: str
    choices: [boot, runtime, persist, service]
  verb:
    description:
      - C(apply) sets the knob as O(args) ask; its first change records the host's own state before it, raw
        (per CPU, device, port, sysctl), in C(/var/lib/infertune/original/NAME.json), never under check mode.
      - C(revert) puts back what the host had before infertune, from that record (or, without one, the kernel's
        default where it is known, else it leaves the value and says so), then removes the record.
    type: str
    choices: [apply, revert]
    default: apply
  record:
    description: Whether the knob's record of the host's original state is kept and read (O(verb)); false keeps
      none and reads none, so that a revert of it falls back to the kernel's default or leaves the value.
    type: bool
    default: true
author: infertune developers (@infertune)
"""

EXAMPLES = r"""
- name: PCIe MaxReadReq 4096 on every NVIDIA GPU endpoint
  infertune.fleet.knob:
    name: pcie_mrrs
    module: pcie_mrrs
    args: {value: 4096, vendor: "0x10de", classes: ["0x0300", "0x0302"]}
    stage: runtime
"""

RETURN = r"""
before:
  description: The knob's state before.
  returned: always
  type: raw
after:
  description: The knob's state after (predicted under check mode).
  returned: always
  type: raw
differs:
  description: What differs between before and after in one line, the differing elements first and
    whole, e.g. C(cpu3 epp balance_performance -> performance), then how many others need nothing;
    a long list ends in C(+N more). Empty when nothing differs. The plan prints it.
  returned: always
  type: str
reboot_required:
  description: The running system differs from what the next boot will have.
  returned: always
  type: bool
runtime_pending:
  description: Applying the knob changes the running host (a serving host is drained first).
  returned: always
  type: bool
actions:
  description: Writes and commands the knob made (or would make under check mode).
  returned: always
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node.gate import Gate, TuningError
from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node.knobs import run


def main():
    module = AnsibleModule(argument_spec={"name": {"type": "str", "required": True},
                                          "module": {"type": "str", "required": True},
                                          "args": {"type": "dict", "default": {}},
                                          "stage": {"type": "str", "choices": ["boot", "runtime", "persist", "service"]},
                                          "verb": {"type": "str", "choices": ["apply", "revert"], "default": "apply"},
                                          "record": {"type": "bool", "default": True}},
                           supports_check_mode=True)
    params = module.params
    try:
        contract, diff, actions = run(params["module"], params["args"], Gate(check_mode=module.check_mode),
                                      stage=params["stage"], name=params["name"] if params["record"] else None,
                                      verb=params["verb"])
    except TuningError as exc:
        module.fail_json(msg="%s: %s" % (params["name"], exc))
    result = dict(contract, actions=actions)
    if module._diff and diff is not None:
        result["diff"] = diff
    module.exit_json(**result)


if __name__ == "__main__":
    main()
