"""Whether a Debian package is installed (dpkg's status file) and, when not, whether apt can
install it from the host's own sources (its candidate, read with python3-apt, or `apt-cache`
where the module's Python has no apt bindings). Read-only.

Installing runs through apt (the kernel role); the plan only needs to know, and a target
package that no source offers (a Proxmox kernel on a Debian host) stops the host in the plan.
"""
import re
import sys

from . import sysfs
from .gate import TuningError
from .kind import REQUIRED, Kind

STATUS = "/var/lib/dpkg/status"
# A distribution's kernel metapackages, first found first: their dependency chain ends at a
# package of one kernel release (linux-image-<release>, proxmox-kernel-<release>-signed).
KERNEL_META = {"proxmox": ["proxmox-default-kernel"],
               "ubuntu": ["linux-image-generic-hwe-{version}", "linux-image-generic"],
               "debian": ["linux-image-amd64"]}
KERNEL_PACKAGE = re.compile(r"^(?:linux-image-|proxmox-kernel-)(?P<release>\d+\.\d+[\d.]*-\S+?)(?:-signed)?$")


def installed_version(root, name):
    """The installed version of package name, or None."""
    text = sysfs.read(root, STATUS) or ""
    for stanza in text.split("\n\n"):
        fields = dict(line.split(": ", 1) for line in stanza.splitlines() if ": " in line and line[0] != " ")
        if fields.get("Package") == name and fields.get("Status", "").endswith(" installed"):
            return fields.get("Version")
    return None


def apt_view():
    """candidate(name) -> (version, [dependency names]) or None, from apt's cache of the host's
    sources (python3-apt, read-only); None where python3-apt is missing."""
    try:
        import apt_pkg
    except ImportError:
        return None
    apt_pkg.init()
    cache = apt_pkg.Cache(None)
    depcache = apt_pkg.DepCache(cache)

    def candidate(name):
        if name not in cache:
            return None
        version = depcache.get_candidate_ver(cache[name])
        if version is None:
            return None
        groups = version.depends_list.get("Depends", [])
        return version.ver_str, [group[0].target_pkg.name for group in groups if group]
    return candidate


def apt_cache_view(run):
    """candidate(name) as apt_view's, from `apt-cache show --no-all-versions` (the candidate's record):
    every Debian and Ubuntu host has apt-cache, whatever Python runs the module. None where apt-cache
    is not found."""
    def candidate(name):
        rc, out, err = run(["apt-cache", "show", "--no-all-versions", name])
        if rc != 0:
            if "No packages found" in err or "Unable to locate" in err or not err.strip():
                return None
            raise TuningError("apt-cache show %s failed (rc=%d): %s" % (name, rc, err.strip()))
        fields = dict(line.split(": ", 1) for line in out.split("\n\n")[0].splitlines() if ": " in line)
        depends = [group.split("|")[0].split("(")[0].strip() for group in fields.get("Depends", "").split(",")]
        return fields.get("Version"), [name for name in depends if name]
    rc, out, err = run(["apt-cache", "--version"])
    return None if rc == 127 else candidate


def no_apt(name):
    """Why a package's candidate could not be asked, with the fix."""
    return ("cannot tell whether apt can install %s: this module's Python (%s) has no apt bindings (python3-apt)"
            " and apt-cache is not found; fix: install python3-apt, or set ansible_python_interpreter to the"
            " system's /usr/bin/python3" % (name, sys.executable))


def distribution(root):
    """(id, version id, pretty name) from os-release; id is proxmox where Proxmox VE is installed."""
    text = sysfs.read(root, "/etc/os-release") or ""
    fields = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
    values = {key: value.strip().strip('"') for key, value in fields.items()}
    ident = "proxmox" if installed_version(root, "proxmox-ve") else values.get("ID", "")
    return ident, values.get("VERSION_ID", ""), values.get("PRETTY_NAME", ident or "unknown")


def suggested_kernel(root, candidate):
    """(package, release) of the newest kernel the distribution's metapackage installs, or None."""
    ident, version, pretty = distribution(root)
    for meta in KERNEL_META.get(ident, []):
        name, seen = meta.format(version=version), set()
        while name and name not in seen:
            seen.add(name)
            match = KERNEL_PACKAGE.match(name)
            if match:
                return name, match.group("release")
            found = candidate(name)
            name = next((d for d in found[1] if d.startswith(("linux-image-", "proxmox-kernel-"))), None) if found else None
    return None


def _unavailable(root, name, candidate, variables):
    ident, version, pretty = distribution(root)
    msg = "no package %s is available from this host's apt sources (%s)" % (name, pretty)
    if not variables:
        return msg + "; fix: add the source that has it, or run apt-get update if it was just added"
    package, release = variables.get("package"), variables.get("release")
    suggestion = suggested_kernel(root, candidate)
    if suggestion:
        return msg + "; fix: set %s: %s and %s: %s (this distribution's kernel), or add the source that has %s" % (
            package, suggestion[0], release, suggestion[1], name)
    return msg + "; fix: set %s and %s to a kernel package of this distribution and its release" % (package, release)


def plan_package(root, name, gate, candidate=None, variables=None):
    """The package's state; when not installed, apt's candidate for it (candidate(name), default from
    python3-apt on the host). variables names the package and release variables for the fix."""
    version = installed_version(root, name)
    if version is None and not gate.check_mode:
        raise TuningError("%s is not installed: install it with apt (the kernel role does)" % name)
    found = None
    if version is None:
        if candidate is None and root in ("/", ""):
            candidate = apt_view() or apt_cache_view(gate.runner)
            if candidate is None:
                raise TuningError(no_apt(name))
        if candidate is not None:
            found = candidate(name)
            if found is None:
                raise TuningError(_unavailable(root, name, candidate, variables))
    after = version or ("%s (installed by apt)" % found[0] if found else "(installed by apt)")
    return {"changed": version is None, "before": version, "after": after,
            "msg": "%s %s" % (name, "installed (%s)" % version if version else
                              "to be installed with apt (%s)" % found[0] if found else "to be installed with apt")}


def revert_package(root, name):
    """No change: a revert removes no package (the kernel the host may run, its modules), and says so."""
    version = installed_version(root, name)
    return {"changed": False, "before": version, "after": version,
            "msg": ("%s %s left installed: revert removes no package (apt remove it once nothing boots it)" % (name, version)
                    if version else "%s is not installed" % name)}


KIND = Kind("deb_package", lambda root, a, gate: plan_package(root, a["name"], gate, variables=a["variables"]),
            {"name": (str, REQUIRED), "variables": (dict, None)}, nothing="not installed",
            revert=lambda root, a, saved, gate: revert_package(root, a["name"]))
