"""Weights ready before a drain: config.json, every shard of the index, shard sizes, a sha256 manifest."""
import hashlib
import json
import os

import pytest
from moduleharness import run_module

from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node import safetensors
from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node.model_weights import check
from tests.checkpoint import write_checkpoint, write_safetensors

SHARDS = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]


@pytest.fixture
def model(tmp_path):
    """The roofline's two-shard checkpoint with the index a real one carries."""
    (tmp_path / "GLM-test").mkdir()
    directory = write_checkpoint(tmp_path / "GLM-test")
    weight_map = {t.name: shard for shard in SHARDS for t in safetensors.tensors_in_file(directory / shard)}
    (directory / safetensors.INDEX).write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    return directory


def test_complete_model_is_ready(model):
    result = check(str(model))
    assert result["problems"] == []
    assert [s["name"] for s in result["shards"]] == SHARDS
    assert result["total_bytes"] == sum(os.path.getsize(model / s) for s in SHARDS)


def test_missing_shard_is_named(model):
    os.unlink(model / SHARDS[1])
    assert check(str(model))["problems"] == ["1 of 2 shards missing in %s: %s" % (model, SHARDS[1])]


def test_truncated_shard_is_caught_by_its_size(model):
    path = model / SHARDS[0]
    size = os.path.getsize(path)
    os.truncate(path, size - 10)
    assert check(str(model))["problems"] == ["%s is %d bytes, its header needs %d: truncated" % (path, size - 10, size)]


def test_bad_config_json(model):
    (model / "config.json").write_text('{"hidden_size": 64,')
    (problem,) = check(str(model))["problems"]
    assert problem.startswith("%s/config.json does not parse: " % model)


def test_index_naming_a_tensor_its_shard_lacks(model):
    index = json.loads((model / safetensors.INDEX).read_text())
    index["weight_map"]["model.layers.9.mlp.gate.weight"] = SHARDS[1]
    (model / safetensors.INDEX).write_text(json.dumps(index))
    assert check(str(model))["problems"] == [
        "%s lacks 1 tensor(s) the index places in it: model.layers.9.mlp.gate.weight" % (model / SHARDS[1])]


def test_single_file_model_without_index(tmp_path):
    write_safetensors(tmp_path / "model.safetensors", [("w", "BF16", (4, 4))])
    (tmp_path / "config.json").write_text("{}")
    result = check(str(tmp_path))
    assert result["problems"] == [] and [s["name"] for s in result["shards"]] == ["model.safetensors"]


def test_directory_without_weights(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    assert check(str(tmp_path))["problems"] == [
        "%s has no model.safetensors.index.json, model.safetensors or *.safetensors" % tmp_path]


def write_manifest(model, names):
    lines = ["%s  %s" % (hashlib.sha256((model / n).read_bytes()).hexdigest(), n) for n in names]
    (model / "SHA256SUMS").write_text("\n".join(lines) + "\n")


def test_manifest_matches(model):
    write_manifest(model, SHARDS + ["config.json"])
    result = check(str(model), manifest="SHA256SUMS")
    assert result["problems"] == [] and result["manifest_files"] == 3


def test_manifest_mismatch_names_the_file(model):
    write_manifest(model, SHARDS)
    with open(model / SHARDS[1], "r+b") as handle:  # same size, different bytes: only the hash sees it
        handle.seek(-1, os.SEEK_END)
        handle.write(b"\x01")
    assert check(str(model), manifest=str(model / "SHA256SUMS"))["problems"] == [
        "sha256 differs from manifest %s: %s" % (model / "SHA256SUMS", SHARDS[1])]


def test_hub_id_is_not_checked():
    result = check("zai-org/GLM-5")
    assert (result["local"], result["checked"], result["problems"]) == (False, False, [])
    assert check("models/../x/y")["problems"] == ["'models/../x/y' is neither an absolute path nor a hub id (org/name)"]


def test_module_fails_naming_host_path_and_problem(model, capsys):
    os.unlink(model / SHARDS[0])
    rc, out = run_module("model_weights", {"path": str(model), "host": "gpu-07"}, capsys)
    assert rc == 1 and out["changed"] is False
    assert out["msg"].startswith("host gpu-07: model weights in %s not ready: 1 of 2 shards missing" % model)


def test_module_missing_directory(tmp_path, capsys):
    rc, out = run_module("model_weights", {"path": str(tmp_path / "nope"), "host": "gpu-07"}, capsys)
    assert rc == 1 and "%s does not exist" % (tmp_path / "nope") in out["msg"]


def test_module_reports_hub_id_without_failing(capsys):
    rc, out = run_module("model_weights", {"path": "zai-org/GLM-5", "host": "gpu-07", "_ansible_check_mode": True},
                         capsys)
    assert rc == 0 and out["checked"] is False
    assert out["msg"] == ("host gpu-07: zai-org/GLM-5 is not a local directory (a hub id): not checked; "
                          "sglang downloads it when it starts")


def test_module_returns_the_dump_for_the_decode_floor(model, capsys):
    rc, out = run_module("model_weights", {"path": str(model), "tensors": True}, capsys)
    assert rc == 0 and out["dump"]["model"] == "GLM-test"
    assert out["dump"]["config"]["num_hidden_layers"] == 3
    assert len(out["dump"]["tensors"]) == len(safetensors.model_tensors(str(model)))


def test_the_plan_checks_the_weights_in_its_one_read_and_never_fails_for_them(model, capsys):
    """The plan returns the problems for its Stop task; a complete model has none."""
    rc, out = run_module("infertune_plan", {"knobs": [], "weights": {"path": str(model)}}, capsys)
    assert rc == 0 and out["plan"]["weights"]["problems"] == []
    size = os.path.getsize(model / SHARDS[1])
    os.truncate(model / SHARDS[1], size - 10)
    rc, out = run_module("infertune_plan", {"knobs": [], "weights": {"path": str(model)}}, capsys)
    assert rc == 0 and out["changed"] is False
    assert out["plan"]["weights"]["problems"] == [
        "%s is %d bytes, its header needs %d: truncated" % (model / SHARDS[1], size - 10, size)]
