"""Read tensor names, dtypes, shapes and stored sizes from safetensors files.

Only the header is read (8-byte little-endian length, then that many bytes of JSON), never
the weights, so a 400 GB checkpoint is sized in milliseconds. Sizes come from each tensor's
`data_offsets`, i.e. the bytes really stored, which is what matters for packed formats such
as NVFP4 (uint8 holding two 4-bit values, plus float8 block scales).

Standard library only, so it also runs as a script on a GPU host that holds the weights:

    python3 safetensors_header.py MODEL_DIR > model.json   # config.json + every tensor
"""
from __future__ import annotations

import json
import math
import struct
import sys
from dataclasses import dataclass
from pathlib import Path

# Bytes per element of the dtypes the format defines; used to reject a corrupt header.
DTYPE_BYTES = {
    "BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1, "F8_E8M0": 1,
    "I16": 2, "U16": 2, "F16": 2, "BF16": 2,
    "I32": 4, "U32": 4, "F32": 4,
    "I64": 8, "U64": 8, "F64": 8,
}
# A header larger than this is not a header (the format's own readers use the same bound).
MAX_HEADER_BYTES = 100 * 1024 * 1024


@dataclass(frozen=True)
class TensorInfo:
    name: str
    dtype: str
    shape: tuple
    nbytes: int


def read_header(path: Path) -> dict:
    """Return the JSON header of one safetensors file."""
    with open(path, "rb") as f:
        raw_len = f.read(8)
        if len(raw_len) != 8:
            raise ValueError(f"{path}: too short for a safetensors header")
        (length,) = struct.unpack("<Q", raw_len)
        if length > MAX_HEADER_BYTES:
            raise ValueError(f"{path}: header length {length} is implausible")
        raw = f.read(length)
    if len(raw) != length:
        raise ValueError(f"{path}: header truncated ({len(raw)} of {length} bytes)")
    return json.loads(raw)


def tensors_in_file(path: Path) -> list[TensorInfo]:
    out = []
    for name, meta in read_header(path).items():
        if name == "__metadata__":
            continue
        begin, end = meta["data_offsets"]
        shape = tuple(meta["shape"])
        item = DTYPE_BYTES.get(meta["dtype"])
        if item is not None and (end - begin) != math.prod(shape) * item:
            raise ValueError(f"{path}: {name} stores {end - begin} bytes, "
                             f"{meta['dtype']}{list(shape)} needs {math.prod(shape) * item}")
        out.append(TensorInfo(name, meta["dtype"], shape, end - begin))
    return out


def model_tensors(model_dir: Path) -> list[TensorInfo]:
    """All tensors of every *.safetensors file in a model directory."""
    files = sorted(Path(model_dir).glob("*.safetensors"))
    return [t for f in files for t in tensors_in_file(f)]


def dump(model_dir: Path) -> dict:
    """config.json and the tensor list of a model directory, as JSON-ready data."""
    model_dir = Path(model_dir)
    return {"model": model_dir.resolve().name,
            "config": json.loads((model_dir / "config.json").read_text()),
            "tensors": [[t.name, t.dtype, list(t.shape), t.nbytes] for t in model_tensors(model_dir)]}


def load_dump(path: Path) -> tuple[str, dict, list[TensorInfo]]:
    """Read what dump() wrote: (model name, config, tensors)."""
    data = json.loads(Path(path).read_text())
    return data["model"], data["config"], [TensorInfo(n, d, tuple(s), b) for n, d, s, b in data["tensors"]]


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: safetensors_header.py MODEL_DIR")
    try:
        model = dump(Path(sys.argv[1]))
    except (OSError, ValueError) as exc:
        sys.exit(f"cannot size the model in {sys.argv[1]}: {exc}")
    if not model["tensors"]:
        sys.exit(f"cannot size the model in {sys.argv[1]}: no *.safetensors files")
    json.dump(model, sys.stdout)
