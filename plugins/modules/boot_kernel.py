#!/usr/bin/python
"""Ansible module boot_kernel: make the boot loader start a given kernel."""

DOCUMENTATION = r"""
module: boot_kernel
short_description: Boot a given installed kernel release by default
description:
  - Fails when /boot/vmlinuz-RELEASE is absent (install the kernel package first).
  - With GRUB, writes /etc/default/grub.d/50-infertune-default.cfg with C(GRUB_DEFAULT=saved), runs update-grub when
    that drop-in changed or grub.cfg has no entry for the release, then C(grub-set-default "SUBMENU>ENTRY") with
    the ids read from grub.cfg when grubenv's saved_entry differs.
  - On Proxmox (proxmox-boot-tool present) runs C(proxmox-boot-tool kernel pin RELEASE) instead.
  - Without O(release), pins the running kernel the same way and reads the default entry back (it fails when
    the entry does not boot the running kernel). The kernel role does this before it installs a kernel package,
    whose hooks regenerate the menu (C(zz-update-grub), C(proxmox-boot-tool refresh)); with C(GRUB_DEFAULT=0) the
    new kernel would otherwise boot next, before its NVIDIA module is proved.
  - The first change it makes records the default entry the host had before (as the O(knob) catalog knob's
    record under C(/var/lib/infertune/original)), so that C(infertune.fleet.revert) puts it back.
options:
  release:
    description: Kernel release as in C(uname -r), e.g. C(6.12.95+deb12-amd64); omitted, the running kernel.
    type: str
  knob:
    description: The catalog knob whose record of the host's original default entry this keeps.
    type: str
    default: boot_kernel
author: infertune developers (@infertune)
"""

EXAMPLES = r"""
- name: Boot the backports kernel
  infertune.fleet.boot_kernel:
    release: 6.12.95+deb12-amd64

- name: Keep booting the running kernel whatever a kernel package's hooks do
  infertune.fleet.boot_kernel: {}
"""

RETURN = r"""
before:
  description: Default entry before (grubenv saved_entry, or the Proxmox pinned kernel).
  returned: always
  type: str
after:
  description: Default entry after.
  returned: always
  type: str
  sample: gnulinux-advanced-UUID>gnulinux-6.12.95+deb12-amd64-advanced-UUID
loader:
  description: C(grub) or C(proxmox-boot-tool).
  returned: always
  type: str
running:
  description: Running kernel release (/proc/sys/kernel/osrelease).
  returned: always
  type: str
default_release:
  description: Without O(release), the kernel the default entry boots, read back after the change.
  returned: when release is omitted
  type: str
boot_kernel_reboot_required:
  description: True when the running kernel is not the wanted release.
  returned: always
  type: bool
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.infertune.fleet.plugins.module_utils.infertune_module import run_knob
from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node import original
from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node.boot_kernel import (
    KIND, apply_boot_kernel, pin_running)


def main():
    module = AnsibleModule(argument_spec={"release": {"type": "str"}, "knob": {"type": "str", "default": "boot_kernel"}},
                           supports_check_mode=True)
    release, knob = module.params["release"], module.params["knob"]

    def pin(root, gate):
        # The record's arguments: none that the boot entry's original reads.
        return original.keep(root, knob, KIND, {"release": release}, gate,
                             lambda: pin_running(root, gate) if release is None else apply_boot_kernel(root, release, gate))
    run_knob(module, pin)


if __name__ == "__main__":
    main()
