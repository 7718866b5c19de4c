"""The GPU gate: read the GPUs (NVML, else nvidia-smi) and judge them against the profile.

Shared by the gpu_facts module and the plan, which runs it in the same call as the knobs, with
the GPUs' health read in the same nvidia-smi query (gpu_health.py).
"""
from . import gpu_health
from .cuda_driver import driver_floor
from .gpu_query import GpuQueryError, NvmlUnavailable, gate_problems, match_table, query_nvml, query_smi
from .timed import Unresponsive


def _pynvml():
    try:
        import pynvml
    except ImportError:
        return None
    return pynvml


def read_gpus(run, source="auto", nvidia_smi="nvidia-smi"):
    """(source used, gpus). run(argv) -> (rc, out, err) runs a command with LC_ALL=C."""
    if source in ("auto", "nvml"):
        pynvml = _pynvml()
        if pynvml is None:
            if source == "nvml":
                raise GpuQueryError("pynvml (nvidia-ml-py) is not importable")
        else:
            try:
                return "nvml", query_nvml(pynvml)
            except NvmlUnavailable:
                if source == "nvml":
                    raise
    try:
        return "nvidia_smi", query_smi(run, nvidia_smi)
    except Unresponsive as exc:
        raise gpu_health.DriverUnresponsive("driver unresponsive: %s" % exc)


def read_with_health(run, source, nvidia_smi, health, root="/"):
    """(source, gpus, health): the health query answers for the GPUs too (one nvidia-smi, under the
    runner's time limit), unless source is nvml; NVML, where it imports, gives the replay counters."""
    nvml = _pynvml() if source in ("auto", "nvml") else None
    gpus, result = gpu_health.read(run, nvidia_smi, root=root, nvml=nvml, **health)
    if source == "nvml":
        return read_gpus(run, source, nvidia_smi) + (result,)
    return "nvidia_smi", gpus, result


def gate(run, source="auto", nvidia_smi="nvidia-smi", expected_count=None, compute_capability=None,
         min_driver=None, venv=None, require_persistence=False, gpu_table=None, health=None, root="/"):
    """The gate's result: gpus, their count and capabilities, the driver floor and the problems, and
    with health (its limits: gpu_health.read) each GPU's health. Raises GpuQueryError when the GPUs
    cannot be read at all (DriverUnresponsive when nvidia-smi hangs)."""
    if health is None:
        source, gpus = read_gpus(run, source, nvidia_smi)
        found = None
    else:
        source, gpus, found = read_with_health(run, source, nvidia_smi, health, root)
    floor = driver_floor(venv) if venv else None
    if gpu_table is not None:
        for gpu in gpus:
            gpu["table_key"] = match_table(gpu_table, gpu)
    problems = gate_problems(gpus, expected_count=expected_count, compute_capability=compute_capability,
                             min_driver=min_driver, require_persistence=require_persistence,
                             driver_floor=floor if floor and floor["min_driver"] else None)
    result = {"gpus": gpus, "gpu_count": len(gpus), "compute_capabilities": sorted({g["compute_capability"] for g in gpus}),
              "source": source, "driver_floor": floor, "problems": problems}
    if found is not None:
        result["health"] = found
    return result
