#!/usr/bin/python
"""Ansible module model_weights: prove a model's weights are complete on the host."""

DOCUMENTATION = r"""
module: model_weights
short_description: Check that a model directory holds complete safetensors weights
description:
  - Checks that O(path) is a directory, that its C(config.json) parses to a JSON object, and that
    every shard the loader reads is present - those named in C(model.safetensors.index.json)'s
    C(weight_map), else C(model.safetensors), else every C(*.safetensors).
  - Each shard must be exactly 8 + header length + the largest C(data_offsets) end bytes long
    (a shorter file is a truncated copy), and hold every tensor the index places in it. Only
    headers are read, so this takes milliseconds on a 400 GB checkpoint.
  - With O(manifest), every file it lists must hash to the listed sha256 (reads every byte).
  - A O(path) that is not absolute but has the form C(org/name) is a hub id, which sglang
    downloads when it starts; it is reported with RV(checked=false) and does not fail, since no
    local copy exists to check. Any other relative path fails.
  - Fails with one message naming the host, the path and each problem. Read-only; runs the same
    in check mode and never reports a change.
options:
  path:
    description: The model directory on the host (C(sglang_model_path)), or a hub id.
    type: str
    required: true
  manifest:
    description:
      - A C(sha256sum)-style file (lines C(SHA256  FILE), FILE relative to O(path)) to verify.
        A relative manifest path is taken relative to O(path).
    type: str
  tensors:
    description: Also return RV(dump) (config.json and every tensor), for the decode floor.
    type: bool
    default: false
  host:
    description: Name of the host in messages; the role passes the inventory name.
    type: str
author: infertune developers (@infertune)
"""

EXAMPLES = r"""
- name: Check the model before the host is drained
  infertune.fleet.model_weights:
    path: "{{ sglang_model_path }}"
    host: "{{ inventory_hostname }}"

- name: Read config.json and the tensor list for the decode floor
  infertune.fleet.model_weights:
    path: "{{ sglang_model_path }}"
    tensors: true
  register: weights
"""

RETURN = r"""
model_path:
  description: O(path) as given.
  returned: always
  type: str
local:
  description: False when O(path) is a hub id.
  returned: always
  type: bool
checked:
  description: Whether the weights were checked (false for a hub id).
  returned: always
  type: bool
shards:
  description: Each complete shard with its size in bytes.
  returned: always
  type: list
  elements: dict
  sample: [{name: model-00001-of-00002.safetensors, size: 4998170496}]
total_bytes:
  description: Bytes in the complete shards.
  returned: always
  type: int
manifest_files:
  description: Lines of O(manifest) checked; 0 without one.
  returned: always
  type: int
problems:
  description: Each reason the weights are not ready, naming the file.
  returned: always
  type: list
  elements: str
dump:
  description: C(model) (directory name), C(config) and C(tensors) (C([name, dtype, shape, bytes])), as
    C(python -m infertune.roofline) reads them.
  returned: when O(tensors) is true and there are no problems
  type: dict
"""

import socket

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node.model_weights import check


def main():
    module = AnsibleModule(argument_spec={"path": {"type": "str", "required": True},
                                          "manifest": {"type": "str"},
                                          "tensors": {"type": "bool", "default": False},
                                          "host": {"type": "str"}},
                           supports_check_mode=True)
    params = module.params
    host = params["host"] or socket.gethostname()
    result = check(params["path"], params["manifest"], params["tensors"])
    if result["problems"]:
        module.fail_json(msg="host %s: model weights in %s not ready: %s. Copy the model again (or finish its "
                             "download) on this host." % (host, params["path"], "; ".join(result["problems"])),
                         changed=False, **result)
    if not result["checked"]:
        result["msg"] = "host %s: %s is not a local directory (a hub id): not checked; sglang downloads it " \
                        "when it starts" % (host, params["path"])
    else:
        result["msg"] = "host %s: %d shard(s), %d bytes, complete in %s" % (
            host, len(result["shards"]), result["total_bytes"], params["path"])
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
