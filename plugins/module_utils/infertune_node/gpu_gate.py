"""The GPU gate: read the GPUs (NVML, else nvidia-smi) and judge them against the profile.

Shared by the gpu_facts module and the plan, which runs it in the same call as the knobs.
"""
from .cuda_driver import driver_floor
from .gpu_query import GpuQueryError, NvmlUnavailable, gate_problems, match_table, query_nvml, query_smi


def read_gpus(run, source="auto", nvidia_smi="nvidia-smi"):
    """(source used, gpus). run(argv) -> (rc, out, err) runs a command with LC_ALL=C."""
    if source in ("auto", "nvml"):
        try:
            import pynvml
        except ImportError:
            if source == "nvml":
                raise GpuQueryError("pynvml (nvidia-ml-py) is not importable")
        else:
            try:
                return "nvml", query_nvml(pynvml)
            except NvmlUnavailable:
                if source == "nvml":
                    raise
    return "nvidia_smi", query_smi(run, nvidia_smi)


def gate(run, source="auto", nvidia_smi="nvidia-smi", expected_count=None, compute_capability=None,
         min_driver=None, venv=None, require_persistence=False, gpu_table=None):
    """The gate's result: gpus, their count and capabilities, the driver floor and the problems.
    Raises GpuQueryError when the GPUs cannot be read at all."""
    source, gpus = read_gpus(run, source, nvidia_smi)
    floor = driver_floor(venv) if venv else None
    if gpu_table is not None:
        for gpu in gpus:
            gpu["table_key"] = match_table(gpu_table, gpu)
    problems = gate_problems(gpus, expected_count=expected_count, compute_capability=compute_capability,
                             min_driver=min_driver, require_persistence=require_persistence,
                             driver_floor=floor if floor and floor["min_driver"] else None)
    return {"gpus": gpus, "gpu_count": len(gpus), "compute_capabilities": sorted({g["compute_capability"] for g in gpus}),
            "source": source, "driver_floor": floor, "problems": problems}
