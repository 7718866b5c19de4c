"""The serving layer of a lab image: what a host delivered with sglang installed carries, so every
host created from the image serves at its first boot and a fresh lab needs no provisioning run.

A codename has it when its recipe folder holds `sglang-wheels.txt` (bookworm: the wheels are
Python 3.11's). Into the image root it puts:
- the real sglang and FlashInfer package files, WITHOUT their dependencies (no torch, no CUDA),
  in /opt/sglang/venv, where the sglang role reads them: the backend check and the flag rendering
  read real sources;
- torch/version.py as the torch that sglang 0.5.23 pins writes it (2.14.1; its
  flashinfer_python[cu13] requirement means a CUDA 13.0 build): the GPU gate derives the driver
  floor from it;
- the stand-in server (lab/standin/sglang_server.py) behind sglang's entry point: the venv's
  python3 (`venv-python3` of the recipe) hands `-m sglang.launch_server ARGS` to it and anything
  else to the real interpreter. The sglang role's own unit and launch script start it with the
  role's flags, so health checks, /metrics, drains and load-balancer hooks run as on a fleet;
- the small checkpoint (tests/checkpoint.py, plus the index a real one carries) at the sglang
  role's default model path, so the plan's weights check has complete weights to read.
Nothing outside the venv knows: the roles are the same as on real hosts.
"""
import json
import subprocess
import sys

from . import paths

VENV = "/opt/sglang/venv"
STANDIN = f"{VENV}/lab-standin/sglang_server.py"
MODEL = "/models/GLM-5-NVFP4"
WHEELS = paths.STATE / "sglang-wheels"
STANDIN_SOURCE = paths.LAB / "standin" / "sglang_server.py"
CHECKPOINT_SOURCE = paths.REPO / "tests" / "checkpoint.py"


def _recipe(codename, name):
    return paths.RECIPE / codename / name


def wheels(codename):
    """The pinned wheels of a codename's serving layer; [] when it has none."""
    path = _recipe(codename, "sglang-wheels.txt")
    if not path.is_file():
        return []
    return [w for w in (line.split("#")[0].strip() for line in path.read_text().splitlines()) if w]


def inputs(codename):
    """Files outside the recipe folder that the serving layer copies: part of the recipe's hash."""
    return [STANDIN_SOURCE, CHECKPOINT_SOURCE, paths.LAB / "infra" / "serving.py"] if wheels(codename) else []


def download(pins):
    """The wheels, once, on the control node (its pip knows the package index); no dependencies."""
    proc = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                           "--python-version", "3.11", "--platform", "manylinux_2_34_x86_64",
                           "--dest", str(WHEELS), *pins], capture_output=True, text=True)
    if proc.returncode:
        raise RuntimeError(f"pip download {' '.join(pins)} failed ({proc.returncode}):\n{proc.stdout}{proc.stderr}")


def write_model(directory):
    """tests/checkpoint.py's checkpoint plus the index a real one carries."""
    sys.path.insert(0, str(paths.REPO))
    try:
        from tests.checkpoint import write_checkpoint
    finally:
        sys.path.remove(str(paths.REPO))
    directory.mkdir(parents=True, exist_ok=True)
    write_checkpoint(directory)
    weight_map = {}
    for shard in sorted(directory.glob("*.safetensors")):
        raw = shard.read_bytes()
        header = json.loads(raw[8:8 + int.from_bytes(raw[:8], "little")])
        weight_map.update({name: shard.name for name in header if name != "__metadata__"})
    (directory / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))


def install(b):
    """Put the serving layer into the build's root (b: image._Build, chroot mounts in place)."""
    pins = wheels(b.codename)
    if not pins:
        return
    b.step(f"serving layer: {', '.join(pins)} in {VENV} (no dependencies), stand-in server, model")
    download(pins)
    cache = b.root / "tmp/lab-wheels"
    cache.mkdir(parents=True)
    for wheel in WHEELS.glob("*.whl"):
        (cache / wheel.name).write_bytes(wheel.read_bytes())
    b.chroot("python3", "-m", "venv", VENV)
    b.chroot(f"{VENV}/bin/pip", "install", "-q", "--no-deps", "--no-index", "--no-compile",
             "--find-links", "/tmp/lab-wheels", *pins)
    subprocess.run(["rm", "-rf", str(cache)], check=True)
    venv = b.root / VENV.lstrip("/")
    site = venv / "lib/python3.11/site-packages"
    b.write(f"{VENV}/lib/python3.11/site-packages/torch/version.py",
            _recipe(b.codename, "torch-version.py").read_text())
    b.write(STANDIN, STANDIN_SOURCE.read_text())
    # venv makes python3 a link to the system interpreter and python3.11 a link to python3. Unlink
    # both first (writing through python3's absolute link would reach the build machine's own
    # interpreter); python3.11 then reaches the interpreter itself, or the wrapper would exec
    # itself for ever (still inside the venv: Python finds pyvenv.cfg beside the path it was
    # started by, not beside the link's target).
    for name in ("python3", "python3.11"):
        (venv / "bin" / name).unlink()
    (venv / "bin/python3.11").symlink_to("/usr/bin/python3.11")
    b.write(f"{VENV}/bin/python3", _recipe(b.codename, "venv-python3").read_text(), 0o755)
    if not (site / "sglang").is_dir():
        raise RuntimeError(f"sglang's package files are missing from {VENV} after the install")
    write_model(b.root / MODEL.lstrip("/"))
