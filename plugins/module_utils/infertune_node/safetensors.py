"""Read tensor names, dtypes, shapes and stored sizes from safetensors headers.

Only the header is read (8-byte little-endian length, then that many bytes of JSON), never
the weights, so a 400 GB checkpoint is sized in milliseconds. Sizes come from each tensor's
`data_offsets`, the bytes really stored, which is what matters for packed formats such as
NVFP4 (uint8 holding two 4-bit values, plus float8 block scales).

Host code (the model_weights module runs it where the weights are); the controller's
roofline imports it from here.
"""
import glob
import json
import math
import os
import struct
from collections import namedtuple

INDEX = "model.safetensors.index.json"
SINGLE = "model.safetensors"
# Bytes per element of the dtypes the format defines; used to reject a corrupt header.
DTYPE_BYTES = {
    "BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1, "F8_E8M0": 1,
    "I16": 2, "U16": 2, "F16": 2, "BF16": 2,
    "I32": 4, "U32": 4, "F32": 4,
    "I64": 8, "U64": 8, "F64": 8,
}
# A header larger than this is not a header (the format's own readers use the same bound).
MAX_HEADER_BYTES = 100 * 1024 * 1024

TensorInfo = namedtuple("TensorInfo", "name dtype shape nbytes")


def read_header(path):
    """(header length, JSON header) of one safetensors file; ValueError names the file."""
    with open(path, "rb") as handle:
        raw_len = handle.read(8)
        if len(raw_len) != 8:
            raise ValueError("%s: too short for a safetensors header" % path)
        (length,) = struct.unpack("<Q", raw_len)
        if length > MAX_HEADER_BYTES:
            raise ValueError("%s: header length %d is implausible" % (path, length))
        raw = handle.read(length)
    if len(raw) != length:
        raise ValueError("%s: header truncated (%d of %d bytes)" % (path, len(raw), length))
    try:
        header = json.loads(raw)
    except ValueError as exc:
        raise ValueError("%s: header is not JSON (%s)" % (path, exc))
    if not isinstance(header, dict):
        raise ValueError("%s: header is not a JSON object" % path)
    return length, header


def tensors_of(path, header):
    out = []
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        begin, end = meta["data_offsets"]
        shape = tuple(meta["shape"])
        item = DTYPE_BYTES.get(meta["dtype"])
        if item is not None and (end - begin) != math.prod(shape) * item:
            raise ValueError("%s: %s stores %d bytes, %s%s needs %d" % (
                path, name, end - begin, meta["dtype"], list(shape), math.prod(shape) * item))
        out.append(TensorInfo(name, meta["dtype"], shape, end - begin))
    return out


def tensors_in_file(path):
    return tensors_of(path, read_header(path)[1])


def expected_size(length, header):
    """File size the header promises: 8 + header length + the largest data end offset."""
    ends = [meta["data_offsets"][1] for name, meta in header.items() if name != "__metadata__"]
    return 8 + length + max(ends, default=0)


def read_index(model_dir):
    """The index's weight_map {tensor: shard file}, or None without an index file."""
    path = os.path.join(model_dir, INDEX)
    if not os.path.exists(path):
        return None
    with open(path) as handle:
        try:
            weight_map = json.load(handle).get("weight_map")
        except (ValueError, AttributeError) as exc:
            raise ValueError("%s does not parse: %s" % (path, exc))
    if not isinstance(weight_map, dict) or not weight_map:
        raise ValueError("%s has no weight_map" % path)
    return weight_map


def shard_names(model_dir, weight_map=None):
    """Shards the loader reads: those the index names, else model.safetensors, else every *.safetensors."""
    if weight_map is not None:
        return sorted(set(weight_map.values()))
    if os.path.exists(os.path.join(model_dir, SINGLE)):
        return [SINGLE]
    return sorted(os.path.basename(p) for p in glob.glob(os.path.join(model_dir, "*.safetensors")))


def model_tensors(model_dir):
    """All tensors of every shard of a model directory."""
    names = shard_names(model_dir, read_index(model_dir))
    return [t for name in names for t in tensors_in_file(os.path.join(model_dir, name))]
