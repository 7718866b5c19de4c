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


def test_kernel_cmdline(name, basics, want, cpu_vendor):
    words = basics["cmdline"]
    params, remove = wanted_params(want, cpu_vendor)
    missing = [p for p in params if p not in words]
    removed = [w for w in words for key in remove if w == key or w.startswith(key + "=")]
    if missing or removed:
        expected = " ".join(params) + (" without " + " ".join(remove) if remove else "")
        found = "; ".join(filter(None, [
            "missing " + " ".join(missing) if missing else "",
            "still set " + " ".join(removed) if removed else "",
        ]))
        mismatch(name, "kernel command line", expected, f"{found} (/proc/cmdline: {' '.join(words)})")
