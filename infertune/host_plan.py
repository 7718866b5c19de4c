"""One host's plan from its reads: which unit knobs are in place, what a second read asks, and the
record the roles publish (the merged plan, the results, the reasons the plan stops the host, the
group it joins) and the host variables and group it is published as. Plain data in, plain data
out: plugins/action/infertune_host_plan.py runs it on the control node, once per host, between
the reads."""
from __future__ import annotations

import hashlib

from . import gpu_health

# A unit asked to be stopped is in place only when it neither runs nor waits to restart.
RUNNING = ("active", "activating", "reloading")
PENDING_GROUP = "infertune_pending"
# Catalog keys only the control node reads (the docs' tables, the input validation).
CONTROLLER_ONLY = ("doc", "rules")
CONVERGED_GROUP = "infertune_converged"
# The host variables the plan publishes (published()), which every later task and play reads.
PUBLISHED = ("infertune_plan", "infertune_results", "infertune_gpus", "sglang_support", "infertune_check_mode",
             "infertune_failure", "infertune_unreachable")


def truthy(value):
    """A boolean as Ansible's bool filter reads one (-e gives strings)."""
    if isinstance(value, str):
        return value.strip().lower() in ("yes", "on", "1", "true", "y", "t")
    return bool(value)


def host_entries(catalog):
    """Catalog entries without their controller-only keys. Reads only the keys it keeps, so that
    Ansible's lazy templating never renders the others."""
    return [{key: knob[key] for key in knob if key not in CONTROLLER_ONLY} for knob in catalog]


def flat(values):
    """The items of nested lists in order, as Ansible's flatten filter gives them: a string is one
    item, None none."""
    if values is None:
        return []
    if not isinstance(values, (list, tuple)):
        return [values]
    return [item for value in values for item in flat(value)]


def rendered_over(entries, rendered):
    """Catalog entries with what is already rendered of them ({name: {key: value}}) in place of
    their own keys: a later resolution reads those values instead of rendering the keys anew. Keys
    an entry does not have are not added."""
    out = []
    for entry in entries:
        done = rendered.get(entry.get("name")) or {}
        out.append({**entry, **{key: value for key, value in done.items() if key in entry}} if done else entry)
    return out


def units(catalog):
    """The catalog's unit knobs (module systemd_unit): their files are compared on the controller."""
    return [knob for knob in catalog if knob.get("module") == "systemd_unit"]


def files_in_place(files, found):
    """Whether every rendered file is on the host with the same content (sha1) and mode."""
    for wanted in files:
        old = found.get(wanted["path"])
        if (old is None or old.get("sha1") != hashlib.sha1(str(wanted["content"]).encode()).hexdigest()
                or old.get("mode") != wanted.get("mode", "0644")):
            return False
    return True


def in_place(catalog, fingerprint):
    """{unit knob: its files and unit state as asked}, from the first read's fingerprint."""
    out = {}
    for knob in units(catalog):
        args = knob["args"]
        unit = fingerprint["units"][args["unit"]]
        files = list(args.get("files") or []) + list(knob.get("secret_files") or [])
        enabled = (unit.get("enabled") == "enabled") == truthy(args.get("enabled"))
        active = (unit.get("active") == "active" if truthy(args.get("started"))
                  else unit.get("active") not in RUNNING)
        out[knob["name"]] = files_in_place(files, fingerprint["files"]) and enabled and active
    return out


def second_read(catalog, placed):
    """The second read's knobs (their secret files apart, for the no_log option) for the unit knobs
    not in place, in catalog order: (knobs, secret_files)."""
    changed = [knob for knob in units(catalog) if not placed.get(knob["name"], False)]
    knobs = [{k: v for k, v in knob.items() if k != "secret_files"} for knob in changed]
    return knobs, {knob["name"]: list(knob.get("secret_files") or []) for knob in changed}


def unit_results(catalog, placed, fingerprint):
    """The result contract of the unit knobs the first read found in place."""
    out = {}
    for knob in units(catalog):
        if not placed.get(knob["name"], False):
            continue
        name = knob["args"]["unit"]
        unit = fingerprint["units"][name]
        out[knob["name"]] = {
            "changed": False, "before": unit, "after": unit, "reboot_required": False, "runtime_pending": False,
            "msg": name + ": " + ("files in place" if knob.get("paths") else f"{unit.get('enabled')}, {unit.get('active')}")}
    return out


def merged(first, second):
    """The plan of both reads: the second (the unit knobs that differ) over the first."""
    second = second or {"results": {}, "pending": [], "drain": False}
    return dict(first, results={**first.get("results", {}), **second.get("results", {})},
                pending=list(first.get("pending", [])) + list(second.get("pending", [])),
                drain=bool(first.get("drain")) or bool(second.get("drain")),
                drain_reasons=list(first.get("drain_reasons", [])) + list(second.get("drain_reasons", [])),
                live=list(first.get("live", [])) + list(second.get("live", [])))


def knob_failures(host, catalog, failed):
    """One line per reason a knob cannot be applied, naming the knobs, their roles and the toggles
    that leave them out: knobs that fail alike (every unit knob on a host without systemctl) share
    one line."""
    by_reason = {}
    for knob in catalog:
        if knob["name"] in failed:
            by_reason.setdefault(failed[knob["name"]], []).append(knob)
    lines = []
    for reason, knobs in by_reason.items():
        roles = ", ".join(dict.fromkeys(k["role"] for k in knobs))
        toggles = [k["toggle"] for k in knobs if k.get("toggle")]
        lines.append(f"{host}: {', '.join(k['name'] for k in knobs)} (role{'s' if ',' in roles else ''} {roles}): {reason}"
                     + (f"; set {' and '.join(toggles)}: false to leave {'them' if len(toggles) > 1 else 'it'} out"
                        if toggles else ""))
    return lines


def gpus_found(gate):
    """What the GPU gate found, in one line: '8 × NVIDIA RTX PRO 6000 (12.0), driver 580.95.05', then
    its problems; none found says why (nvidia-smi's answer among the problems)."""
    groups = {}
    for gpu in gate.get("gpus") or []:
        key = (gpu.get("name"), gpu.get("compute_capability"))
        groups[key] = groups.get(key, 0) + 1
    drivers = sorted({str(g.get("driver_version")) for g in gate.get("gpus") or [] if g.get("driver_version")})
    found = ", ".join(f"{count} × {name} ({cc})" for (name, cc), count in groups.items()) or "no GPU found"
    if drivers:
        found += ", driver " + " and ".join(drivers)
    return "; ".join([found] + list(gate.get("problems") or []))


def results(plan, backend, fabric):
    """The results the report and the rollout read: the plan's, what the GPU gate found when it ran,
    the MoE backend's verdict when it was judged, the fabric gates' when they ran."""
    out = dict(plan["results"])
    if plan.get("gpus") is not None:
        out["gpus"] = {"changed": False, "before": None, "after": gpus_found(plan["gpus"]),
                       "msg": "; ".join(plan["gpus"].get("problems") or []) or "GPU gate passed"}
    if backend.get("verdict") is not None:
        found = list(dict.fromkeys(f.get("resolved_backend") for f in backend.get("findings") or []))
        out["backend"] = {"changed": False, "before": None, "msg": backend.get("reason", ""),
                          "after": f"{backend['verdict']} ({', '.join(str(b) for b in found)})"}
    if fabric is not None:
        out["fabric"] = {"changed": False, "before": None, "msg": fabric.get("msg", ""),
                         "after": "; ".join([fabric.get("msg", "")] + list(fabric.get("warnings") or [])),
                         "aer": fabric.get("aer") or {}}
    return out


def problems(host, catalog, first, second, extra, control_node):
    """Why the plan stops the host, one line each: knobs that cannot be applied, the GPU gate, the
    PCIe fabric gates, `extra` (sglang's checks), the model weights, the control node."""
    failed = {**first.get("failed", {}), **(second or {}).get("failed", {})}
    return (knob_failures(host, catalog, failed)
            + [f"{host}: GPU gate: {p}" for p in (first.get("gpus") or {}).get("problems") or []]
            + [f"{host}: PCIe fabric (role pcie): {p}" for p in (first.get("fabric") or {}).get("failures") or []]
            + ([f"{host}: kernel (role kernel): {first['target_kernel']['problem']}"]
               if (first.get("target_kernel") or {}).get("problem") else [])
            + list(extra)
            + [f"{host}: model weights (sglang_model_path): {p}" for p in (first.get("weights") or {}).get("problems") or []]
            + ([f"{host}: is the control node (its /etc/machine-id is the control node's);"
                " set infertune_allow_control_node: true to tune it"] if control_node else []))


def is_control_node(host_machine_id, own_machine_id):
    """The host is the machine that runs Ansible (same /etc/machine-id)."""
    return bool(host_machine_id) and host_machine_id == (own_machine_id or "").strip()


def record(host, catalog, first, second, placed, backend, extra, control_node, reboot_to_reset=False):
    """The host's record: plan, results, backend, problems and group (none when stopped). With the
    GPUs' health read (infertune/gpu_health.py): an rma GPU stops the host; a reset-class one on a
    host with nothing else to reboot for makes it reboot when reboot_to_reset."""
    # The unit files' fingerprint served the comparison; the record leaves it out (it is the
    # biggest part of a read, and every later task of the host would carry it).
    read = {k: v for k, v in first.items() if k != "fingerprint"}
    plan = merged(dict(read, results={**first.get("results", {}),
                                      **unit_results(catalog, placed, first.get("fingerprint") or {})}), second)
    stops = problems(host, catalog, first, second, extra, control_node)
    health_stops, reboot, health = gpu_health.outcome(host, (first.get("gpus") or {}).get("health"),
                                                      bool(plan.get("reboot")), reboot_to_reset)
    stops += health_stops
    if reboot:
        plan = dict(plan, reboot=True, drain=True, reboot_reasons=list(plan.get("reboot_reasons") or []) + ["GPU health"])
    group = None if stops else PENDING_GROUP if plan["pending"] or plan.get("reboot") else CONVERGED_GROUP
    found = results(plan, backend, first.get("fabric"))
    if health is not None:
        found["gpu_health"] = health
    return {"plan": plan, "results": found, "backend": backend, "problems": stops, "group": group}


def published(host, record, check_mode):
    """add_host's answer for a planned host: its record as host variables (infertune_failure, the
    reasons joined, only for a host the plan stops) and the group it joins."""
    host_vars = {"infertune_plan": record["plan"], "infertune_results": record["results"],
                 "infertune_gpus": (record["plan"].get("gpus") or {}).get("gpus") or [],
                 "sglang_support": record["backend"], "infertune_check_mode": bool(check_mode)}
    if record["problems"]:
        host_vars["infertune_failure"] = "; ".join(record["problems"])
    return {"host_name": host, "groups": [record["group"]] if record["group"] else [], "host_vars": host_vars}


def unreachable(host, msg, check_mode):
    """add_host's answer for a host the read could not reach, where the run goes on past it."""
    return {"host_name": host, "groups": [],
            "host_vars": {"infertune_unreachable": msg or "no answer", "infertune_check_mode": bool(check_mode)}}
