"""The knob registry: every knob's apply function behind one call and one result shape.

Each entry of the knob catalog (roles/infertune/vars/main.yml) names a module here
and its arguments. The `knob` module applies one, the `infertune_plan` module reads
them all in check mode, and the boot-time tool re-applies the runtime ones: the
same code in all three places.
"""
from . import (amd_pstate, boot_kernel, cmdline, cpu, cpufreq, cpuidle, differs, modprobe, packages, pcie, pcie_acs, pcie_fabric,
               sysctl, systemd)
from .gate import Gate, TuningError

# The result contract every knob publishes (infertune_results[knob]); differs is what the plan
# prints: the differing elements first (a knob may give its own, per element), never cut.
CONTRACT = ("changed", "before", "after", "differs", "reboot_required", "runtime_pending", "msg", "skipped_reason")
# The catalog stage whose changes alter the running host at once: a serving host is drained first.
RUNTIME_STAGE = "runtime"


def _cmdline_params(root, args):
    """(parameters, keys to remove): the parameters plus those meant for this host's CPU vendor
    (amd_pstate= on AMD only) and the PCIe fabric's (IOMMU parameter named for the vendor)."""
    vendor = cpu.vendor(root)
    params = list(args["params"]) + list((args.get("vendor_params") or {}).get(vendor, []))
    remove = list(args.get("remove", []))
    fabric = args.get("fabric")
    if fabric:
        extra, dropped = pcie_fabric.cmdline_params(vendor, fabric["iommu"], fabric.get("link_pm_off", True))
        params += extra
        remove += [key for key in dropped if key not in remove]
    return params, remove


def _apply_cmdline(root, args, gate):
    params, remove = _cmdline_params(root, args)
    return _flag(cmdline.apply_cmdline(root, params, remove, args["dropin"], args.get("update", True), gate),
                 "kernel_cmdline_reboot_required")


def _flag(result, key):
    result["reboot_required"] = bool(result.get(key))
    return result


MODULES = {
    "deb_package": lambda root, a, gate: packages.plan_package(root, a["name"], gate,
                                                               variables=a.get("variables")),
    "apt_hold": lambda root, a, gate: packages.apply_kernel_hold(root, bool(a["hold"]), gate),
    "boot_kernel": lambda root, a, gate: _flag(boot_kernel.apply_boot_kernel(root, a["release"], gate),
                                               "boot_kernel_reboot_required"),
    "kernel_cmdline": _apply_cmdline,
    "sysctl": lambda root, a, gate: sysctl.apply_sysctls(root, a["settings"], a["path"], gate),
    "modprobe_options": lambda root, a, gate: _flag(modprobe.apply_options(root, a["options"], a["path"], gate),
                                                    "modprobe_options_reload_required"),
    "systemd_unit": lambda root, a, gate: systemd.apply_unit(root, a["unit"], a["files"], a.get("enabled", True),
                                                             a.get("started", False), gate, a.get("wanted_by"),
                                                             a.get("drop_exec_args")),
    "amd_pstate": lambda root, a, gate: amd_pstate.apply_mode(root, a["mode"], gate),
    "cpufreq_policy": lambda root, a, gate: cpufreq.apply_policy(root, a["governor"], a.get("epp"), gate),
    "cpuidle_states": lambda root, a, gate: cpuidle.apply_states(root, a["max_latency"], a.get("keep_poll", True),
                                                                 gate),
    "pcie_mrrs": lambda root, a, gate: pcie.apply_mrrs(root, a["value"], a.get("vendor", "0x10de"),
                                                       a.get("classes", ["0x0300", "0x0302"]), gate),
    "pcie_acs": lambda root, a, gate: pcie_acs.apply_acs(root, a.get("vendor", "0x10de"),
                                                         a.get("classes", ["0x0300", "0x0302"]),
                                                         bool(a.get("force", False)), gate),
}


def run(module, args, gate, root="/", stage=None):
    """Apply (or, with a check-mode gate, predict) one knob: (contract, diff, actions).
    stage is the catalog entry's: a change of a runtime knob is runtime_pending, unless the
    apply function says itself (a sysctl whose file alone changes is not)."""
    if module not in MODULES:
        raise TuningError("unknown knob module %r (known: %s)" % (module, ", ".join(sorted(MODULES))))
    if not isinstance(args, dict):
        raise TuningError("arguments of %s must be a mapping, got %s" % (module, type(args).__name__))
    try:
        result = MODULES[module](root, args, gate)
    except KeyError as exc:
        raise TuningError("%s: missing argument %s" % (module, exc)) from exc
    except (TypeError, ValueError) as exc:
        raise TuningError("%s: bad argument: %s" % (module, exc)) from exc
    contract = {key: result[key] for key in CONTRACT if key in result}
    contract["reboot_required"] = bool(result.get("reboot_required"))
    contract.setdefault("runtime_pending", stage == RUNTIME_STAGE and bool(result["changed"]))
    contract.setdefault("msg", "")
    if "differs" not in contract:
        # Files rewritten under an unchanged state (a unit's) differ only in what msg names.
        contract["differs"] = (differs.summarize(result.get("before"), result.get("after"))
                               or (contract["msg"] if result["changed"] else ""))
    return contract, result.get("diff"), list(gate.actions)


def predict(entries, root="/", runner=None):
    """Every catalog entry in check mode: {name: contract}, a failure as {failed, msg}."""
    results = {}
    for entry in entries:
        gate = Gate(check_mode=True) if runner is None else Gate(check_mode=True, runner=runner)
        try:
            results[entry["name"]] = run(entry["module"], entry.get("args") or {}, gate, root, entry.get("stage"))[0]
        except TuningError as exc:
            results[entry["name"]] = {"failed": True, "changed": False, "msg": str(exc)}
    return results


def drains(entry):
    """Whether applying the entry's change disturbs a serving host, so that it is drained first: the
    catalog's `drain`, else the conservative answer for a runtime knob (yes)."""
    value = entry.get("drain", entry.get("stage") == RUNTIME_STAGE)
    return value.strip().lower() in ("yes", "on", "1", "true", "y", "t") if isinstance(value, str) else bool(value)


def summarize(entries, results, reboot_strategy):
    """What a host needs: pending knobs, whether to reboot and why, whether to drain first and why
    (drain_reasons: the knobs whose change disturbs a serving host; live: the pending runtime knobs
    applied under it)."""
    by_name = {entry["name"]: entry for entry in entries}
    pending = [name for name, result in results.items() if result.get("changed")]
    failed = {name: result["msg"] for name, result in results.items() if result.get("failed")}
    reasons = [by_name[name].get("label", name) for name, result in results.items() if result.get("reboot_required")]
    reboot = reboot_strategy == "always" or (reboot_strategy == "when_needed" and bool(reasons))
    # A runtime knob says itself whether its change reaches the running host (a sysctl whose file
    # alone changes does not); a boot knob is read at the next boot, and never drains.
    runtime = [name for name in pending if by_name[name].get("stage") == RUNTIME_STAGE and results[name].get("runtime_pending")]
    drain_reasons = [name for name in pending if (name in runtime or by_name[name].get("stage") != RUNTIME_STAGE)
                     and drains(by_name[name])] + (["reboot"] if reboot else [])
    return {"pending": pending, "failed": failed, "reboot": reboot, "reboot_reasons": reasons,
            "drain": bool(drain_reasons), "drain_reasons": drain_reasons,
            "live": [name for name in runtime if not drains(by_name[name])]}
