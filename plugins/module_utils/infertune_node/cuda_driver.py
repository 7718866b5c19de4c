"""The NVIDIA driver floor that follows from the CUDA release the installed torch was built for.

torch records that release in torch/version.py (`cuda = "12.8"`); it is read with ast,
never imported, so no GPU, no torch import and no CUDA libraries are needed.
"""

import ast
import glob
import os

# Minimum Linux x86_64 driver per CUDA release (its GA): "CUDA Toolkit and Corresponding
# Driver Versions", Table 3 of the CUDA Toolkit release notes,
# https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/index.html (CUDA 13.0 Update 2 edition).
# Minor-version compatibility lets 12.x run on >= 525.60.13 with limits (no PTX JIT of newer
# code), which torch wheels can need, so the strict per-release minimum is used.
CUDA_MIN_DRIVER = {
    "11.8": "520.61.05",
    "12.0": "525.60.13",
    "12.1": "530.30.02",
    "12.2": "535.54.03",
    "12.3": "545.23.06",
    "12.4": "550.54.14",
    "12.5": "555.42.02",
    "12.6": "560.28.03",
    "12.8": "570.26",
    "12.9": "575.51.03",
    "13.0": "580.65.06",
}
CUDA_MIN_DRIVER_SOURCE = ("NVIDIA CUDA Toolkit release notes, Table 3 (Toolkit Driver Version, Linux x86_64), "
                          "https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/index.html")


def torch_build(venv):
    """(torch version, CUDA release) from torch/version.py in venv; (None, None) when torch is absent.

    A CPU-only torch records cuda = None.
    """
    for path in sorted(glob.glob(os.path.join(venv, "lib", "python3*", "site-packages", "torch", "version.py"))):
        with open(path, encoding="utf-8") as handle:
            tree = ast.parse(handle.read(), filename=path)
        found = {}
        for node in tree.body:
            # torch writes both `cuda = '12.8'` and `cuda: Optional[str] = '12.8'`.
            target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else \
                node.target if isinstance(node, ast.AnnAssign) and node.value is not None else None
            if isinstance(target, ast.Name) and target.id in ("__version__", "cuda"):
                try:
                    found[target.id] = ast.literal_eval(node.value)
                except ValueError:
                    continue
        return found.get("__version__"), found.get("cuda")
    return None, None


def driver_floor(venv):
    """{torch_version, cuda_version, min_driver, why, source, reason}; min_driver is None when not derived."""
    torch_version, cuda = torch_build(venv) if venv else (None, None)
    floor = {"torch_version": torch_version, "cuda_version": cuda, "min_driver": None,
             "why": None, "source": CUDA_MIN_DRIVER_SOURCE}
    if torch_version is None:
        floor["reason"] = "unknown CUDA, floor not derived: no torch/version.py in %s" % venv
    elif cuda is None:
        floor["reason"] = "unknown CUDA, floor not derived: torch %s in %s is a CPU-only build" % (torch_version, venv)
    else:
        release = ".".join(str(cuda).split(".")[:2])
        floor["min_driver"] = CUDA_MIN_DRIVER.get(release)
        if floor["min_driver"] is None:
            floor["reason"] = "unknown CUDA, floor not derived: CUDA %s (torch %s) is not in the table (%s)" % (
                cuda, torch_version, ", ".join(CUDA_MIN_DRIVER))
        else:
            floor["why"] = "CUDA %s (torch %s in %s)" % (cuda, torch_version, venv)
            floor["reason"] = "%s needs driver %s or newer" % (floor["why"], floor["min_driver"])
    return floor
