"""A small DeepSeek-V3-shaped checkpoint written byte by byte, for the roofline tests.

MLA, DSA indexer, 1 dense + 2 MoE layers and one MTP layer; NVFP4 routed experts, BF16
elsewhere. tests/unit/test_roofline.py works out its bytes by hand; the lab test puts it
on a host to check the floor the playbook computes there.
"""
import json
import math
import struct

CONFIG = {
    "hidden_size": 64, "num_hidden_layers": 3, "num_attention_heads": 4, "vocab_size": 256,
    "q_lora_rank": 32, "kv_lora_rank": 16, "qk_rope_head_dim": 8, "qk_nope_head_dim": 16,
    "v_head_dim": 16, "intermediate_size": 128, "moe_intermediate_size": 32,
    "n_routed_experts": 8, "num_experts_per_tok": 2, "n_shared_experts": 1,
    "first_k_dense_replace": 1, "index_topk": 64, "index_n_heads": 2, "index_head_dim": 16,
    "num_nextn_predict_layers": 1,
}
SIZE = {"BF16": 2, "F32": 4, "U8": 1, "F8_E4M3": 1}


def write_safetensors(path, tensors):
    """The format: u64 little-endian header length, JSON header, then the data."""
    header, offset = {}, 0
    for name, dtype, shape in tensors:
        n = math.prod(shape) * SIZE[dtype]
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + n]}
        offset += n
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + bytes(offset))


def linear(name, out_f, in_f, nvfp4=False):
    if not nvfp4:
        return [(f"{name}.weight", "BF16", (out_f, in_f))]
    return [(f"{name}.weight", "U8", (out_f, in_f // 2)),
            (f"{name}.weight_scale", "F8_E4M3", (out_f, in_f // 16)),
            (f"{name}.weight_scale_2", "F32", ()), (f"{name}.input_scale", "F32", ())]


def mlp(prefix, hidden, inter, nvfp4=False):
    return (linear(f"{prefix}.gate_proj", inter, hidden, nvfp4) + linear(f"{prefix}.up_proj", inter, hidden, nvfp4)
            + linear(f"{prefix}.down_proj", hidden, inter, nvfp4))


def layer(i):
    p, a = f"model.layers.{i}", f"model.layers.{i}.self_attn"
    t = [(f"{p}.input_layernorm.weight", "BF16", (64,)), (f"{p}.post_attention_layernorm.weight", "BF16", (64,))]
    t += linear(f"{a}.q_a_proj", 32, 64) + [(f"{a}.q_a_layernorm.weight", "BF16", (32,))]
    t += linear(f"{a}.q_b_proj", 4 * 24, 32) + linear(f"{a}.kv_a_proj_with_mqa", 24, 64)
    t += [(f"{a}.kv_a_layernorm.weight", "BF16", (16,))] + linear(f"{a}.kv_b_proj", 4 * 32, 16)
    t += linear(f"{a}.o_proj", 64, 4 * 16)
    t += linear(f"{a}.indexer.wq_b", 2 * 16, 32) + linear(f"{a}.indexer.wk", 16, 64)
    t += [(f"{a}.indexer.k_norm.weight", "BF16", (16,)), (f"{a}.indexer.k_norm.bias", "BF16", (16,))]
    t += linear(f"{a}.indexer.weights_proj", 2, 64)
    if i == 0:
        return t + mlp(f"{p}.mlp", 64, 128)
    t += linear(f"{p}.mlp.gate", 8, 64) + [(f"{p}.mlp.gate.e_score_correction_bias", "F32", (8,))]
    t += mlp(f"{p}.mlp.shared_experts", 64, 32)
    for e in range(8):
        t += mlp(f"{p}.mlp.experts.{e}", 64, 32, nvfp4=True)
    return t


def write_checkpoint(directory):
    """config.json and two safetensors shards in DIRECTORY; returns it."""
    (directory / "config.json").write_text(json.dumps(CONFIG))
    top = [("model.embed_tokens.weight", "BF16", (256, 64)), ("lm_head.weight", "BF16", (256, 64)),
           ("model.norm.weight", "BF16", (64,))]
    write_safetensors(directory / "model-00001-of-00002.safetensors", top + layer(0) + layer(1))
    # Layer 3 is the MTP draft layer: stored, but never read by plain decode.
    write_safetensors(directory / "model-00002-of-00002.safetensors", layer(2) + layer(3))
    return directory
