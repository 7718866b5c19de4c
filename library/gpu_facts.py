#!/usr/bin/python
# -*- coding: utf-8 -*-
"""Ansible module: read a host's NVIDIA GPUs and, when asked, check them against a GPU profile."""

DOCUMENTATION = r"""
---
module: gpu_facts
short_description: Read every NVIDIA GPU of a host and optionally gate on count, compute capability and driver
description:
  - Reads, per GPU, the index, name, UUID, PCI bus id, compute capability, memory, driver version,
    persistence mode and PCIe link generation and width (current and maximum).
  - Uses NVML through the C(pynvml) module of nvidia-ml-py when it imports on the host, else
    C(nvidia-smi --query-gpu=... --format=csv,noheader,nounits).
  - Read-only; it never changes a GPU setting, so it runs the same in check mode.
  - When O(expected_count), O(compute_capability) or O(min_driver) is given, the module fails with
    one message that names the host and, per GPU, its index and bus id with what was found and expected.
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
    description: Lowest acceptable NVIDIA driver version, for example V(575.57).
    type: str
  host:
    description: Name of the host in failure messages; the role passes the inventory name.
    type: str
author:
  - infertune
"""

EXAMPLES = r"""
- name: Read the GPUs of the host
  gpu_facts:
  register: gpu

- name: Stop unless the host has 8 GPUs of compute capability 12.0 on driver 575.57 or newer
  gpu_facts:
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
problems:
  description: Each way the GPUs differ from the requested profile; empty when they match or nothing was asked.
  returned: always
  type: list
  elements: str
"""

import socket

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.infertune_node.gpu_query import (
    GpuQueryError,
    NvmlUnavailable,
    gate_problems,
    query_nvml,
    query_smi,
)


def read_gpus(module):
    source = module.params["source"]
    if source in ("auto", "nvml"):
        try:
            import pynvml
        except ImportError:
            if source == "nvml":
                raise GpuQueryError("pynvml (nvidia-ml-py) is not importable by %s" % module._name)
        else:
            try:
                return "nvml", query_nvml(pynvml)
            except NvmlUnavailable:
                if source == "nvml":
                    raise

    def run(argv):
        executable = module.get_bin_path(argv[0])
        if executable is None:
            raise OSError("%s is not on PATH" % argv[0])
        return module.run_command([executable] + argv[1:], environ_update={"LC_ALL": "C"})

    return "nvidia_smi", query_smi(run, module.params["nvidia_smi"])


def main():
    module = AnsibleModule(
        argument_spec=dict(
            source=dict(type="str", choices=["auto", "nvml", "nvidia_smi"], default="auto"),
            nvidia_smi=dict(type="str", default="nvidia-smi"),
            expected_count=dict(type="int"),
            compute_capability=dict(type="str"),
            min_driver=dict(type="str"),
            host=dict(type="str"),
        ),
        supports_check_mode=True,
    )
    host = module.params["host"] or socket.gethostname()
    try:
        source, gpus = read_gpus(module)
    except GpuQueryError as exc:
        module.fail_json(msg="host %s: %s" % (host, exc), problems=[str(exc)])

    problems = gate_problems(
        gpus,
        expected_count=module.params["expected_count"],
        compute_capability=module.params["compute_capability"],
        min_driver=module.params["min_driver"],
    )
    result = dict(
        changed=False,
        gpus=gpus,
        gpu_count=len(gpus),
        compute_capabilities=sorted({gpu["compute_capability"] for gpu in gpus}),
        source=source,
        problems=problems,
    )
    if problems:
        module.fail_json(
            msg="host %s does not match the GPU profile: %s" % (host, "; ".join(problems)), **result
        )
    module.exit_json(**result)


if __name__ == "__main__":
    main()
