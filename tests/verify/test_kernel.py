"""The running kernel and its command line, as the kernel and kernel_cmdline roles asked."""
from outcome import mismatch


def test_running_kernel(name, basics, want):
    running = basics["release"]
    if running != want["kernel_release"]:
        mismatch(name, "running kernel", want["kernel_release"], running)


def wanted_params(want, cpu_vendor):
    params = list(want["kernel_cmdline_params"])
    # The kernel_cmdline role adds amd_pstate=<mode> on AMD CPUs only.
    if cpu_vendor == "AuthenticAMD" and want.get("cpu_power_amd_pstate_mode"):
        params.append("amd_pstate=" + want["cpu_power_amd_pstate_mode"])
    return params


def test_kernel_cmdline(name, basics, want, cpu_vendor):
    words = basics["cmdline"]
    params = wanted_params(want, cpu_vendor)
    missing = [p for p in params if p not in words]
    removed = [w for w in words for key in want["kernel_cmdline_remove"] if w == key or w.startswith(key + "=")]
    if missing or removed:
        expected = " ".join(params) + (" without " + " ".join(want["kernel_cmdline_remove"])
                                       if want["kernel_cmdline_remove"] else "")
        found = "; ".join(filter(None, [
            "missing " + " ".join(missing) if missing else "",
            "still set " + " ".join(removed) if removed else "",
        ]))
        mismatch(name, "kernel command line", expected, f"{found} (/proc/cmdline: {' '.join(words)})")
