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
options:
  release:
    description: Kernel release as in C(uname -r), e.g. C(6.12.95+deb12-amd64); omitted, the running kernel.
    type: str
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
from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node.boot_kernel import apply_boot_kernel, pin_running


def main():
    module = AnsibleModule(argument_spec={"release": {"type": "str"}}, supports_check_mode=True)
    if module.params["release"] is None:
        run_knob(module, pin_running)
    else:
        run_knob(module, apply_boot_kernel, module.params["release"])


if __name__ == "__main__":
    main()
