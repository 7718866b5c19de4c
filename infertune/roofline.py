"""Decode roofline: the fastest a batch-1 token can be under tensor parallelism.

At batch 1 decode is bound by memory bandwidth: every GPU must stream its share of the
weights once per token. This module sizes that share from the checkpoint's own
safetensors headers (real stored bytes, so packed NVFP4 counts as stored) and config.json:

* routed experts: only the top-k of E experts are read, and each expert is split over TP;
* tensors that sglang keeps whole on every GPU (ReplicatedLinear / norms / router) count
  in full on each GPU -- with MLA these are large, see REPLICATED below;
* everything else is split evenly over the TP ranks;
* the embedding is a lookup: one row per token;
* layers past num_hidden_layers are the MTP draft head, not read by plain decode.

The KV cache is not counted: at short context it is small next to the weights.

    python -m infertune.roofline MODEL_DIR --gpu rtx-pro-6000-server --tp 8 [--json]
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from collections import defaultdict
from pathlib import Path

import yaml

from infertune_node.safetensors import TensorInfo, model_tensors

from .report import merge_into_host_report

SPECS_FILE = Path(__file__).parent / "data" / "gpu_specs.yml"

# Replicated on every TP rank by sglang's DeepSeek-V2/V3/V3.2 (and GLM-5) model code:
# fused_qkv_a_proj_with_mqa (= q_a_proj + kv_a_proj_with_mqa) and the DSA indexer's
# wq_b/wk/weights_proj are ReplicatedLinear; norms and the MoE router gate are per rank.
REPLICATED = re.compile(
    r"q_a_proj\.|kv_a_proj_with_mqa\.|\.indexer\.|layernorm\.|norm\.weight$"
    r"|\.gate\.(weight|e_score_correction_bias)$"
)
LAYER = re.compile(r"\.layers\.(\d+)\.")


def component(name: str) -> str:
    if ".indexer." in name:
        return "indexer"
    if ".self_attn." in name:
        return "attention"
    if ".experts." in name:
        return "routed_experts"
    if ".shared_expert" in name:
        return "shared_experts"
    if ".gate." in name:
        return "router"
    if ".mlp." in name:
        return "dense_mlp"
    if "embed_tokens" in name:
        return "embedding"
    if name.startswith("lm_head"):
        return "lm_head"
    return "norms"


def text_config(config: dict) -> dict:
    return config.get("text_config", config) if "num_hidden_layers" not in config else config


def load_dump(path: Path) -> tuple[str, dict, list[TensorInfo]]:
    """Read the model_weights module's `dump`: (model name, config, tensors)."""
    data = json.loads(Path(path).read_text())
    return data["model"], data["config"], [TensorInfo(n, d, tuple(s), b) for n, d, s, b in data["tensors"]]


def load_specs(path: Path = SPECS_FILE) -> dict:
    return yaml.safe_load(path.read_text())


def decode_bytes(tensors, config: dict, tp: int) -> dict:
    """Bytes each GPU reads per decoded token, with the breakdown."""
    cfg = text_config(config)
    layers = cfg["num_hidden_layers"]
    experts = cfg.get("n_routed_experts") or cfg.get("num_local_experts") or cfg.get("num_experts")
    expert_share = cfg["num_experts_per_tok"] / experts if experts else 1.0
    per_gpu = defaultdict(float)
    replicated = defaultdict(float)
    resident = 0.0
    active_total = 0.0
    skipped = 0
    for t in tensors:
        m = LAYER.search(t.name)
        if m and int(m.group(1)) >= layers:
            skipped += t.nbytes
            continue
        comp = component(t.name)
        whole = comp == "embedding" or not t.shape or bool(REPLICATED.search(t.name))
        if comp == "routed_experts":
            fraction = expert_share
        elif comp == "embedding":
            fraction = 1 / t.shape[0]
        else:
            fraction = 1.0
        divisor = 1 if whole else tp
        read = t.nbytes * fraction / divisor
        per_gpu[comp] += read
        if whole:
            replicated[comp] += read
        resident += t.nbytes / divisor
        active_total += t.nbytes * fraction
    return {
        "bytes_per_gpu": sum(per_gpu.values()),
        "replicated_bytes_per_gpu": sum(replicated.values()),
        "active_bytes_all_gpus": active_total,
        "resident_bytes_per_gpu": resident,
        "skipped_mtp_bytes": skipped,
        "breakdown": {c: {"bytes_per_gpu": per_gpu[c], "replicated_bytes_per_gpu": replicated[c]}
                      for c in sorted(per_gpu)},
    }


def roofline(tensors, config: dict, gpu: dict, tp: int) -> dict:
    b = decode_bytes(tensors, config, tp)
    bw = gpu["bandwidth_gbps"] * 1e9
    ms = b["bytes_per_gpu"] / bw * 1e3
    b.update({
        "tp": tp,
        "gpu": gpu["name"],
        "bandwidth_gbps": gpu["bandwidth_gbps"],
        "bandwidth_source": gpu["source"],
        "floor_ms_per_token": ms,
        "floor_tok_per_s": 1e3 / ms,
        # What the floor would be if nothing were replicated: the aggregate-bandwidth
        # estimate (active bytes / (TP x bandwidth)) that hand calculations usually give.
        "even_split_ms_per_token": b["active_bytes_all_gpus"] / (tp * bw) * 1e3,
        "fits_in_memory": b["resident_bytes_per_gpu"] <= gpu["memory_gb"] * 1e9,
    })
    return b


# --assume-quant: which linear layers a config-only estimate stores as NVFP4; the rest,
# attention and the DSA indexer included, stay BF16.
QUANT_SCHEMES = {
    "bf16": (),
    "nvfp4-experts": ("experts",),  # NVIDIA ModelOpt recipe for GLM-5.x
    "nvfp4-mlp": ("experts", "shared_experts", "dense_mlp"),
}


def _linear(name: str, out_f: int, in_f: int, nvfp4: bool) -> list:
    """A linear layer as stored: BF16, or NVFP4 = uint8 holding 2 values a byte, one
    float8 scale per 16 values, a float32 per-tensor weight scale and input scale."""
    if not nvfp4:
        return [TensorInfo(f"{name}.weight", "BF16", (out_f, in_f), out_f * in_f * 2)]
    return [TensorInfo(f"{name}.weight", "U8", (out_f, in_f // 2), out_f * in_f // 2),
            TensorInfo(f"{name}.weight_scale", "F8_E4M3", (out_f, in_f // 16), out_f * in_f // 16),
            TensorInfo(f"{name}.weight_scale_2", "F32", (), 4),
            TensorInfo(f"{name}.input_scale", "F32", (), 4)]


def _vector(name: str, n: int, dtype: str = "BF16", item: int = 2) -> list:
    return [TensorInfo(name, dtype, (n,), n * item)]


def _mlp(prefix: str, hidden: int, inter: int, nvfp4: bool) -> list:
    return (_linear(f"{prefix}.gate_proj", inter, hidden, nvfp4)
            + _linear(f"{prefix}.up_proj", inter, hidden, nvfp4)
            + _linear(f"{prefix}.down_proj", hidden, inter, nvfp4))


def deepseek_layout(cfg: dict, quant: str) -> list:
    """The tensors a DeepSeek-V3-style checkpoint (MLA, optional DSA indexer, shared and
    routed experts; GLM-5 is one) stores, from config.json alone. MTP layers are left out."""
    q = QUANT_SCHEMES[quant]
    h, heads, vocab = cfg["hidden_size"], cfg["num_attention_heads"], cfg["vocab_size"]
    nope, rope, v = cfg["qk_nope_head_dim"], cfg["qk_rope_head_dim"], cfg["v_head_dim"]
    kv_lora, q_lora = cfg["kv_lora_rank"], cfg.get("q_lora_rank")
    moe_inter = cfg["moe_intermediate_size"]
    out = [TensorInfo("model.embed_tokens.weight", "BF16", (vocab, h), vocab * h * 2),
           TensorInfo("lm_head.weight", "BF16", (vocab, h), vocab * h * 2)]
    out += _vector("model.norm.weight", h)
    for i in range(cfg["num_hidden_layers"]):
        p, a = f"model.layers.{i}", f"model.layers.{i}.self_attn"
        out += _vector(f"{p}.input_layernorm.weight", h) + _vector(f"{p}.post_attention_layernorm.weight", h)
        if q_lora:
            out += (_linear(f"{a}.q_a_proj", q_lora, h, False) + _vector(f"{a}.q_a_layernorm.weight", q_lora)
                    + _linear(f"{a}.q_b_proj", heads * (nope + rope), q_lora, False))
        else:
            out += _linear(f"{a}.q_proj", heads * (nope + rope), h, False)
        out += (_linear(f"{a}.kv_a_proj_with_mqa", kv_lora + rope, h, False)
                + _vector(f"{a}.kv_a_layernorm.weight", kv_lora)
                + _linear(f"{a}.kv_b_proj", heads * (nope + v), kv_lora, False)
                + _linear(f"{a}.o_proj", h, heads * v, False))
        if "index_topk" in cfg:
            x, ih, idim = f"{a}.indexer", cfg["index_n_heads"], cfg["index_head_dim"]
            out += (_linear(f"{x}.wq_b", ih * idim, q_lora, False) + _linear(f"{x}.wk", idim, h, False)
                    + _vector(f"{x}.k_norm.weight", idim) + _vector(f"{x}.k_norm.bias", idim)
                    + _linear(f"{x}.weights_proj", ih, h, False))
        if i < cfg.get("first_k_dense_replace", 0):
            out += _mlp(f"{p}.mlp", h, cfg["intermediate_size"], "dense_mlp" in q)
            continue
        n = cfg["n_routed_experts"]
        out += (_linear(f"{p}.mlp.gate", n, h, False)
                + _vector(f"{p}.mlp.gate.e_score_correction_bias", n, "F32", 4))
        if cfg.get("n_shared_experts"):
            out += _mlp(f"{p}.mlp.shared_experts", h, moe_inter * cfg["n_shared_experts"],
                        "shared_experts" in q)
        for e in range(n):
            out += _mlp(f"{p}.mlp.experts.{e}", h, moe_inter, "experts" in q)
    return out


def gpu_entry(specs: dict, gpu: str) -> str:
    """The key of a GPU given by key or by the name nvidia-smi reports (`name` or `aliases`)."""
    if gpu in specs:
        return gpu
    for key, spec in specs.items():
        if gpu.casefold() in (n.casefold() for n in [spec["name"], *spec.get("aliases", [])]):
            return key
    raise SystemExit(f"unknown GPU {gpu!r}; known: {', '.join(sorted(specs))} "
                     "(add it to infertune/data/gpu_specs.yml)")


def analyse(source: Path, gpu: str, tp: int, assume_quant: str | None = None,
            specs: dict | None = None) -> dict:
    """Floor for a model directory, or for the `dump` the model_weights module returned for one."""
    specs = specs or load_specs()
    gpu_key = gpu_entry(specs, gpu)
    source = Path(source)
    if source.is_file():
        model, config, tensors = load_dump(source)
        origin = "safetensors headers"
    else:
        model, config = source.resolve().name, json.loads((source / "config.json").read_text())
        tensors = None if assume_quant else model_tensors(source)
        origin = "safetensors headers"
    if assume_quant:
        tensors = deepseek_layout(text_config(config), assume_quant)
        origin = f"config.json only, layout synthesized, quantization {assume_quant}"
    elif not tensors:
        raise SystemExit(f"{source}: no *.safetensors; pass --assume-quant to size "
                         "the checkpoint from config.json alone")
    result = roofline(tensors, config, specs[gpu_key], tp)
    result.update({"model": model, "gpu_key": gpu_key, "source": origin})
    return result


def render(r: dict, measured_ms: float | None = None) -> str:
    gb = 1e9
    lines = [f"{r['model']} ({r['source']})",
             f"{r['tp']} x {r['gpu']} at {r['bandwidth_gbps']} GB/s, tensor parallel {r['tp']}",
             f"{'component':<16}{'GB/GPU/token':>14}{'of it replicated':>18}"]
    for comp, v in r["breakdown"].items():
        lines.append(f"{comp:<16}{v['bytes_per_gpu'] / gb:>14.3f}{v['replicated_bytes_per_gpu'] / gb:>18.3f}")
    lines.append(f"{'total':<16}{r['bytes_per_gpu'] / gb:>14.3f}{r['replicated_bytes_per_gpu'] / gb:>18.3f}")
    lines.append(f"floor: {r['floor_ms_per_token']:.2f} ms/token = {r['floor_tok_per_s']:.0f} tok/s "
                 "(batch 1, weights only)")
    lines.append(f"if nothing were replicated: {r['even_split_ms_per_token']:.2f} ms/token")
    if not r["fits_in_memory"]:
        lines.append(f"warning: {r['resident_bytes_per_gpu'] / gb:.1f} GB of weights per GPU "
                     "exceed its memory")
    if measured_ms:
        lines.append(f"measured {measured_ms:g} ms/token = "
                     f"{100 * r['floor_ms_per_token'] / measured_ms:.1f}% of the ceiling")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m infertune.roofline", description=__doc__.partition("\n")[0])
    p.add_argument("model", type=Path, help="directory with config.json and *.safetensors, or the "
                   "`dump` JSON that the model_weights module returned for one")
    p.add_argument("--gpu", default="rtx-pro-6000-server",
                   help="key in infertune/data/gpu_specs.yml, or the GPU name nvidia-smi reports")
    p.add_argument("--tp", type=int, default=8, help="tensor-parallel size")
    p.add_argument("--assume-quant", choices=sorted(QUANT_SCHEMES),
                   help="size a DeepSeek-V3-style checkpoint from config.json alone")
    p.add_argument("--measured-ms", type=float, help="measured ms/token, to report the efficiency")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument("--report", type=Path, help="also merge the result into this JSON host report")
    a = p.parse_args(argv)
    if a.tp < 1:
        p.error("--tp must be at least 1")
    result = analyse(a.model, a.gpu, a.tp, a.assume_quant)
    if a.measured_ms:
        result["measured_ms_per_token"] = a.measured_ms
        result["efficiency"] = result["floor_ms_per_token"] / a.measured_ms
    if a.report:
        merge_into_host_report(a.report, "roofline", result)
    print(json.dumps(result, indent=2, sort_keys=True) if a.json else render(result, a.measured_ms))
    return 0


if __name__ == "__main__":
    sys.exit(main())
