"""The running kernel and its command line, as the kernel, kernel_cmdline and pcie roles asked."""
from expected import truthy
from infertune_node.pcie_fabric import cmdline_params
from outcome import mismatch


def test_running_kernel(name, basics, want):
    running = basics["release"]
    if running != want["kernel_release"]:
        mismatch(name, "running kernel", want["kernel_release"], running)


def wanted_params(want, cpu_vendor):
    """(parameters, keys removed) as the kernel_cmdline knob computes them for this CPU vendor."""
    params = list(want["kernel_cmdline_params"])
    # The kernel_cmdline role adds amd_pstate=<mode> on AMD CPUs only.
    if cpu_vendor == "AuthenticAMD" and want.get("cpu_power_amd_pstate_mode"):
        params.append("amd_pstate=" + want["cpu_power_amd_pstate_mode"])
    # The PCIe fabric's IOMMU and link power parameters (role pcie), by the knob's own rule.
    fabric, dropped = cmdline_params(cpu_vendor, want["pcie_iommu_mode"], truthy(want["pcie_link_pm_off"]))
    remove = list(want["kernel_cmdline_remove"])
    return params + fabric, remove + [key for key in dropped if key not in remove]


# Put there by the boot loader itself, named in no configuration.
LOADER = ("BOOT_IMAGE=", "initrd=")


def kernel_form(token):
    """A parameter as the kernel compares it: - and _ alike in its name."""
    name, sep, value = token.partition("=")
    return name.replace("-", "_") + sep + value


def unconfigured(words, boot_line):
    """(running tokens the boot loader's next boot does not give, tokens it gives that do not run):
    a parameter taken out of the configuration (infertune's or anyone's) still runs until the reboot."""
    if boot_line is None:
        return [], []
    configured, optional = boot_line[1], boot_line[2]
    running = [w for w in words if not w.startswith(LOADER)]
    have, give = set(map(kernel_form, running)), set(map(kernel_form, configured))
    return ([w for w in running if kernel_form(w) not in give and w not in optional],
            [w for w in configured if kernel_form(w) not in have and not w.startswith(LOADER)])


def test_kernel_cmdline(name, basics, want, cpu_vendor):
    words = basics["cmdline"]
    params, remove = wanted_params(want, cpu_vendor)
    missing = [p for p in params if p not in words]
    removed = [w for w in words for key in remove if w == key or w.startswith(key + "=")]
    extra, unbooted = unconfigured(words, basics.get("boot_line"))
    if missing or removed or extra or unbooted:
        expected = " ".join(params) + (" without " + " ".join(remove) if remove else "")
        source = (basics.get("boot_line") or ("the boot loader",))[0]
        found = "; ".join(filter(None, [
            "missing " + " ".join(missing) if missing else "",
            "still set " + " ".join(removed) if removed else "",
            f"running {' '.join(extra)}, which {source} no longer gives (a reboot is pending)" if extra else "",
            f"{source} gives {' '.join(unbooted)}, which does not run (a reboot is pending)" if unbooted else "",
        ]))
        mismatch(name, "kernel command line", expected, f"{found} (/proc/cmdline: {' '.join(words)})")
