"""AWX / Automation Platform job slicing: tell a slice from the fleet, and what an apply may do there.

A sliced job template runs as N ansible-playbook runs, each on an inventory that holds only its
share of the enabled hosts (sorted by name, taken round-robin); every group is there, holding only
the slice's hosts. No slice number or count reaches the playbook: AWX passes awx_job_id and, since
the slices are the jobs of a workflow, awx_workflow_job_id (docs/awx.md cites the source). So a
slice is told by what it sees: the hosts of the inventory's gpu_nodes (not the --limit) against
the fleet the user declares, infertune_fleet_size.

Serial batches, the canary and rollout_max_failures act inside one run: an apply on N slices runs
N canaries at once and lets N times the failures through. Such an apply is refused before any
host changes unless rollout_slice_max_failures says what each slice may lose; that budget is then
the slice's rollout_max_failures. Check, drift and verify runs change nothing and may be sliced.
The plan of playbooks/rollout.yml holds the rollout to this (infertune_validate's rollout option).
"""
from __future__ import annotations

from .validation import Problem, convert

FLEET_SIZE = "infertune_fleet_size"
SLICE_BUDGET = "rollout_slice_max_failures"
MAX_FAILURES = "rollout_max_failures"
# AWX sets both names (the tower_ ones for older playbooks).
WORKFLOW_JOB_ID = ("awx_workflow_job_id", "tower_workflow_job_id")


def _size(fleet_size):
    """The declared fleet size, or None where it is not a valid one (the validation says why)."""
    size, error = convert(fleet_size, "int")
    return None if error or size < 0 else size


def _set(budget):
    return budget is not None and str(budget).strip() != ""


def is_slice(inventory_hosts, fleet_size):
    """Whether the run's gpu_nodes (inventory_hosts, a count) are a share of the declared fleet."""
    size = _size(fleet_size)
    return bool(size) and inventory_hosts < size


def guard(inventory_hosts, fleet_size, slice_budget="", workflow_job_id=None):
    """Problems that stop an apply (not a --check run) before any host changes; [] to go on.

    inventory_hosts: the hosts of the inventory's gpu_nodes (groups, not the --limit);
    workflow_job_id: awx_workflow_job_id when an AWX workflow (a sliced job is one) runs the job."""
    size = _size(fleet_size)
    if size is None:
        return []
    if size == 0:
        if workflow_job_id in (None, ""):
            return []
        return [Problem(FLEET_SIZE, "must be set for an apply that an AWX workflow runs (awx_workflow_job_id %s):"
                        " a sliced job template runs as a workflow whose jobs each see a share of gpu_nodes;"
                        " set it to the number of hosts in gpu_nodes of the whole inventory (this run sees %d)"
                        % (workflow_job_id, inventory_hosts), value=size)]
    if inventory_hosts > size:
        return [Problem(FLEET_SIZE, "must be at least the number of hosts in the inventory's gpu_nodes (%d);"
                        " update it" % inventory_hosts, value=size)]
    if inventory_hosts < size and not _set(slice_budget):
        return [Problem(SLICE_BUDGET, "must be set for an apply on a slice of the fleet: the inventory's gpu_nodes"
                        " holds %d of the %d hosts of infertune_fleet_size (AWX job slicing?), and each slice would"
                        " run its own canary and allow rollout_max_failures by itself; run the apply unsliced, or"
                        " set rollout_slice_max_failures to the failures each slice may have" % (inventory_hosts, size))]
    return []


def max_failures(inventory_hosts, fleet_size, rollout_max_failures, slice_budget=""):
    """(the failures this run's rollout may have, the variable that says so): on a slice with a
    per-slice budget, that budget; else rollout_max_failures."""
    if _set(slice_budget) and is_slice(inventory_hosts, fleet_size):
        return slice_budget, SLICE_BUDGET
    return rollout_max_failures, MAX_FAILURES
