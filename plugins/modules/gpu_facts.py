#!/usr/bin/python
# -*- coding: utf-8 -*-
"""Ansible module: read a host's NVIDIA GPUs and, when asked, check them against a GPU profile."""

DOCUMENTATION = r"""
---
module: gpu_facts
short_description: Read every NVIDIA GPU of a host and optionally gate on count, capability, driver and persistence
description:
  - Reads, per GPU, the index, name, UUID, PCI bus id and device id, compute capability, memory, driver
    version, persistence mode and PCIe link generation and width (current and maximum).
  - With O(venv), derives the lowest driver the installed torch needs from the CUDA release recorded in
    its C(torch/version.py) and NVIDIA's minimum driver per CUDA release (a table with its source in
    C(plugins/module_utils/infertune_node/cuda_driver.py)).
  - Uses NVML through the C(pynvml) module of nvidia-ml-py when it imports on the host, else
    C(nvidia-smi --query-gpu=... --format=csv,noheader,nounits).
  - Read-only; it never changes a GPU setting, so it runs the same in check mode.
  - When O(expected_count), O(compute_capability), O(min_driver), O(venv) (with a derivable floor) or
    O(require_persistence) asks for it, the module fails with one message that names the host and, per
    GPU, its index and bus id with what was found and expected.
options:
  source:
    description: Where to read the GPUs from. V(auto) tries NVML first and falls back to nvidia-smi.
    type: str
    choices: [auto, nvml, nvidia_smi]
    default: auto
  nvidia_smi:
    description: The nvidia-smi command (a name found on PATH or an absolute path).
    type: str
    default: nvidia-smi
  expected_count:
    description: Number of GPUs the host must have.
    type: int
  compute_capability:
    description: Compute capability every GPU must have, for example V(12.0) for RTX PRO 6000 Blackwell.
    type: str
  min_driver:
    description:
      - Lowest acceptable NVIDIA driver version, for example V(575.57), checked in addition to the floor
        derived from O(venv).
    type: str
  venv:
    description:
      - Virtual environment whose C(torch/version.py) names the CUDA release the server runs with; the
        driver must be at least NVIDIA's minimum for that release. Without torch there (or a CPU-only
        torch, or a CUDA release not in the table) no floor is derived and RV(driver_floor) says why.
    type: path
  require_persistence:
    description: Fail when a GPU's persistence mode is not enabled (off, or hidden by a VM).
    type: bool
    default: false
  gpu_table:
    description:
      - GPU table (C(infertune/data/gpu_specs.yml) read on the controller). Each GPU is matched to an
        entry by PCI device id, else by name or alias, and returned as C(table_key) (null when absent).
    type: dict
  timeout:
    description: Seconds nvidia-smi may take; past it the module fails with "driver unresponsive" (a stuck GPU
      holds nvidia-smi in the driver) instead of hanging. Unset, no limit. NVML has none either way.
    type: int
  host:
    description: Name of the host in failure messages; the role passes the inventory name.
    type: str
author:
  - infertune developers (@infertune)
"""

EXAMPLES = r"""
- name: Read the GPUs of the host
  infertune.fleet.gpu_facts:
  register: gpu

- name: Stop unless the host has 8 GPUs of compute capability 12.0 on driver 575.57 or newer
  infertune.fleet.gpu_facts:
    expected_count: 8
    compute_capability: "12.0"
    min_driver: "575.57"
    host: "{{ inventory_hostname }}"
"""

RETURN = r"""
gpus:
  description: One entry per GPU, in index order.
  returned: success
  type: list
  elements: dict
  sample:
    - index: 0
      name: NVIDIA RTX PRO 6000 Blackwell Server Edition
      uuid: GPU-5c1f9a0e-0000-0000-0000-000000000000
      pci_bus_id: "00000000:18:00.0"
      pci_bdf: "0000:18:00.0"
      pci_device_id: "0x2bb5"
      compute_capability: "12.0"
      memory_total_mib: 97887
      driver_version: "580.95.05"
      persistence_mode: true
      pcie_link_gen_current: 5
      pcie_link_gen_max: 5
      pcie_link_width_current: 16
      pcie_link_width_max: 16
gpu_count:
  description: Number of GPUs found.
  returned: success
  type: int
compute_capabilities:
  description: The distinct compute capabilities found, sorted.
  returned: success
  type: list
  elements: str
source:
  description: What answered, V(nvml) or V(nvidia_smi).
  returned: success
  type: str
driver_floor:
  description: >-
    The driver floor from O(venv) - C(torch_version), C(cuda_version), C(min_driver) (null when not derived),
    C(reason) and C(source) (NVIDIA's table); null without O(venv).
  returned: success
  type: dict
  sample:
    torch_version: 2.9.1+cu128
    cuda_version: "12.8"
    min_driver: "570.26"
    reason: CUDA 12.8 (torch 2.9.1+cu128 in /opt/sglang/venv) needs driver 570.26 or newer
problems:
  description: Each way the GPUs differ from the requested profile; empty when they match or nothing was asked.
  returned: always
  type: list
  elements: str
"""

import socket

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.infertune.fleet.plugins.module_utils.infertune_module import runner, timed_runner
from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node.gpu_gate import gate
from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node.gpu_query import GpuQueryError


def main():
    module = AnsibleModule(
        argument_spec=dict(
            source=dict(type="str", choices=["auto", "nvml", "nvidia_smi"], default="auto"),
            nvidia_smi=dict(type="str", default="nvidia-smi"),
            expected_count=dict(type="int"),
            compute_capability=dict(type="str"),
            min_driver=dict(type="str"),
            venv=dict(type="path"),
            require_persistence=dict(type="bool", default=False),
            gpu_table=dict(type="dict"),
            timeout=dict(type="int"),
            host=dict(type="str"),
        ),
        supports_check_mode=True,
    )
    params = dict(module.params)
    host = params.pop("host") or socket.gethostname()
    timeout = params.pop("timeout")
    try:
        result = gate(timed_runner(module, timeout) if timeout else runner(module), **params)
    except GpuQueryError as exc:
        module.fail_json(msg="host %s: %s" % (host, exc), problems=[str(exc)])
    if result["problems"]:
        module.fail_json(msg="host %s does not match the GPU profile: %s" % (host, "; ".join(result["problems"])),
                         changed=False, **result)
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
