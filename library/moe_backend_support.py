#!/usr/bin/python
# -*- coding: utf-8 -*-
"""Ansible module: judge an sglang MoE runner backend on a host and check an sglang command line."""

DOCUMENTATION = r"""
---
module: moe_backend_support
short_description: Judge an sglang MoE runner backend against the host's GPUs and installed sglang/FlashInfer
description:
  - Finds the sglang and flashinfer-python versions installed in O(venv) from their dist-info, without
    importing either (no torch needed).
  - Reads the MoE runner backends that this sglang accepts from its own sources
    (C(sglang/srt/arg_groups/choices.py) from 0.5.20, C(server_args.py) read with C(ast) before).
  - Reads the compute capabilities the installed FlashInfer declares with
    C(@supported_compute_capability) for the backend's kernels, where it declares them.
  - Combines both with O(matrix), the support matrix kept as data in the repository.
  - With O(argv), validates an sglang server command line with the installed release's own argument
    parser when sglang imports in O(venv), else against its choice lists.
  - Read-only; it runs the same in check mode and never reports a change.
options:
  venv:
    description: The virtual environment sglang is installed in.
    type: path
    default: /opt/sglang/venv
  backend:
    description: The C(--moe-runner-backend) to judge. Without it only versions, choices and O(argv) are checked.
    type: str
  quantization:
    description: The C(--quantization) the server runs with; matrix rows may be specific to one.
    type: str
  gpus:
    description: The host's GPUs as the gpu_facts module returns them (index, name, compute_capability at least).
    type: list
    elements: dict
    default: []
  matrix:
    description:
      - Support rows. Backend rows have C(backend), C(compute_capabilities), optional C(quantization) and
        C(sglang_min), C(verdict) (supported/unsupported), optional C(resolves_to) (for C(auto)),
        C(reason) and C(source). Feature rows have C(feature) instead of C(backend).
    type: list
    elements: dict
    default: []
  kernels:
    description: Per backend, the FlashInfer definitions it runs, as C(path/in/flashinfer.py:Qualified.name).
    type: dict
    default: {}
  allreduce_fusion:
    description: Whether the server is asked to use FlashInfer all-reduce fusion (judged with the feature rows).
    type: bool
    default: false
  argv:
    description: sglang server arguments (after C(-m sglang.launch_server)) to validate.
    type: list
    elements: str
  host:
    description: Name of the host in messages; the role passes the inventory name.
    type: str
author:
  - infertune
"""

EXAMPLES = r"""
- name: Judge the MoE runner backend on this host
  moe_backend_support:
    venv: /opt/sglang/venv
    backend: flashinfer_cutlass
    quantization: modelopt_fp4
    gpus: "{{ gpu.gpus }}"
    matrix: "{{ sglang_moe_support_matrix }}"
    kernels: "{{ sglang_flashinfer_moe_kernels }}"
    host: "{{ inventory_hostname }}"
  register: support

- name: Validate a command line with the installed sglang
  moe_backend_support:
    argv: [--model-path, /models/GLM-5-NVFP4, --tp-size, "8"]
"""

RETURN = r"""
sglang_version:
  description: Installed sglang version, null when sglang is not installed in O(venv).
  returned: always
  type: str
  sample: 0.5.23
flashinfer_version:
  description: Installed flashinfer-python version, null when absent.
  returned: always
  type: str
  sample: 0.7.2
moe_runner_backends:
  description: The C(--moe-runner-backend) values this sglang accepts, null when sglang is absent.
  returned: always
  type: list
  elements: str
choices_source:
  description: The sglang file the choice lists were read from.
  returned: when sglang is installed
  type: str
verdict:
  description: C(supported), C(unsupported) or C(unknown); null without O(backend).
  returned: always
  type: str
findings:
  description: One entry per compute capability present, with the GPU indexes, verdict and reasons.
  returned: always
  type: list
  elements: dict
reason:
  description: One sentence naming the host, the GPUs, the backend, the versions and why.
  returned: when O(backend) is given
  type: str
sources:
  description: The matrix sources and FlashInfer definitions the verdict rests on.
  returned: always
  type: list
  elements: str
argv_check:
  description: >-
    How O(argv) was checked (C(method) parser, choices or none), whether it passed (C(ok)) and the C(errors);
    C(parser_error) says why the parser could not be used.
  returned: when O(argv) is given
  type: dict
"""

import json
import os
import socket

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.infertune_node.moe_support import (
    PARSER_PROBE,
    assess,
    check_argv_choices,
    choice_lists,
    dist_version,
    package_dir,
    site_dirs,
)


def check_argv(module, argv, lists, sglang_dir):
    python = os.path.join(module.params["venv"], "bin", "python3")
    if sglang_dir is None:
        parser_error = "sglang is not installed in %s" % module.params["venv"]
    elif not os.path.exists(python):
        parser_error = "%s does not exist" % python
    else:
        rc, out, err = module.run_command([python, "-c", PARSER_PROBE, json.dumps(argv)])
        try:
            probe = json.loads(out.strip().splitlines()[-1])
        except (ValueError, IndexError):
            probe = {"imported": False, "error": "parser probe failed (rc %d): %s" % (rc, err.strip())}
        if probe["imported"]:
            return {"method": "parser", "ok": probe["ok"], "errors": [] if probe["ok"] else [probe["error"]]}
        parser_error = "sglang does not import: %s" % probe["error"]
    if lists is None:
        return {"method": "none", "ok": False, "errors": [parser_error], "parser_error": parser_error}
    errors = check_argv_choices(argv, lists)
    return {"method": "choices", "ok": not errors, "errors": errors, "parser_error": parser_error}


def main():
    module = AnsibleModule(
        argument_spec=dict(
            venv=dict(type="path", default="/opt/sglang/venv"),
            backend=dict(type="str"),
            quantization=dict(type="str"),
            gpus=dict(type="list", elements="dict", default=[]),
            matrix=dict(type="list", elements="dict", default=[]),
            kernels=dict(type="dict", default={}),
            allreduce_fusion=dict(type="bool", default=False),
            argv=dict(type="list", elements="str"),
            host=dict(type="str"),
        ),
        supports_check_mode=True,
    )
    params = module.params
    host = params["host"] or socket.gethostname()
    sites = site_dirs(params["venv"])
    sglang_version = dist_version(sites, "sglang")
    sglang_dir = package_dir(sites, "sglang") if sglang_version else None
    flashinfer_version = dist_version(sites, "flashinfer-python")
    flashinfer_dir = package_dir(sites, "flashinfer") if flashinfer_version else None

    result = dict(changed=False, sglang_version=sglang_version, flashinfer_version=flashinfer_version,
                  moe_runner_backends=None, verdict=None, findings=[], sources=[])
    lists = None
    if sglang_dir is not None:
        try:
            result["choices_source"], lists = choice_lists(sglang_dir)
        except (OSError, SyntaxError, ImportError) as exc:
            module.fail_json(msg="host %s: cannot read the choice lists of sglang %s: %s" % (
                host, sglang_version, exc), **result)
        result["moe_runner_backends"] = lists.get("MOE_RUNNER_BACKEND_CHOICES")

    if params["backend"]:
        judged = assess(params["backend"], params["quantization"], params["gpus"], sglang_version,
                        result["moe_runner_backends"], flashinfer_dir, params["matrix"], params["kernels"],
                        params["allreduce_fusion"])
        result.update(verdict=judged["verdict"], findings=judged["findings"], sources=judged["sources"])
        result["reason"] = "host %s: MoE runner backend %s is %s with sglang %s and flashinfer %s. %s" % (
            host, params["backend"], judged["verdict"], sglang_version, flashinfer_version,
            " ".join(judged["reasons"]))

    if params["argv"] is not None:
        result["argv_check"] = check_argv(module, params["argv"], lists, sglang_dir)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
