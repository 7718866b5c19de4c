"""Are a model's weights complete on this host? Checked before the host is drained.

config.json parses; every shard the loader reads (the index's weight_map, else
model.safetensors, else every *.safetensors) is present; each shard is exactly
8 + header length + the largest data end offset bytes long; every tensor the index
places in a shard is in that shard's header; optionally every file of a sha256
manifest (`sha256sum` lines) hashes as listed. Headers only, unless a manifest is given.
"""
import hashlib
import json
import os
import re

from . import safetensors

# sglang downloads an `org/name` model path from the hub when no such directory exists.
HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
MANIFEST_LINE = re.compile(r"^([0-9a-fA-F]{64}) [ *](.+)$")
SHOWN = 5  # names listed in one problem line before "..."


def _names(items):
    items = sorted(items)
    return ", ".join(items[:SHOWN]) + (", ..." if len(items) > SHOWN else "")


def _config(model_dir, problems):
    path = os.path.join(model_dir, "config.json")
    try:
        with open(path) as handle:
            config = json.load(handle)
    except OSError as exc:
        problems.append("%s: %s" % (path, exc.strerror))
        return None
    except ValueError as exc:
        problems.append("%s does not parse: %s" % (path, exc))
        return None
    if not isinstance(config, dict):
        problems.append("%s is not a JSON object" % path)
        return None
    return config


def _shard(model_dir, name, problems):
    """(shard record, tensors) of one shard; None and a problem when it is missing or bad."""
    path = os.path.join(model_dir, name)
    try:
        size = os.path.getsize(path)
        length, header = safetensors.read_header(path)
        tensors = safetensors.tensors_of(path, header)
    except OSError as exc:
        problems.append("%s: %s" % (path, exc.strerror))
        return None
    except (ValueError, KeyError, TypeError) as exc:
        problems.append("%s: unreadable header (%s)" % (path, exc))
        return None
    expected = safetensors.expected_size(length, header)
    if size != expected:
        problems.append("%s is %d bytes, its header needs %d: %s" % (
            path, size, expected, "truncated" if size < expected else "trailing data"))
        return None
    return {"name": name, "size": size}, tensors


def _manifest(model_dir, manifest, problems):
    """Verify a `sha256  file` manifest (relative paths against the model directory); files checked."""
    path = os.path.join(model_dir, manifest)
    try:
        with open(path) as handle:
            lines = [line.rstrip("\n") for line in handle if line.strip()]
    except OSError as exc:
        problems.append("manifest %s: %s" % (path, exc.strerror))
        return 0
    bad, wrong = [], []
    for number, line in enumerate(lines, 1):
        match = MANIFEST_LINE.match(line)
        if not match:
            problems.append("manifest %s line %d is not `SHA256  FILE`" % (path, number))
            continue
        digest = hashlib.sha256()
        target = os.path.join(model_dir, match.group(2))
        try:
            with open(target, "rb") as handle:
                for block in iter(lambda: handle.read(1 << 24), b""):
                    digest.update(block)
        except OSError as exc:
            bad.append("%s (%s)" % (match.group(2), exc.strerror))
            continue
        if digest.hexdigest() != match.group(1).lower():
            wrong.append(match.group(2))
    if bad:
        problems.append("manifest %s lists files that cannot be read: %s" % (path, _names(bad)))
    if wrong:
        problems.append("sha256 differs from manifest %s: %s" % (path, _names(wrong)))
    return len(lines)


def check(path, manifest=None, with_tensors=False):
    """Result dict; `problems` empty means the weights are ready (or `checked` is false: a hub id)."""
    result = {"model_path": path, "local": True, "checked": True, "shards": [], "total_bytes": 0,
              "manifest_files": 0, "problems": []}
    problems = result["problems"]
    if not os.path.isabs(path) and HUB_ID.match(path):
        result.update(local=False, checked=False)
        return result
    if not os.path.isabs(path):
        problems.append("%r is neither an absolute path nor a hub id (org/name)" % path)
        return result
    if not os.path.isdir(path):
        problems.append("%s %s" % (path, "is not a directory" if os.path.exists(path) else "does not exist"))
        return result
    config = _config(path, problems)
    try:
        weight_map = safetensors.read_index(path)
    except (OSError, ValueError) as exc:
        problems.append(str(exc))
        return result
    names = safetensors.shard_names(path, weight_map)
    if not names:
        problems.append("%s has no %s, %s or *.safetensors" % (path, safetensors.INDEX, safetensors.SINGLE))
    missing = [n for n in names if not os.path.exists(os.path.join(path, n))]
    if missing:
        problems.append("%d of %d shards missing in %s: %s" % (len(missing), len(names), path, _names(missing)))
    tensors = []
    for name in names:
        found = None if name in missing else _shard(path, name, problems)
        if found:
            result["shards"].append(found[0])
            tensors += found[1]
            stored = {t.name for t in found[1]}
            absent = [t for t, shard in (weight_map or {}).items() if shard == name and t not in stored]
            if absent:
                problems.append("%s lacks %d tensor(s) the index places in it: %s" % (
                    os.path.join(path, name), len(absent), _names(absent)))
    result["total_bytes"] = sum(s["size"] for s in result["shards"])
    if manifest:
        result["manifest_files"] = _manifest(path, manifest, problems)
    if with_tensors and not problems:
        result["dump"] = {"model": os.path.basename(os.path.realpath(path)), "config": config,
                          "tensors": [[t.name, t.dtype, list(t.shape), t.nbytes] for t in tensors]}
    return result
