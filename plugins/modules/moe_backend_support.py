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
  - Reads the rules the installed sglang states in its own source (with C(ast), no import) - each
    quantization method's minimum compute capability, the quantizations each backend asserts, and the
    C(auto) resolutions that depend on quantization and architecture only.
  - Reads what the installed FlashInfer says per compute capability for the backend's kernels -
    C(@supported_compute_capability) declarations (enforced only under C(@backend_requirement)),
    per-architecture dispatch chains that raise, and JIT compile targets.
  - Combines them with O(matrix), the support matrix kept as data in the repository.
  - Verdicts are C(unsupported) (sglang refuses it, or a source says it cannot run here), C(undeclared)
    (FlashInfer does not declare this compute capability and nothing enforces it), C(supported), and
    C(unknown) when nothing covers the combination.
  - With O(argv), validates an sglang server command line with the installed release's own argument
    parser when sglang imports in O(venv), else against its choice lists.
  - Read-only; it runs the same in check mode and never reports a change.
options:
  venv:
    description: The virtual environment sglang is installed in.
    type: path
    default: /opt/sglang/venv
  backend:
    description: The C(--moe-runner-backend) to judge. Without it, only the versions and (with O(argv)) the command line.
    type: str
  quantization:
    description:
      - The C(--quantization) the server runs with; empty, V(bf16) or V(fp16) mean an unquantized model.
    type: str
  gpus:
    description: The host's GPUs as the gpu_facts module returns them (index, name, compute_capability at least).
    type: list
    elements: dict
    default: []
  matrix:
    description:
      - Support rows. Backend rows have C(backends) (a list), C(compute_capabilities), optional
        C(quantizations) (V(bf16) for unquantized), C(sglang_min) and C(evidence) (C(file) relative to the
        sglang package, or a list of files, and C(contains), text the installed release must hold for the
        row to apply), C(verdict) (supported/unsupported), optional C(resolves_to) (for C(auto)),
        C(fallback) (what runs instead, for example a weight-only kernel), C(reason) and C(source).
        Feature rows have C(feature) instead of C(backends).
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
  - infertune developers (@infertune)
"""

EXAMPLES = r"""
- name: Judge the MoE runner backend on this host
  infertune.fleet.moe_backend_support:
    venv: /opt/sglang/venv
    backend: flashinfer_cutlass
    quantization: modelopt_fp4
    gpus: "{{ gpu.gpus }}"
    matrix: "{{ sglang_moe_backend_support_matrix }}"
    kernels: "{{ sglang_flashinfer_moe_kernels }}"
    host: "{{ inventory_hostname }}"
  register: support

- name: Validate a command line with the installed sglang
  infertune.fleet.moe_backend_support:
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
  description: C(supported), C(undeclared), C(unsupported) or C(unknown) (worst GPU group); null without O(backend).
  returned: always
  type: str
findings:
  description: >-
    One entry per compute capability present - C(gpus) (indexes), C(gpu_name), C(compute_capability),
    C(quantization), C(verdict), C(resolved_backend) (what C(auto) resolves to, else the backend),
    C(fallback) (null, or the fallback the GPU runs the quantization through and that it is weight-only)
    and C(reasons).
  returned: always
  type: list
  elements: dict
reason:
  description: One sentence naming the host, the GPUs, the backend, the versions and why.
  returned: when O(backend) is given
  type: str
sources:
  description: The sglang files and lines, FlashInfer definitions and matrix sources the verdict rests on.
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

import socket

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node.moe_backend_support import ReadError, judge_host


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
    params = dict(module.params)
    host = params.pop("host") or socket.gethostname()
    try:
        result = judge_host(module.run_command, host, **params)
    except ReadError as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
