"""Decode roofline on the small synthetic MoE checkpoint of tests/checkpoint.py.

The checkpoint is DeepSeek-V3-shaped (MLA, DSA indexer, 1 dense + 2 MoE layers, one MTP
layer) with NVFP4 routed experts and BF16 elsewhere; the expected bytes are worked out
by hand below, tensor group by tensor group.
"""
import json
import struct

import pytest

from infertune import roofline
from infertune_node.model_weights import check
from infertune_node.safetensors import model_tensors, tensors_in_file
from tests.checkpoint import CONFIG, write_checkpoint, write_safetensors

SPECS = {"toy": {"name": "Toy GPU", "bandwidth_gbps": 2, "memory_gb": 1, "source": "test"}}


@pytest.fixture
def model(tmp_path):
    return write_checkpoint(tmp_path)


# Hand-computed bytes per GPU per token at TP 2 (BF16 = 2 bytes).
ATTN_SHARDED = (96 * 32 + 128 * 16 + 64 * 64) * 2             # q_b, kv_b, o_proj: 18432
ATTN_REPLICATED = ((32 * 64 + 32) + (24 * 64 + 16)            # q_a (+norm), kv_a (+norm)
                   + (32 * 32 + 16 * 64 + 2 * 16 + 2 * 64)    # indexer wq_b, wk, k_norm, weights_proj
                   + 2 * 64) * 2                              # input/post-attention norms: 11936
DENSE = 3 * 128 * 64 * 2                                      # layer 0 MLP: 49152
ROUTER = 8 * 64 * 2 + 8 * 4                                   # gate + correction bias: 1056
SHARED = 3 * 32 * 64 * 2                                      # 12288
EXPERT = 3 * (32 * 32 + 32 * 4)                               # NVFP4 packed + fp8 scales: 3456
EXPERT_SCALARS = 6 * 4                                        # weight_scale_2 + input_scale x 3
TP = 2
PER_GPU = (3 * (ATTN_SHARDED / TP + ATTN_REPLICATED)
           + DENSE / TP
           + 2 * (ROUTER + SHARED / TP + 8 * (2 / 8) * (EXPERT / TP + EXPERT_SCALARS))
           + 64 * 2                                           # one embedding row
           + 256 * 64 * 2 / TP                                # lm_head
           + 64 * 2)                                          # final norm


def test_bytes_and_floor_match_hand_computed(model):
    r = roofline.analyse(model, "toy", TP, specs=SPECS)
    assert PER_GPU == 126080
    assert r["bytes_per_gpu"] == pytest.approx(PER_GPU)
    assert r["floor_ms_per_token"] == pytest.approx(PER_GPU / 2e9 * 1e3)
    assert r["floor_tok_per_s"] == pytest.approx(2e9 / PER_GPU)
    b = r["breakdown"]
    assert b["routed_experts"]["bytes_per_gpu"] == pytest.approx(2 * 2 * (EXPERT / TP + EXPERT_SCALARS))
    assert b["attention"]["replicated_bytes_per_gpu"] == pytest.approx(3 * (32 * 64 + 32 + 24 * 64 + 16) * 2)
    assert b["router"]["replicated_bytes_per_gpu"] == pytest.approx(2 * ROUTER)


def test_mtp_layer_is_not_counted(model):
    r = roofline.analyse(model, "toy", TP, specs=SPECS)
    mtp = sum(t.nbytes for t in model_tensors(model) if ".layers.3." in t.name)
    assert r["skipped_mtp_bytes"] == mtp > 0


def test_more_tensor_parallelism_reads_less_but_not_the_replicated_part(model):
    one = roofline.analyse(model, "toy", 1, specs=SPECS)
    two = roofline.analyse(model, "toy", 2, specs=SPECS)
    assert two["replicated_bytes_per_gpu"] == pytest.approx(one["replicated_bytes_per_gpu"])
    assert two["bytes_per_gpu"] - two["replicated_bytes_per_gpu"] == pytest.approx(
        (one["bytes_per_gpu"] - one["replicated_bytes_per_gpu"]) / 2)


def test_layout_from_config_matches_the_headers(model):
    """--assume-quant must synthesize the very tensors the real checkpoint stores."""
    from_headers = roofline.analyse(model, "toy", TP, specs=SPECS)
    from_config = roofline.analyse(model, "toy", TP, assume_quant="nvfp4-experts", specs=SPECS)
    assert from_config["bytes_per_gpu"] == pytest.approx(from_headers["bytes_per_gpu"])
    assert from_config["breakdown"].keys() == from_headers["breakdown"].keys()
    for comp, v in from_headers["breakdown"].items():
        assert from_config["breakdown"][comp] == pytest.approx(v), comp


def test_header_only_is_read(tmp_path):
    """The weights themselves are never read: a file cut right after its header still sizes."""
    path = tmp_path / "cut.safetensors"
    write_safetensors(path, [("w", "U8", (1000, 1000))])
    raw = path.read_bytes()
    path.write_bytes(raw[:8 + struct.unpack("<Q", raw[:8])[0]])
    assert tensors_in_file(path)[0].nbytes == 1000 * 1000


def test_inconsistent_header_is_rejected(tmp_path):
    header = json.dumps({"w": {"dtype": "BF16", "shape": [4, 4], "data_offsets": [0, 16]}}).encode()
    path = tmp_path / "bad.safetensors"
    path.write_bytes(struct.pack("<Q", len(header)) + header + bytes(16))
    with pytest.raises(ValueError, match="needs 32"):
        tensors_in_file(path)


def test_cli_json_and_host_report(model, tmp_path, capsys):
    report = tmp_path / "reports" / "node1.json"
    report.parent.mkdir()
    report.write_text(json.dumps({"host": "node1"}))
    assert roofline.main([str(model), "--gpu", "h200", "--tp", "2", "--json", "--report", str(report),
                          "--measured-ms", "1"]) == 0
    printed = json.loads(capsys.readouterr().out)
    saved = json.loads(report.read_text())
    assert saved["host"] == "node1"
    assert saved["roofline"] == printed
    assert printed["bandwidth_gbps"] == 4800
    assert printed["floor_ms_per_token"] == pytest.approx(PER_GPU / 4.8e12 * 1e3)
    assert printed["efficiency"] == pytest.approx(printed["floor_ms_per_token"] / 1)


def test_header_dump_from_a_host_gives_the_same_floor(model, tmp_path):
    """The model_weights module reads the headers on the GPU host; its `dump` is sized here."""
    (tmp_path / "model.json").write_text(json.dumps(check(str(model), with_tensors=True)["dump"]))
    from_dump = roofline.analyse(tmp_path / "model.json", "toy", TP, specs=SPECS)
    assert from_dump["bytes_per_gpu"] == pytest.approx(PER_GPU)
    assert from_dump["model"] == model.name


def test_gpu_is_found_by_the_name_nvidia_smi_reports():
    specs = roofline.load_specs()
    assert roofline.gpu_entry(specs, "NVIDIA RTX PRO 6000 Blackwell Server Edition") == "rtx-pro-6000-server"
    assert roofline.gpu_entry(specs, "nvidia h200") == "h200"
    assert roofline.gpu_entry(specs, "h200") == "h200"
    assert roofline.gpu_entry(specs, "NVIDIA B200") == "b200"
    with pytest.raises(SystemExit, match="unknown GPU 'NVIDIA V100'"):
        roofline.gpu_entry(specs, "NVIDIA V100")


def test_gpu_table_has_sources():
    specs = roofline.load_specs()
    assert specs["rtx-pro-6000-server"]["bandwidth_gbps"] == 1597
    assert specs["rtx-pro-6000-workstation"]["bandwidth_gbps"] == 1792
    assert all(s["source"].startswith("https://") for s in specs.values())
    # The gate and the roofline share the table: every compute capability the MoE check judges has a GPU.
    assert {s["compute_capability"] for s in specs.values()} == {"8.0", "8.9", "9.0", "10.0", "10.3", "12.0"}
    assert all(s["id_source"] for s in specs.values() if "pci_device_ids" in s)


def test_unknown_gpu_and_missing_weights_are_refused(model, tmp_path):
    with pytest.raises(SystemExit, match="unknown GPU"):
        roofline.analyse(model, "nope", 8, specs=SPECS)
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "config.json").write_text(json.dumps(CONFIG))
    with pytest.raises(SystemExit, match="--assume-quant"):
        roofline.analyse(tmp_path / "empty", "toy", 8, specs=SPECS)


def test_glm5_published_config_on_8_rtx_pro_6000(tmp_path):
    """The figure docs/benchmark.md quotes, recomputed by hand from GLM-5's config."""
    cfg = {"hidden_size": 6144, "num_hidden_layers": 78, "num_attention_heads": 64, "vocab_size": 154880,
           "q_lora_rank": 2048, "kv_lora_rank": 512, "qk_rope_head_dim": 64, "qk_nope_head_dim": 192,
           "v_head_dim": 256, "intermediate_size": 12288, "moe_intermediate_size": 2048,
           "n_routed_experts": 256, "num_experts_per_tok": 8, "n_shared_experts": 1,
           "first_k_dense_replace": 3, "index_topk": 2048, "index_n_heads": 32, "index_head_dim": 128}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    r = roofline.analyse(tmp_path, "rtx-pro-6000-server", 8, assume_quant="nvfp4-experts")
    h = 6144
    replicated = 78 * 2 * (h * (2048 + 576) + 2048 * 4096 + h * 128 + h * 32 + 2048 + 512 + 2 * 128 + 2 * h) \
        + 75 * (256 * h * 2 + 256 * 4) + h * 2 + h * 2
    sharded = 78 * 2 * (2048 * 64 * 256 + 512 * 64 * 448 + 64 * 256 * h) + 3 * 2 * 3 * h * 12288 \
        + 75 * 2 * 3 * h * 2048 + 154880 * h * 2
    experts = 75 * 8 * 3 * (2048 * h // 2 + 2048 * h // 16)
    expected = replicated + sharded / 8 + experts / 8 + 75 * 8 * 24
    assert r["bytes_per_gpu"] == pytest.approx(expected)
    assert round(r["floor_ms_per_token"], 2) == 6.15
