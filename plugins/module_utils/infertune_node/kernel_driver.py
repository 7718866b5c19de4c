"""Will the NVIDIA kernel module load on kernel release R? Checked before a reboot into R.

modprobe finds modules only under /lib/modules/<running release>, so R needs its own
nvidia.ko: built there by DKMS (`dkms status` shows `nvidia/<ver>, R, <arch>: installed`;
the file lands in updates/dkms/) or shipped prebuilt for R (Ubuntu's
linux-modules-nvidia-<branch>-server-R, kernel/nvidia-<branch>srv/). DKMS builds for R only
once R's headers are installed.
"""
import os
import re

from . import boot_kernel, sysfs

# The core module under its distribution names (Debian's DKMS package calls it nvidia-current).
CORE_MODULE = re.compile(r"^nvidia(-current)?(-open)?\.ko(\.(gz|xz|zst))?$")
# Where Ubuntu's prebuilt module packages put the module: kernel/nvidia-580srv/ for the server branch.
PREBUILT_DIR = re.compile(r"/kernel/nvidia-(\d+)(srv)?/")
# `dkms status` lines: dkms 3 `nvidia/580.95.05, 6.12.0-1-amd64, x86_64: installed`,
# dkms 2 `nvidia, 535.54.03, 6.1.0-18-amd64, x86_64: installed`, or `nvidia/580.95.05: added`.
DKMS_LINE = re.compile(r"^(?P<module>[^,/\s]+)[/,]\s*(?P<version>[^,:\s]+)"
                       r"(?:,\s*(?P<kernel>[^,:\s]+),\s*(?P<arch>[^,:\s]+))?:\s*(?P<state>.+?)\s*$")


def parse_dkms_status(text):
    """The NVIDIA entries of `dkms status` output."""
    entries = []
    for line in text.splitlines():
        match = DKMS_LINE.match(line.strip())
        if match and match.group("module").startswith("nvidia"):
            entries.append(match.groupdict())
    return entries


def module_files(root, release):
    """Paths of the core NVIDIA module under /lib/modules/RELEASE (build/ and source/ links not followed)."""
    found = []
    for directory, subdirs, files in os.walk(sysfs.path(root, "/lib/modules/%s" % release)):
        found += [os.path.join(directory, name) for name in files if CORE_MODULE.match(name)]
    return sorted("/" + os.path.relpath(path, root) for path in found)


def headers_package(release):
    return ("proxmox-headers-%s" if release.endswith("-pve") else "linux-headers-%s") % release


def dkms_status(run):
    """`dkms status` output; empty where dkms is not installed (run returns rc 127)."""
    rc, out, err = run(["dkms", "status"])
    return "" if rc == 127 else out


def owning_package(run, path):
    """The package that owns PATH per dpkg (tried as /lib and as merged /usr/lib), or None."""
    for candidate in (path, "/usr" + path):
        rc, out, err = run(["dpkg-query", "-S", candidate])
        if rc == 0 and ": " in out:
            return out.splitlines()[0].split(": ", 1)[0].split(":")[0]
    return None


def prebuilt_package(path, running):
    """Ubuntu's linux-modules-nvidia-<branch>[-server]-<release> from its directory, kernel/nvidia-<branch>[srv]/:
    its postinst links nvidia.ko there, so dpkg does not own the file."""
    match = PREBUILT_DIR.search(path)
    if not match:
        return None
    return "linux-modules-nvidia-%s%s-%s" % (match.group(1), "-server" if match.group(2) else "", running)


def check(root, release, run):
    """What was found for RELEASE, whether the NVIDIA module will load on it (`ready`) and the fix.

    run(argv) -> (rc, stdout, stderr), rc 127 for a missing command, runs dkms and dpkg-query.
    """
    entries = parse_dkms_status(dkms_status(run))
    built = [e for e in entries if e["kernel"] == release]
    installed = [e for e in built if e["state"].startswith("installed")]
    files = module_files(root, release)
    running = sysfs.read(root, "/proc/sys/kernel/osrelease")
    running_files = module_files(root, running) if running else []
    result = {
        "release": release,
        "kernel_installed": os.path.isdir(sysfs.path(root, "/lib/modules/%s" % release)),
        "dkms_managed": bool(entries),
        "dkms": entries,
        "dkms_installed": bool(installed),
        "headers_installed": os.path.exists(sysfs.path(root, "/lib/modules/%s/build" % release)),
        "headers_package": headers_package(release),
        "module_files": files,
        "running_release": running,
        "running_package": (owning_package(run, running_files[0]) or prebuilt_package(running_files[0], running)
                            if running_files and not entries else None),
        "ready": bool(files or installed),
    }
    result["reason"], result["fix"] = _verdict(result, built, entries)
    return result


def _verdict(result, built, entries):
    release, headers = result["release"], result["headers_package"]
    if result["ready"]:
        found = ", ".join(result["module_files"]) or "dkms status: installed"
        return "NVIDIA module for %s present (%s)" % (release, found), None
    if not result["kernel_installed"]:
        return ("kernel %s is not installed (no /lib/modules/%s)" % (release, release),
                "install the kernel package for %s first" % release)
    if entries:
        name = "%s/%s" % (entries[-1]["module"], entries[-1]["version"])
        if not result["headers_installed"]:
            return ("DKMS manages %s but has not built it for %s: %s is not installed" % (name, release, headers),
                    "install %s; DKMS builds the module when it arrives (or run `dkms autoinstall -k %s`)" % (
                        headers, release))
        if built:
            return ("DKMS built %s for %s but did not install it (state: %s)" % (name, release, built[0]["state"]),
                    "run `dkms install %s -k %s`" % (name, release))
        return ("DKMS has not built %s for %s although its headers are installed" % (name, release),
                "run `dkms autoinstall -k %s` and read /var/lib/dkms/%s/build/make.log" % (release, name))
    package, running = result["running_package"], result["running_release"]
    if package and running and running in package:
        wanted = "%s (the running kernel's module comes from %s)" % (package.replace(running, release), package)
    else:
        wanted = "the prebuilt NVIDIA module package for %s (Ubuntu: linux-modules-nvidia-<branch>-server-%s)" % (
            release, release)
    return ("no nvidia.ko under /lib/modules/%s and no DKMS-managed NVIDIA module" % release,
            "install %s, or install the driver with DKMS and %s" % (wanted, headers))


def default_boot(root, run):
    """{release, entry, loader, running, ready, problem}: the kernel the default boot entry starts and,
    where it is not the running one while an NVIDIA driver is installed, whether its module is there.

    Whoever moved the entry (a kernel package's hook, a distribution upgrade, a hand), a host whose
    next boot starts a kernel without the module comes back without GPUs: `problem` says so.
    """
    result = dict(boot_kernel.default_release(root, run), ready=None, problem=None)
    running = result["running"] = sysfs.read(root, "/proc/sys/kernel/osrelease")
    release = result["release"]
    # The running kernel's module is the GPU gate's to judge; no driver at all, too.
    if not release or release == running or not (module_files(root, running) or parse_dkms_status(dkms_status(run))):
        return result
    found = check(root, release, run)
    result["ready"] = found["ready"]
    if not found["ready"]:
        result["problem"] = ("the default boot entry (%s) starts kernel %s, where the NVIDIA module will not load: %s;"
                             " fix: %s, or make the running kernel %s the default again" % (
                                 result["entry"], release, found["reason"], found["fix"], running))
    return result


def target_kernel(root, release, install_headers, run):
    """{release, installed, ready, problem}: whether the rollout's module proof can pass for the target
    kernel RELEASE once the plan sends the host into a batch. `problem` is set where it cannot: the
    target is installed, is not the running kernel, an NVIDIA driver is installed, and no nvidia.ko
    will load on it, nor will one come from what the rollout does (it installs the headers DKMS builds
    from, where install_headers). Such a host would be drained and then fail, at every run: the plan
    stops it instead (a host whose target is not installed yet is proved after the install)."""
    running = sysfs.read(root, "/proc/sys/kernel/osrelease")
    result = {"release": release, "installed": os.path.isdir(sysfs.path(root, "/lib/modules/%s" % release)),
              "ready": None, "problem": None}
    if (not release or release == running or not result["installed"]
            or not (module_files(root, running) or parse_dkms_status(dkms_status(run)))):
        return result
    found = check(root, release, run)
    result["ready"] = found["ready"]
    if found["ready"] or (found["dkms_managed"] and not found["headers_installed"] and install_headers):
        return result
    result["problem"] = ("target kernel %s is installed, but the NVIDIA module will not load on it: %s; fix: %s"
                         " (the host runs %s and is not rolled out until then)" % (
                             release, found["reason"], found["fix"], running))
    return result
