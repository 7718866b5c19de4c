"""Verdicts per backend x quantization x compute capability, read from three sglang releases.

tests/fixtures/moe_sources/ holds trimmed copies of the files the module reads from
sglang 0.5.9, 0.5.14 and 0.5.23 and flashinfer-python 0.7.2 (PyPI wheels); on the full
wheels the module gives the same table (docs/gpu-gate.md).
"""
import os

import pytest
import yaml

from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node import sglang_rules
from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node.gpu_query import parse_smi_csv
from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node.moe_backend_support import (
    Installed,
    assess,
    choice_lists,
    dist_version,
    kernel_ccs,
    package_dir,
    site_dirs,
)
from fakehost import REPO
from moduleharness import run_module
from test_gpu_facts import H200_CSV, SM120_CSV

SOURCES = REPO / "tests" / "fixtures" / "moe_sources"
ROLE_VARS = yaml.safe_load((REPO / "roles" / "sglang" / "vars" / "main.yml").read_text())
MATRIX = ROLE_VARS["sglang_moe_backend_support_matrix"]
KERNELS = ROLE_VARS["sglang_flashinfer_moe_kernels"]
H200 = parse_smi_csv(H200_CSV)
SM120 = parse_smi_csv(SM120_CSV)
RELEASES = ["0.5.9", "0.5.14", "0.5.23"]
FLASHINFER = str(SOURCES / "flashinfer-0.7.2" / "flashinfer")


def venv_for(tmp_path, release, flashinfer=True):
    """A venv layout whose site-packages links the fixture trees of one release."""
    site = tmp_path / release / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    trees = [SOURCES / ("sglang-" + release)] + ([SOURCES / "flashinfer-0.7.2"] if flashinfer else [])
    for tree in trees:
        for entry in tree.iterdir():
            os.symlink(entry, site / entry.name)
    return str(tmp_path / release)


def judge(venv, backend, quantization, gpus):
    sites = site_dirs(venv)
    sglang_dir, flashinfer_dir = package_dir(sites, "sglang"), package_dir(sites, "flashinfer")
    version = dist_version(sites, "sglang")
    installed = Installed(sglang_dir, version, flashinfer_dir, dist_version(sites, "flashinfer-python"),
                          [quantization])
    accepted = choice_lists(sglang_dir)[1]["MOE_RUNNER_BACKEND_CHOICES"]
    return assess(backend, quantization, gpus, installed, accepted, MATRIX, KERNELS)


def one_gpu(cc):
    return [{"index": 0, "name": "GPU of compute capability " + cc, "compute_capability": cc}]


@pytest.fixture(params=RELEASES)
def release(request, tmp_path):
    return request.param, venv_for(tmp_path, request.param)


def test_min_capability_of_nvfp4_dropped_to_80_with_the_marlin_fallback():
    found = {release: sglang_rules.min_capabilities(str(SOURCES / ("sglang-" + release) / "sglang"),
                                                    ["fp8", "modelopt_fp4", "mxfp4", "mxfp8"])
             for release in RELEASES}
    assert {r: {q: v["min"] for q, v in found[r].items()} for r in RELEASES} == {
        "0.5.9": {"fp8": 80, "modelopt_fp4": 100, "mxfp4": 80, "mxfp8": 100},
        "0.5.14": {"fp8": 80, "modelopt_fp4": 80, "mxfp4": 80, "mxfp8": 100},
        "0.5.23": {"fp8": 80, "modelopt_fp4": 80, "mxfp4": 80, "mxfp8": 100},
    }
    assert found["0.5.23"]["modelopt_fp4"]["source"] == \
        "sglang/srt/layers/quantization/modelopt_quant.py:ModelOptFp4Config.get_min_capability"


def test_backend_asserts_and_auto_rules_are_read_where_each_release_keeps_them():
    rules = {r: str(SOURCES / ("sglang-" + r) / "sglang") for r in RELEASES}
    assert sglang_rules.backend_quantizations(rules["0.5.9"])["flashinfer_cutlass"]["quantizations"] == [
        "modelopt_fp4", "modelopt_fp8", None]
    assert "flashinfer_cutedsl" not in sglang_rules.backend_quantizations(rules["0.5.9"])
    assert sglang_rules.backend_quantizations(rules["0.5.23"])["flashinfer_cutedsl"]["source"].startswith(
        "sglang/srt/arg_groups/moe_hook.py:")
    assert sglang_rules.auto_rules(rules["0.5.9"]) == []
    assert [(r["quantization"], r["majors"], r["resolves_to"]) for r in sglang_rules.auto_rules(rules["0.5.14"])] == [
        ("modelopt_fp4", [12], "flashinfer_cutlass")]
    (rule,) = sglang_rules.auto_rules(rules["0.5.23"])
    assert (rule["majors"], rule["source"].split(":")[0]) == ([11, 12], "sglang/srt/arg_groups/overrides.py")


def test_runner_rules_name_the_backends_by_their_choice_values():
    rules = {r: sglang_rules.runner_rules(str(SOURCES / ("sglang-" + r) / "sglang"), ["mxfp4", "fp8"]) for r in RELEASES}
    # 0.5.9 builds no chain, 0.5.14's ends in a bypass (pass), not a raise; FP8's ends in direct kernels.
    assert rules["0.5.9"] == rules["0.5.14"] == {}
    assert rules["0.5.23"]["mxfp4"]["backends"] == ["aiter", "deep_gemm", "flashinfer_mxfp4", "marlin", "triton",
                                                    "triton_kernel"]
    assert rules["0.5.23"]["mxfp4"]["source"].startswith("sglang/srt/layers/quantization/mxfp4.py:")


def test_mxfp4_refusal_names_sglang_choice_spellings(tmp_path):
    result = judge(venv_for(tmp_path, "0.5.23"), "humming", "mxfp4", H200)
    assert "Mxfp4MoEMethod builds a MoE runner only for aiter, deep_gemm, flashinfer_mxfp4, marlin, triton, " \
           "triton_kernel and raises" in result["reasons"][0]
    assert "triton_kernels" not in result["reasons"][0]


def test_flashinfer_kinds_of_statement():
    assert kernel_ccs(FLASHINFER, "fused_moe/cute_dsl/fused_moe.py:CuteDslMoEWrapper.__init__") == {
        "kind": "declared", "ccs": [100, 103, 107], "enforced": False}
    # @backend_requirement(common_check=...) enforces the check function's declaration.
    assert kernel_ccs(FLASHINFER, "fused_moe/monomoe.py:mono_moe") == {"kind": "declared", "ccs": [90], "enforced": True}
    assert kernel_ccs(FLASHINFER, "fused_moe/core.py:get_cutlass_fused_moe_module") == {
        "kind": "dispatch", "ccs": [89, 90, 100, 103, 107, 110, 120, 121], "enforced": True}
    assert kernel_ccs(FLASHINFER, "jit/fused_moe.py:gen_trtllm_gen_fused_moe_sm100_module") == {
        "kind": "compiled", "majors": [10, 12], "enforced": True}
    assert kernel_ccs(FLASHINFER, "fused_moe/core.py:cutlass_fused_moe") is None
    with pytest.raises(LookupError, match="defines no gone"):
        kernel_ccs(FLASHINFER, "fused_moe/core.py:gone")


# (backend, quantization, compute capability) -> verdict per release 0.5.9, 0.5.14, 0.5.23;
# "verdict -> backend" where it runs another backend, "+fallback" where it is weight-only.
EXPECTED = {
    ("auto", "modelopt_fp4", "9.0"): ("unsupported", "supported -> marlin +fallback", "supported -> marlin +fallback"),
    ("auto", "modelopt_fp4", "8.0"): ("unsupported", "supported -> marlin +fallback", "supported -> marlin +fallback"),
    ("flashinfer_cutlass", "modelopt_fp4", "9.0"): ("unsupported",) * 3,
    ("flashinfer_trtllm", "modelopt_fp4", "9.0"): ("unsupported",) * 3,
    ("triton", "modelopt_fp4", "9.0"): ("unsupported",) * 3,
    ("auto", "modelopt_fp4", "10.0"): ("unknown", "supported -> flashinfer_trtllm", "supported -> flashinfer_trtllm"),
    ("auto", "modelopt_fp4", "12.0"): ("unknown", "supported -> flashinfer_cutlass", "supported -> flashinfer_cutlass"),
    ("flashinfer_cutedsl", "modelopt_fp4", "12.0"): ("undeclared",) * 3,
    ("flashinfer_cutedsl", "modelopt_fp4", "10.3"): ("supported",) * 3,
    ("flashinfer_cutedsl", "bf16", "10.0"): ("supported", "unsupported", "unsupported"),
    ("flashinfer_trtllm", "modelopt_fp4", "12.0"): ("unknown", "unsupported", "unsupported"),
    ("flashinfer_trtllm", "fp8", "9.0"): ("unsupported",) * 3,
    ("flashinfer_trtllm", "fp8", "10.0"): ("supported",) * 3,
    ("flashinfer_cutlass", "bf16", "8.0"): ("unsupported",) * 3,
    ("flashinfer_cutlass", "bf16", "9.0"): ("supported",) * 3,
    ("flashinfer_cutlass", "fp8", "12.0"): ("unsupported",) * 3,
    ("flashinfer_cutlass", "mxfp4", "10.0"): ("unsupported",) * 3,
    ("auto", "fp8", "9.0"): ("supported -> triton",) * 3,
    ("cutlass", "fp8", "8.9"): ("unsupported",) * 3,
    ("cutlass", "fp8", "9.0"): ("supported",) * 3,
    ("deep_gemm", "fp8", "9.0"): ("supported",) * 3,
    ("deep_gemm", "bf16", "8.0"): ("unsupported",) * 3,
    ("triton", "mxfp4", "12.0"): ("supported",) * 3,
    # 0.5.23's Mxfp4MoEMethod.create_moe_runner raises for every backend it names nowhere, read from the source;
    # older releases do not offer these backends at all.
    ("humming", "mxfp4", "9.0"): ("unsupported",) * 3,
    ("lora_triton", "mxfp4", "9.0"): ("unsupported",) * 3,
    ("hpc_ops", "mxfp4", "9.0"): ("unsupported",) * 3,
    ("megamoe", "mxfp4", "10.0"): ("unsupported",) * 3,
    ("intel_xpu", "mxfp4", "12.0"): ("unsupported",) * 3,
    ("flashinfer_megamoe", "mxfp4", "10.0"): ("unsupported",) * 3,
    ("cutlass", "mxfp4", "9.0"): ("unknown", "unknown", "unsupported"),
    ("triton_kernel", "mxfp4", "9.0"): ("unknown",) * 3,
    # hpc_ops: "FP8 MoE on Hopper (SM90) only" in 0.5.23's choice list; absent before.
    ("hpc_ops", "fp8", "9.0"): ("unsupported", "unsupported", "supported"),
    ("hpc_ops", "fp8", "10.0"): ("unsupported",) * 3,
}


def shown(result, backend):
    if not result["findings"]:  # refused before any GPU is judged (a backend the release does not offer)
        return result["verdict"]
    (finding,) = result["findings"]
    text = finding["verdict"]
    if finding["resolved_backend"] != backend:
        text += " -> " + finding["resolved_backend"]
    return text + (" +fallback" if finding["fallback"] else "")


@pytest.mark.parametrize("cell", sorted(EXPECTED), ids="-".join)
def test_expected_verdicts(cell, release):
    name, venv = release
    backend, quantization, cc = cell
    assert shown(judge(venv, backend, quantization, one_gpu(cc)), backend) == EXPECTED[cell][RELEASES.index(name)]


def test_h200_gets_a_verdict_for_every_backend_the_issue_names(tmp_path):
    venv = venv_for(tmp_path, "0.5.23")
    for backend in ["auto", "triton", "flashinfer_cutlass", "flashinfer_trtllm", "flashinfer_cutedsl", "cutlass",
                    "deep_gemm"]:
        for quantization in ["fp8", "modelopt_fp4"]:
            assert judge(venv, backend, quantization, H200)["verdict"] != "unknown", (backend, quantization)


def test_nvfp4_on_hopper_names_the_weight_only_marlin_fallback(tmp_path):
    result = judge(venv_for(tmp_path, "0.5.23"), "auto", "modelopt_fp4", H200)
    (finding,) = result["findings"]
    assert (finding["verdict"], finding["resolved_backend"]) == ("supported", "marlin")
    assert "weight-only (W4A16)" in finding["fallback"]
    assert result["reasons"][0].startswith(
        "GPUs 0 (NVIDIA H200, compute capability 9.0): supported, runs marlin, through the fallback Marlin, weight-only")


def test_cutlass_nvfp4_on_hopper_is_refused_with_sglang_own_words(tmp_path):
    result = judge(venv_for(tmp_path, "0.5.23"), "flashinfer_cutlass", "modelopt_fp4", H200)
    assert result["verdict"] == "unsupported"
    assert "Current platform does not support NVFP4" in result["reasons"][0]


def test_a_release_without_the_rule_text_is_not_judged_by_its_row(tmp_path):
    # 0.5.9 has no "trtllm-gen MoE kernels are SM100-only": the row does not apply, and
    # FlashInfer compiling trtllm-gen for major 12 is no statement that it runs.
    result = judge(venv_for(tmp_path, "0.5.9"), "flashinfer_trtllm", "modelopt_fp4", SM120)
    assert result["verdict"] == "unknown"


def test_mixed_hosts_take_the_worst_verdict(tmp_path):
    gpus = H200 + [dict(SM120[0], index=1)]
    result = judge(venv_for(tmp_path, "0.5.23"), "flashinfer_cutedsl", "modelopt_fp4", gpus)
    assert [f["verdict"] for f in result["findings"]] == ["unsupported", "undeclared"]
    assert result["verdict"] == "unsupported"


def test_flashinfer_backend_without_flashinfer_is_unsupported(tmp_path):
    venv = venv_for(tmp_path, "0.5.23", flashinfer=False)
    result = judge(venv, "flashinfer_cutedsl", "modelopt_fp4", SM120)
    assert result["verdict"] == "unsupported"
    assert "FlashInfer is not installed" in result["reasons"][0]


def test_every_matrix_row_carries_its_source_and_its_evidence_exists_somewhere():
    for row in MATRIX:
        assert row["source"] and row["reason"] and row["verdict"] in ("supported", "unsupported"), row
        if "evidence" in row:
            files = row["evidence"]["file"] if isinstance(row["evidence"]["file"], list) else [row["evidence"]["file"]]
            texts = [(SOURCES / ("sglang-" + r) / "sglang" / f).read_text()
                     for r in RELEASES for f in files if (SOURCES / ("sglang-" + r) / "sglang" / f).exists()]
            assert any(row["evidence"]["contains"] in text for text in texts), row["evidence"]


def test_module_on_the_h200_capture(tmp_path, capsys):
    rc, result = run_module("moe_backend_support", {
        "venv": venv_for(tmp_path, "0.5.23"), "backend": "auto", "quantization": "modelopt_fp4", "gpus": H200,
        "matrix": MATRIX, "kernels": KERNELS, "host": "h200-lent"}, capsys)
    assert rc == 0 and result["verdict"] == "supported"
    assert result["findings"][0]["resolved_backend"] == "marlin"
    assert result["reason"].startswith("host h200-lent: MoE runner backend auto is supported with sglang 0.5.23 and "
                                       "flashinfer 0.7.2. GPUs 0 (NVIDIA H200, compute capability 9.0)")
