"""MoE backend support: versions, choice lists and argv checks on miniature trees.

The verdicts themselves are tested against trimmed copies of the released sources
(sglang 0.5.9, 0.5.14, 0.5.23 and flashinfer-python 0.7.2) in test_moe_backend_support.py.
"""
import os
import stat
import sys
import textwrap

import pytest
import yaml

from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node.gpu_query import parse_smi_csv
from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node.moe_backend_support import (
    check_argv_choices,
    choice_lists,
    dist_version,
    package_dir,
    site_dirs,
)
from fakehost import REPO
from moduleharness import run_module
from test_gpu_facts import SM120_CSV

ROLE_VARS = yaml.safe_load((REPO / "roles" / "sglang" / "vars" / "main.yml").read_text())
MATRIX = ROLE_VARS["sglang_moe_backend_support_matrix"]
KERNELS = ROLE_VARS["sglang_flashinfer_moe_kernels"]
SM120 = parse_smi_csv(SM120_CSV)
BACKENDS = ["auto", "triton", "flashinfer_trtllm", "flashinfer_cutlass", "flashinfer_cutedsl", "cutlass"]

CHOICES_PY = """
    QUANTIZATION_CHOICES = ["fp8", "modelopt_fp4"]
    ATTENTION_BACKEND_CHOICES = ["triton", "flashinfer"]
    BUILT_IN = frozenset({"pytorch", "flashinfer"})
    SAMPLING_BACKEND_CHOICES = set(BUILT_IN)
    MOE_RUNNER_BACKEND_CHOICES = %r
""" % BACKENDS

OLD_SERVER_ARGS = """
    import torch  # the real file needs torch: it must be read, never imported
    from sglang.srt.utils import something
    QUANTIZATION_CHOICES = ["fp8", "modelopt_fp4"]
    MOE_RUNNER_BACKEND_CHOICES = ["auto", "triton", "flashinfer_cutlass"]
    add_moe_runner_backend_choices = MOE_RUNNER_BACKEND_CHOICES.extend
"""

FUSED_MOE_CORE = """
    from ..utils import supported_compute_capability
    def cutlass_fused_moe(x):
        pass
    def trtllm_fp4_block_scale_moe(x):
        pass
"""

CUTE_DSL = """
    from ...utils import supported_compute_capability
    _SUPPORTED = [100, 103, 107]
    class CuteDslMoEWrapper:
        @supported_compute_capability([100, 103, 107])
        def __init__(self):
            pass
    @supported_compute_capability(_SUPPORTED)
    def cute_dsl_fused_moe_nvfp4(x):
        pass
    @supported_compute_capability([120, 121])
    def b12x_fused_moe(x):
        pass
"""


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as handle:
        handle.write(textwrap.dedent(text))


def make_venv(root, sglang="0.5.23", flashinfer="0.7.2"):
    site = os.path.join(root, "lib", "python3.11", "site-packages")
    if sglang:
        os.makedirs(os.path.join(site, "sglang-%s.dist-info" % sglang))
        write(os.path.join(site, "sglang", "__init__.py"), "")
        if tuple(int(part) for part in sglang.split(".")) >= (0, 5, 20):
            write(os.path.join(site, "sglang", "srt", "arg_groups", "choices.py"), CHOICES_PY)
        else:
            write(os.path.join(site, "sglang", "srt", "server_args.py"), OLD_SERVER_ARGS)
    if flashinfer:
        os.makedirs(os.path.join(site, "flashinfer_python-%s.dist-info" % flashinfer))
        write(os.path.join(site, "flashinfer", "fused_moe", "core.py"), FUSED_MOE_CORE)
        write(os.path.join(site, "flashinfer", "fused_moe", "cute_dsl", "fused_moe.py"), CUTE_DSL)
    return str(root)


@pytest.fixture
def venv(tmp_path):
    return make_venv(tmp_path / "venv")


def test_versions_come_from_dist_info_names(venv):
    sites = site_dirs(venv)
    assert dist_version(sites, "sglang") == "0.5.23"
    assert dist_version(sites, "flashinfer-python") == "0.7.2"
    assert dist_version(sites, "vllm") is None


def test_new_layout_choices_are_imported_by_path(venv):
    source, lists = choice_lists(package_dir(site_dirs(venv), "sglang"))
    assert source.endswith("srt/arg_groups/choices.py")
    assert lists["MOE_RUNNER_BACKEND_CHOICES"] == BACKENDS
    assert lists["SAMPLING_BACKEND_CHOICES"] == ["flashinfer", "pytorch"]


def test_old_layout_choices_are_read_with_ast_without_importing(tmp_path):
    old = make_venv(tmp_path / "old", sglang="0.5.19")
    source, lists = choice_lists(package_dir(site_dirs(old), "sglang"))
    assert source.endswith("srt/server_args.py")
    assert lists["MOE_RUNNER_BACKEND_CHOICES"] == ["auto", "triton", "flashinfer_cutlass"]


def test_argv_values_are_checked_against_the_choice_lists():
    lists = {"MOE_RUNNER_BACKEND_CHOICES": BACKENDS, "QUANTIZATION_CHOICES": ["modelopt_fp4"]}
    assert check_argv_choices(["--model-path", "/m", "--moe-runner-backend", "flashinfer_cutlass",
                               "--quantization=modelopt_fp4", "--anything", "x"], lists) == []
    assert check_argv_choices(["--moe-runner-backend", "bogus", "--quantization"], lists) == [
        "--moe-runner-backend bogus is not one of %s" % ", ".join(BACKENDS),
        "--quantization needs a value"]


def make_importable_sglang(venv):
    """Give the venv a python3 that sees its site-packages and a ServerArgs with a tiny parser."""
    site = site_dirs(venv)[0]
    write(os.path.join(site, "sglang", "srt", "__init__.py"), "")
    write(os.path.join(site, "sglang", "srt", "server_args.py"), """
        class ServerArgs:
            @staticmethod
            def add_cli_args(parser):
                parser.add_argument("--model-path", required=True)
                parser.add_argument("--moe-runner-backend", choices=["auto", "flashinfer_cutlass"])
    """)
    python = os.path.join(venv, "bin", "python3")
    write(python, "#!/bin/sh\nPYTHONPATH=%s exec %s \"$@\"\n" % (site, sys.executable))
    os.chmod(python, os.stat(python).st_mode | stat.S_IXUSR)


def test_module_validates_argv_with_the_installed_parser(venv, capsys):
    make_importable_sglang(venv)
    rc, result = run_module("moe_backend_support", {"venv": venv, "argv": ["--model-path", "/m", "--tp-size", "8"]},
                            capsys)
    assert rc == 0
    assert result["argv_check"] == {"method": "parser", "ok": False, "errors": ["unrecognized arguments: --tp-size 8"]}
    rc, result = run_module("moe_backend_support", {"venv": venv, "argv": ["--model-path", "/m"]}, capsys)
    assert result["argv_check"] == {"method": "parser", "ok": True, "errors": []}


def test_module_falls_back_to_choice_lists_when_sglang_cannot_import(venv, capsys):
    rc, result = run_module("moe_backend_support", {
        "venv": venv, "backend": "flashinfer_cutedsl", "quantization": "modelopt_fp4", "gpus": SM120,
        "matrix": MATRIX, "kernels": KERNELS, "host": "node1",
        "argv": ["--moe-runner-backend", "nope"]}, capsys)
    assert rc == 0 and result["changed"] is False
    assert (result["sglang_version"], result["flashinfer_version"]) == ("0.5.23", "0.7.2")
    assert result["moe_runner_backends"] == BACKENDS
    # FlashInfer declares CuTe DSL MoE for 100/103/107 without @backend_requirement: undeclared, not refused.
    assert result["verdict"] == "undeclared"
    assert result["reason"].startswith(
        "host node1: MoE runner backend flashinfer_cutedsl is undeclared with sglang 0.5.23 and flashinfer 0.7.2. "
        "GPUs 0, 1, 2, 3, 4, 5, 6, 7 (NVIDIA RTX PRO 6000 Blackwell Server Edition, compute capability 12.0): "
        "undeclared: FlashInfer declares it for compute capabilities 100, 103, 107 only")
    check = result["argv_check"]
    assert (check["method"], check["ok"]) == ("choices", False)
    assert check["errors"][0].startswith("--moe-runner-backend nope is not one of auto")


def test_a_venv_without_sglang_says_not_installed(tmp_path):
    from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node.moe_backend_support import judge_host

    result = judge_host(lambda argv: (0, "", ""), "node1", venv=str(tmp_path), backend="flashinfer_cutlass",
                        quantization="modelopt_fp4", gpus=SM120)
    assert result["reason"].startswith("host node1: MoE runner backend flashinfer_cutlass is unknown with sglang not"
                                       " installed and flashinfer not installed.")
