#!/usr/bin/python
"""Ansible module nvidia_kernel_modules: will the NVIDIA kernel module load on a kernel release?"""

DOCUMENTATION = r"""
module: nvidia_kernel_modules
short_description: Check that the NVIDIA kernel module exists for a kernel release before booting it
description:
  - modprobe loads modules only from C(/lib/modules/<running release>), so a kernel without its own
    C(nvidia.ko) boots with no GPUs. This module proves, before a reboot, that O(release) has one.
  - Where DKMS manages the driver (C(dkms status) lists an NVIDIA module), it reads whether DKMS built
    and installed it for O(release); DKMS builds it only once O(release)'s headers are installed
    (RV(headers_package)).
  - It also looks for the module file itself anywhere under C(/lib/modules/<release>), C(updates/dkms/)
    from DKMS, C(kernel/nvidia-<branch>/) from a prebuilt package such as Ubuntu's
    C(linux-modules-nvidia-<branch>-server-<release>) (C(kernel/nvidia-<branch>srv/)). Either one makes RV(ready) true.
  - When the module is missing it fails (with O(require)) naming the host, the release, what was found
    and the fix, e.g. the header package to install. Read-only; runs the same in check mode.
requirements: [dkms and dpkg-query are used when present]
options:
  release:
    description: The kernel release to be booted, as C(/proc/sys/kernel/osrelease) will show it.
    type: str
    required: true
  require:
    description: Fail when the module will not load on O(release); false only reports.
    type: bool
    default: true
  host:
    description: Name of the host in messages; the role passes the inventory name.
    type: str
author: infertune developers (@infertune)
"""

EXAMPLES = r"""
- name: Prove the NVIDIA module will load on the target kernel
  infertune.fleet.nvidia_kernel_modules:
    release: "{{ kernel_release }}"
    host: "{{ inventory_hostname }}"
"""

RETURN = r"""
release:
  description: O(release).
  returned: always
  type: str
ready:
  description: Whether O(release) has the NVIDIA module (file found, or DKMS reports it installed).
  returned: always
  type: bool
reason:
  description: One sentence on what was found.
  returned: always
  type: str
fix:
  description: What to do when RV(ready) is false, else null.
  returned: always
  type: str
kernel_installed:
  description: Whether C(/lib/modules/<release>) exists.
  returned: always
  type: bool
dkms_managed:
  description: Whether C(dkms status) lists an NVIDIA module (for any kernel).
  returned: always
  type: bool
dkms:
  description: The NVIDIA entries of C(dkms status) (module, version, kernel, arch, state).
  returned: always
  type: list
  elements: dict
  sample: [{module: nvidia, version: 580.95.05, kernel: 6.12.48+deb12-amd64, arch: x86_64, state: installed}]
dkms_installed:
  description: Whether DKMS reports the module installed for O(release).
  returned: always
  type: bool
headers_installed:
  description: Whether O(release)'s headers are installed (C(/lib/modules/<release>/build) exists).
  returned: always
  type: bool
headers_package:
  description: >-
    The package with O(release)'s headers, C(linux-headers-<release>) (C(proxmox-headers-<release>) on Proxmox).
  returned: always
  type: str
module_files:
  description: The NVIDIA core module files under C(/lib/modules/<release>).
  returned: always
  type: list
  elements: str
running_release:
  description: The running kernel release.
  returned: always
  type: str
running_package:
  description: The package of the running kernel's NVIDIA module, when the driver is not DKMS-managed (its dpkg
    owner, or Ubuntu's C(linux-modules-nvidia-<branch>[-server]-<release>) named by the module's directory).
  returned: always
  type: str
"""

import socket

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node.kernel_driver import check


def main():
    module = AnsibleModule(argument_spec={"release": {"type": "str", "required": True},
                                          "require": {"type": "bool", "default": True},
                                          "host": {"type": "str"}},
                           supports_check_mode=True)
    params = module.params
    host = params["host"] or socket.gethostname()

    def run(argv):
        executable = module.get_bin_path(argv[0])
        if executable is None:
            return 127, "", "%s: command not found" % argv[0]
        return module.run_command([executable] + argv[1:], environ_update={"LC_ALL": "C"})

    result = check("/", params["release"], run)
    if not result["ready"] and params["require"]:
        module.fail_json(msg="host %s: the NVIDIA module will not load on kernel %s: %s; fix: %s" % (
            host, params["release"], result["reason"], result["fix"]), changed=False, **result)
    result["msg"] = "host %s: %s" % (host, result["reason"])
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
