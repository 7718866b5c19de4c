"""The run's record: what a role publishes for the engine, the fleet report, the runner's summary
and the later stages (plugins/action/infertune_publish.py publishes it as host variables).

Pure: no ansible import, so the merge is tested as it runs.

The record is four host variables, each set by the plan (infertune/host_plan.py) and then only
through infertune.fleet.infertune_publish, never by a role's own set_fact (a set_fact's value
would outrank every later publication of the same name):

  infertune_reached  the stage the host reached (STAGES; "plan" until the rollout records one)
  infertune_results  per knob (or stage: drain, reboot), the result the fleet report shows
  infertune_failure  why the plan or the rollout ended the host
  infertune_gpus     the GPUs the gate read
"""
from __future__ import annotations

from collections.abc import Mapping

STAGE = "infertune_reached"
RESULTS = "infertune_results"
FAILURE = "infertune_failure"
GPUS = "infertune_gpus"
NAMES = (STAGE, RESULTS, FAILURE, GPUS)
# The rollout's stages in order; a host that reached none is at the plan.
STAGES = ("plan", "boot config", "drain", "reboot", "runtime", "sglang", "verify")
OPTIONS = ("reached", "results", "update", "failure", "gpus")


class PublishError(ValueError):
    """Input the record cannot take, with the reason."""


def _entries(option, value):
    if not isinstance(value, Mapping):
        raise PublishError(f"{option}: a mapping of knob names to their results, got {type(value).__name__}")
    for name, entry in value.items():
        if not isinstance(name, str) or not name:
            raise PublishError(f"{option}: a knob name must be a non-empty string, got {name!r}")
        if not isinstance(entry, Mapping):
            raise PublishError(f"{option}.{name}: a mapping of the knob's result, got {type(entry).__name__}")
    return value


def host_vars(current, reached=None, results=None, update=None, failure=None, gpus=None):
    """The host variables one publication sets, given the host's infertune_results now (`current`,
    None where it has none).

    reached: the stage (one of STAGES) -> infertune_reached.
    results: {knob: result} -> each knob's result replaced in infertune_results (the others kept).
    update: {knob: fields} -> the fields merged into each knob's result (created where missing),
      its other fields kept; applied after `results`.
    failure: the reason -> infertune_failure.
    gpus: the GPUs the gate read -> infertune_gpus.
    """
    given = {k: v for k, v in (("reached", reached), ("results", results), ("update", update),
                               ("failure", failure), ("gpus", gpus)) if v is not None}
    if not given:
        raise PublishError("nothing to publish: give one of " + ", ".join(OPTIONS))
    out = {}
    if reached is not None:
        if reached not in STAGES:
            raise PublishError(f"reached: one of {', '.join(STAGES)}, got {reached!r}")
        out[STAGE] = reached
    if results is not None or update is not None:
        if current is not None and not isinstance(current, Mapping):
            raise PublishError(f"{RESULTS} is not a mapping ({type(current).__name__}): nothing to merge into")
        merged = dict(current or {})
        for name, entry in _entries("results", results or {}).items():
            merged[name] = dict(entry)
        for name, fields in _entries("update", update or {}).items():
            before = merged.get(name)
            if before is not None and not isinstance(before, Mapping):
                raise PublishError(f"update.{name}: the knob's result is not a mapping ({type(before).__name__})")
            merged[name] = {**(before or {}), **fields}
        out[RESULTS] = merged
    if failure is not None:
        if not isinstance(failure, str) or not failure.strip():
            raise PublishError(f"failure: the reason, a non-empty string, got {failure!r}")
        out[FAILURE] = failure
    if gpus is not None:
        if not isinstance(gpus, list):
            raise PublishError(f"gpus: a list of the GPUs the gate read, got {type(gpus).__name__}")
        out[GPUS] = gpus
    return out


def published(host, values):
    """add_host's answer: `values` as the host variables of `host`, in no new group."""
    return {"host_name": host, "groups": [], "host_vars": values}
