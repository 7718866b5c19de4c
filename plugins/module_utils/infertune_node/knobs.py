"""Every knob behind one call and one result shape.

Each entry of the knob catalog (roles/infertune/vars/main.yml) names a knob kind (its
`module`: kinds.KINDS, one module of this package each) and its arguments. The `knob` module
applies one, the `infertune_plan` module reads them all in check mode, and the boot-time tool
re-applies the runtime ones: the same code in all three places. Each runs a kind's verb: apply
(recording the host's original state first: original.py), or revert (putting it back).
"""
from . import differs, original
from .gate import Gate, TuningError
from .kinds import KINDS

# The result contract every knob publishes (infertune_results[knob]); differs is what the plan
# prints: the differing elements first (a knob may give its own, per element), never cut.
CONTRACT = ("changed", "before", "after", "differs", "reboot_required", "runtime_pending", "disturbs", "msg",
            "skipped_reason")
# The catalog stage whose changes alter the running host at once.
RUNTIME_STAGE = "runtime"
# What a knob's call does: set it as asked, or put back what the host had before infertune.
VERBS = ("apply", "revert")


def _revert(kind, root, name, args, gate, stage):
    """The kind's revert with the knob's record, then the record removed once it is done."""
    result = kind.revert(root, args, original.read(root, name) if name else None, gate)
    # The record alone is no change to the running host: runtime_pending is what the values did.
    result.setdefault("runtime_pending", stage == RUNTIME_STAGE and bool(result["changed"]))
    if name and original.forget(root, name, gate):
        result["msg"] = (result.get("msg") or "") + "; its record of the host's original state removed"
        if not result["changed"]:
            result["changed"], result["differs"] = True, "record of the original state removed"
    return result


def run(module, args, gate, root="/", stage=None, name=None, verb="apply"):
    """Apply (or, with a check-mode gate, predict) one knob: (contract, diff, actions).
    stage is the catalog entry's: a change of a runtime knob is runtime_pending, unless the
    apply function says itself (a sysctl whose file alone changes is not). name is the knob's:
    its record of the host's original state (original.py), kept by the first apply that changes
    something and read by revert. verb revert puts the knob back instead (VERBS)."""
    if module not in KINDS:
        raise TuningError("unknown knob module %r (known: %s)" % (module, ", ".join(sorted(KINDS))))
    if verb not in VERBS:
        raise TuningError("unknown verb %r (known: %s)" % (verb, ", ".join(VERBS)))
    kind = KINDS[module]
    try:
        args = kind.arguments(args)
    except ValueError as exc:
        raise TuningError(str(exc)) from exc
    try:
        if verb == "revert":
            result = _revert(kind, root, name, args, gate, stage)
        else:
            result = original.keep(root, name, kind, args, gate, lambda: kind.apply(root, args, gate))
    except (KeyError, TypeError, ValueError) as exc:
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
    """Every catalog entry in check mode, with its verb (the entry's `verb`, default apply):
    {name: contract}, a failure as {failed, msg}."""
    results = {}
    for entry in entries:
        gate = Gate(check_mode=True) if runner is None else Gate(check_mode=True, runner=runner)
        try:
            results[entry["name"]] = run(entry["module"], entry.get("args") or {}, gate, root, entry.get("stage"),
                                         entry["name"], entry.get("verb", "apply"))[0]
        except TuningError as exc:
            results[entry["name"]] = {"failed": True, "changed": False, "msg": str(exc)}
    return results


def drains(entry, result=None):
    """Whether applying the entry's change disturbs a serving host, so that it is drained first: what
    the change says itself (a result's disturbs: a sysfs setting's own drain), else the catalog's
    `drain`, else the conservative answer for a runtime knob (yes)."""
    value = (result or {}).get("disturbs", entry.get("drain", entry.get("stage") == RUNTIME_STAGE))
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
                     and drains(by_name[name], results[name])] + (["reboot"] if reboot else [])
    return {"pending": pending, "failed": failed, "reboot": reboot, "reboot_reasons": reasons,
            "drain": bool(drain_reasons), "drain_reasons": drain_reasons,
            "live": [name for name in runtime if not drains(by_name[name], results[name])]}
