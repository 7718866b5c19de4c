#!/usr/bin/python
"""Ansible module infertune_plan: read every knob at once, change nothing."""

DOCUMENTATION = r"""
module: infertune_plan
short_description: Predict every knob's change on a host in one read-only call
description:
  - Runs each catalog entry's apply function in check mode (the same code M(infertune.fleet.knob) applies) and
    returns, per knob, the result contract, then what the host needs as a whole - the pending
    knobs, whether it must reboot and why, whether it must be drained first.
  - In the same call, when asked, the GPU gate (as M(infertune.fleet.gpu_facts)), the PCIe fabric gates
    and the MoE backend check and command line check (as M(infertune.fleet.moe_backend_support),
    judged on the GPUs the gate read).
  - Never changes the host, in or out of check mode, so a converged fleet costs one round
    trip per host.
options:
  knobs:
    description: Catalog entries, each with C(name), C(module), C(args) and optionally C(label),
      C(drain) (a change restarts a serving component, so the host is drained first) and C(verb)
      (C(apply), the default, or C(revert), which reads what putting the host back as it was before infertune
      would do).
    type: list
    elements: dict
    required: true
  secret_files:
    description: Per knob name, more files for its C(args.files) whose content must never be logged
      (for instance a root-only environment file).
    type: dict
    default: {}
  reboot_strategy:
    description: C(when_needed) reboots when a knob says the running system differs from the next
      boot, C(always) reboots every host, C(never) reboots none.
    type: str
    choices: [when_needed, always, never]
    default: when_needed
  gpu_gate:
    description: Options of M(infertune.fleet.gpu_facts) (source, expected_count, compute_capability, min_driver, venv,
      require_persistence, gpu_table, timeout); the result, problems included, is returned as C(gpus). With it,
      the kernel the default boot entry starts is read (returned as C(boot_entry)); when it is not the running
      kernel and the NVIDIA module will not load on it, that is one of the gate's problems. C(timeout) is the
      seconds nvidia-smi may take; past it the gate's problem is "driver unresponsive" (never a hung play).
    type: dict
  health:
    description: With O(gpu_gate), read each GPU's health in the gate's own nvidia-smi query (ECC, row remapping,
      retired pages, clock events, recovery action), the Xids of the kernel log since this boot and,
      through NVML where it imports, the PCIe replay counters, and class every signal (ok, warn, reset, rma,
      not_applicable; the tables in C(plugins/module_utils/infertune_node/gpu_health.py)). Options
      C(sram_uncorrectable_max), C(remap_uncorrectable_max) (above them, rma). Returned as C(gpus.health).
    type: dict
  fabric:
    description: Read-only gates on the PCIe links, BAR1 and P2P of the GPUs - C(vendor) (default C(0x10de)),
      C(classes) (PCI classes of the GPUs), C(gates) (of C(width), C(speed), C(bar1), C(p2p); default the
      first three), C(nvidia_smi); the result (C(failures), one per device naming the fix, the AER counters
      in C(aer), one line per device with corrected errors in C(warnings)) is returned as C(fabric),
      never as a module failure.
    type: dict
  backend:
    description: Options of M(infertune.fleet.moe_backend_support) (venv, backend, quantization, gpus, matrix, kernels,
      allreduce_fusion, argv), returned as C(backend); without C(gpus), judged on the gate's GPUs.
      With C(venv) alone, the installed sglang and FlashInfer versions only.
    type: dict
  target_kernel:
    description: C(install_headers) (whether the rollout installs the target's headers for DKMS). With it, the
      target kernel (the C(release) of the C(boot_kernel) knob among O(knobs)) is looked at when it is installed
      and not running, returned as C(target_kernel); where the NVIDIA module will not load on it and the
      rollout cannot change that, C(target_kernel.problem) says why, with the fix.
    type: dict
  weights:
    description: C(path) of a model directory and optionally C(manifest), checked as M(infertune.fleet.model_weights)
      does (config.json, every shard present and as long as its header says, the sha256 manifest);
      the result, C(problems) included, is returned as C(weights). A hub id is not checked.
    type: dict
  fingerprint:
    description: C(files) (paths) and C(units) to describe without changing them - each file's sha1
      and mode, each unit's enablement and state - returned as C(fingerprint), so the controller can
      tell whether files it renders later would change anything.
    type: dict
author: infertune developers (@infertune)
"""

EXAMPLES = r"""
- name: Plan the host's changes
  infertune.fleet.infertune_plan:
    knobs: "{{ infertune_selected_knobs }}"
    reboot_strategy: when_needed
  register: host_plan
"""

RETURN = r"""
plan:
  description: C(results) per knob, C(pending), C(failed), C(reboot), C(reboot_reasons), C(drain),
    C(machine_id), and C(gpus) (with C(health) where O(health) asked for it - C(read), C(boot_id), per GPU its
    C(class), the C(signals) not ok, the counters and this boot's Xids, and C(blocking), a line per reset
    or rma signal), C(boot_entry), C(fabric), C(backend), C(target_kernel), C(weights) and C(fingerprint) when asked. The
    plan's role publishes it as the host's C(infertune_plan) (M(infertune.fleet.infertune_host_plan)).
  returned: always
  type: dict
"""

import socket

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.infertune.fleet.plugins.module_utils.infertune_module import runner, timed_runner
from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node.files import fingerprints
from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node.gate import TuningError
from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node.gpu_gate import gate
from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node.gpu_health import DriverUnresponsive
from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node.gpu_query import GpuQueryError
from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node.identity import machine_id
from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node.kernel_driver import default_boot, target_kernel
from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node.knobs import predict, summarize
from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node.model_weights import check as check_weights
from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node.moe_backend_support import ReadError, judge_host
from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node.pcie import GPU_CLASSES, NVIDIA
from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node.pcie_fabric import check as check_fabric, gate_memory
from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node.systemd import unit_states
from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node.timed import Unresponsive


def unanswered(reason):
    """A runner for nvidia-smi once it hung: each call is Unresponsive at once."""
    def run(argv):
        raise Unresponsive(reason)
    return run


def checks(module, plan):
    """The GPU gate and the backend check, each a result with its problems, never an exception."""
    host = socket.gethostname()
    # The fabric's nvidia-smi runs under the gate's time limit, and not at all once the gate found
    # the driver unresponsive (each call would hang as long again).
    read = runner(module)
    if module.params["gpu_gate"] is not None:
        options = dict(module.params["gpu_gate"])
        timeout = options.pop("timeout", None)
        read = timed_runner(module, int(timeout)) if timeout else read
        health = module.params["health"]
        try:
            plan["gpus"] = gate(read, health=health, **options)
        except (GpuQueryError, TypeError, ValueError) as exc:
            plan["gpus"] = {"gpus": [], "problems": [str(exc)]}
            if health is not None:
                plan["gpus"]["health"] = {"read": False, "error": str(exc)}
            if isinstance(exc, DriverUnresponsive):
                read = unanswered(str(exc))
        # The next boot's GPUs too: a default entry on a kernel without the NVIDIA module fails the gate.
        plan["boot_entry"] = default_boot("/", runner(module))
        if plan["boot_entry"]["problem"]:
            plan["gpus"]["problems"] = list(plan["gpus"].get("problems", [])) + [plan["boot_entry"]["problem"]]
    fabric = module.params["fabric"]
    if fabric is not None:
        try:
            plan["fabric"] = check_fabric("/", fabric.get("vendor", NVIDIA),
                                          fabric.get("classes", list(GPU_CLASSES)),
                                          fabric.get("gates", ["width", "speed", "bar1"]),
                                          fabric.get("nvidia_smi", "nvidia-smi"), read,
                                          # The gate's nvidia-smi read has the GPUs' memory: no second query.
                                          gate_memory(plan.get("gpus", {}).get("gpus", [])))
        except (TuningError, TypeError, Unresponsive) as exc:
            plan["fabric"] = {"failures": [str(exc)], "aer": {}}
    if module.params["backend"] is not None:
        options = dict(module.params["backend"])
        if options.get("backend") and "gpus" not in options:
            options["gpus"] = plan.get("gpus", {}).get("gpus", [])
        try:
            plan["backend"] = judge_host(module.run_command, host, **options)
        except (ReadError, TypeError) as exc:
            plan["backend"] = {"sglang_version": None, "error": str(exc)}
    target = module.params["target_kernel"]
    release = next((knob["args"].get("release") for knob in module.params["knobs"] if knob.get("module") == "boot_kernel"),
                   None)
    if target is not None and release:
        plan["target_kernel"] = target_kernel("/", release, bool(target.get("install_headers", True)), runner(module))
    weights = module.params["weights"]
    if weights is not None:
        plan["weights"] = check_weights(weights["path"], weights.get("manifest") or None)
    wanted = module.params["fingerprint"]
    if wanted is not None:
        plan["fingerprint"] = {"files": fingerprints("/", wanted.get("files", [])),
                               "units": unit_states(wanted.get("units", []), runner(module))}


def main():
    module = AnsibleModule(argument_spec={
        "knobs": {"type": "list", "elements": "dict", "required": True},
        "secret_files": {"type": "dict", "default": {}, "no_log": True},
        "reboot_strategy": {"type": "str", "default": "when_needed", "choices": ["when_needed", "always", "never"]},
        "gpu_gate": {"type": "dict"},
        "health": {"type": "dict"},
        "fabric": {"type": "dict"},
        "fingerprint": {"type": "dict"},
        "weights": {"type": "dict"},
        "target_kernel": {"type": "dict"},
        "backend": {"type": "dict"},
    }, supports_check_mode=True)
    entries = []
    for entry in module.params["knobs"]:
        secret = module.params["secret_files"].get(entry["name"])
        if secret:
            args = dict(entry.get("args") or {})
            args["files"] = list(args.get("files", [])) + list(secret)
            entry = dict(entry, args=args)
        entries.append(entry)
    results = predict(entries)
    plan = dict(summarize(entries, results, module.params["reboot_strategy"]), results=results,
                machine_id=machine_id("/"))
    checks(module, plan)
    module.exit_json(changed=False, plan=plan)


if __name__ == "__main__":
    main()
