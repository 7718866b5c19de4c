"""infertune_drift: publish what the drift run read (playbooks/drift.yml): reports/drift.json, the
Prometheus textfile for node_exporter and the drift section of reports/fleet.md.

Runs on the control node only (run_once, after the read). Each host of the run is read from its
variables: the plan's reason for a host it could not reach (infertune_unreachable), the plan's stop
(infertune_failure), the plan (infertune_plan: pending knobs, every enabled knob, the reasons to
reboot) and, when the run verified, the catalog knobs its verification found off (the option
verified: the verification's answer per host), which count as pending too. infertune.drift merges
that into the state the previous run left. The knob catalog is the one this run's Ansible read
(infertune_knobs, the engine role's vars: the playbook's publish play imports the role), not the
file read again.

Options: dir (reports directory), textfile_dir (node_exporter's textfile directory; empty: no
textfile), hosts (the run's hosts), fleet (the inventory's hosts, kept in the files), verified
(infertune_verify's hosts, when the run verified; empty else). Returns
exit_status (0 no drift, 2 drift, 1 a host of the run not read), hosts (per host of the run:
checked, error, last_read, pending, reboot_pending), msg; fails when a file cannot be written.
"""
from __future__ import annotations

import os

from ansible.plugins.action import ActionBase

from ansible_collections.infertune.fleet.infertune import drift, report
from ansible_collections.infertune.fleet.infertune.plain import plain

LOST = "unreachable or failed before its plan was read (the run's output names the task)"


def reading(host, facts, catalog, verified=None):
    """This run's reading of one host (drift.read_ok or drift.read_failed), from its variables and
    its verification (`verified`: infertune_verify's answer for the host, when the run verified)."""
    if "infertune_unreachable" in facts:
        return drift.read_failed("unreachable: " + report.first_line(str(plain(facts["infertune_unreachable"])) or "no answer"))
    plan = plain(facts.get("infertune_plan"))
    gpus = drift.health_of(((plan or {}).get("gpus") or {}).get("health")) if isinstance(plan, dict) else None
    if "infertune_failure" in facts:
        return drift.read_failed("stopped by the plan: " + str(plain(facts["infertune_failure"])), gpus)
    if not isinstance(plan, dict) or "pending" not in plan:
        return drift.read_failed(LOST)
    results = plan.get("results") or {}
    knobs = [k for k in results if k in catalog]
    pending = {k: results[k].get("differs") or results[k].get("msg") or "pending" for k in plan["pending"] if k in catalog}
    for knob in (verified or {}).get("failing") or []:
        if knob in catalog and knob not in pending:
            pending[knob] = "its verification failed"
    return drift.read_ok(knobs, pending, plan.get("reboot_reasons") or [], gpus)


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False
    _supports_check_mode = True  # writes on the control node only, also under --check
    _VALID_ARGS = frozenset(("dir", "textfile_dir", "hosts", "fleet", "verified"))

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        result["changed"] = False
        options = {k: plain(self._templar.template(v)) for k, v in self._task.args.items()}
        hostvars = task_vars["hostvars"]
        rows = report.catalog_rows(plain(task_vars.get("infertune_knobs")))
        catalog = {k[0] for k in report.knobs(rows)} - {k[0] for k in report.EXTRA}
        verified = options.get("verified") or {}
        readings = {h: reading(h, hostvars[h], catalog, verified.get(h)) for h in options["hosts"]}
        textfile_dir = options.get("textfile_dir") or ""
        if textfile_dir and not os.path.isdir(textfile_dir):
            result.update(failed=True, msg=f"the textfile directory {textfile_dir} does not exist: create it (node_exporter's "
                                           "--collector.textfile.directory) or set report_drift_textfile_dir to ''")
            return result
        try:
            state = drift.publish(options["dir"], textfile_dir, readings, options["fleet"])
            report.update_drift_section(options["dir"], rows)
        except OSError as exc:
            result.update(failed=True, msg=f"drift watch: cannot write {exc.filename}: {exc.strerror}")
            return result
        hosts = {h: {k: state["hosts"][h][k] for k in ("checked", "error", "last_read", "reboot_pending")}
                 | {"pending": sorted(state["hosts"][h]["pending"])} for h in options["hosts"]}
        status = state["run"]["exit_status"]
        lines = [f"{h}: " + ("not read: " + e["error"] if not e["checked"] else
                             "pending: " + ", ".join(e["pending"]) if e["pending"] else
                             "reboot pending" if e["reboot_pending"] else "no drift") for h, e in hosts.items()]
        result.update(exit_status=status, hosts=hosts, msg=lines,
                      written=[os.path.join(options["dir"], drift.STATE_FILE)]
                      + ([os.path.join(textfile_dir, drift.TEXTFILE)] if textfile_dir else []))
        return result
