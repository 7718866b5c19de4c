"""infertune_rollout: decide, once per serial batch, whether the rollout goes on.

Runs on the control node only (run_once, before each batch of the rollout play). From the
run's hosts, those that passed their plan, the rollout play's hosts in order and the hosts
marked converged so far it computes: the failures so far (failed plans, and hosts of earlier
batches that did not converge: failed or lost), the canary (the first hosts that passed their
plan and have changes pending: the first batch), the failures rollout_max_failures allows,
and the reason to stop (a canary host did not converge, or more failures than allowed), with
every host the stop leaves out.

Options: hosts (every host of the run, within --limit, in inventory order), planned (hosts
that passed their plan), canary_count, max_failures (a count or "N%" of hosts), and
slice_max_failures and fleet_size: on a slice of the fleet (AWX job slicing, the inventory's
gpu_nodes fewer than fleet_size) a set slice_max_failures replaces max_failures
(infertune/slicing.py). Returns
failures (the hosts failed so far; not "failed", which would fail the task), canary, limit,
stop (the reason; empty to go on), left_out (the hosts a stop leaves out: this batch and
every later one), pending (the rollout play's hosts: those the plan sent into the rollout) and msg.
"""
from __future__ import annotations

from fractions import Fraction

from ansible.plugins.action import ActionBase

from ansible_collections.infertune.fleet.infertune import slicing

# The fact the rollout play sets on each host that converged.
CONVERGED = "rollout_converged"


def failure_limit(max_failures, hosts):
    """Failures allowed among `hosts` hosts: a count, or "N%" of them rounded down (exact, no
    float error: 25% of 8 is 2, 10% of 5 is 0)."""
    text = str(max_failures).strip()
    if text.endswith("%"):
        return int(Fraction(text[:-1].strip()) * hosts / 100)
    return int(text)


def decide(hosts, planned, play_hosts, batch, converged, canary_count, max_failures, budget="rollout_max_failures"):
    """The rollout's decision before `batch` (the hosts of this serial batch).

    hosts: every host of the run in order; planned: the hosts that passed their plan;
    play_hosts: the rollout play's hosts in order (passed their plan, changes pending);
    converged: the rollout's hosts that converged so far; budget: the variable max_failures
    comes from."""
    start = play_hosts.index(batch[0]) if batch else len(play_hosts)
    earlier, planned, converged = play_hosts[:start], set(planned), set(converged)
    bad = {h for h in hosts if h not in planned} | {h for h in earlier if h not in converged}
    failed = [h for h in hosts if h in bad] + [h for h in earlier if h in bad and h not in hosts]
    canary = play_hosts[:int(canary_count)]
    limit = failure_limit(max_failures, len(hosts))
    bad_canary = [h for h in canary if h in bad]
    if bad_canary:
        stop = f"canary host(s) {', '.join(bad_canary)} did not converge"
    elif len(failed) > limit:
        stop = (f"{len(failed)} host(s) failed ({', '.join(failed)}), more than {budget} allows"
                f" ({limit} of {len(hosts)})")
    else:
        stop = ""
    left_out = play_hosts[start:] if stop else []
    msg = f"rollout stopped before {', '.join(left_out)}: {stop}" if stop else (
        f"{len(failed)} failure(s) so far, {limit} allowed; batch: {', '.join(batch)}")
    return {"failures": failed, "canary": canary, "limit": limit, "stop": stop, "left_out": left_out, "msg": msg}


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False
    _supports_check_mode = True
    _VALID_ARGS = frozenset(("hosts", "planned", "canary_count", "max_failures", "slice_max_failures", "fleet_size"))

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        args = self._task.args
        hostvars = task_vars["hostvars"]
        play_hosts, batch = list(task_vars["ansible_play_hosts_all"]), list(task_vars["ansible_play_batch"])
        # Only the hosts of earlier batches can have converged: read no other host's variables.
        earlier = play_hosts[:play_hosts.index(batch[0])] if batch else play_hosts
        converged = [h for h in earlier if hostvars[h].get(CONVERGED)]
        inventory = len((task_vars.get("groups") or {}).get("gpu_nodes") or [])
        max_failures, budget = slicing.max_failures(inventory, args.get("fleet_size", 0), args["max_failures"],
                                                    args.get("slice_max_failures", ""))
        result.update(decide(list(args["hosts"]), list(args["planned"]), play_hosts, batch, converged,
                             args["canary_count"], max_failures, budget), changed=False,
                      # The hosts the plan sent into the rollout (its play's), for the runner's summary.
                      pending=play_hosts)
        return result
