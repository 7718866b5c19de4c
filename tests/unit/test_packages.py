"""The plan resolves the target package with apt, read-only, and stops a host no source offers it to."""
import re
import sys
import types

import pytest
from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node.gate import Gate, TuningError
from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node.packages import apt_view, plan_package
from fakehost import write

PVE = "proxmox-kernel-6.14.11-2-pve-signed"
KERNEL_VARS = {"package": "kernel_package", "release": "kernel_release"}
# name -> (candidate version, Depends) as apt's cache of each distribution has them.
SOURCES = {
    "debian": {"linux-image-amd64": ("6.1.0-57", ["linux-image-6.1.0-57-amd64"]),
               "linux-image-6.1.0-57-amd64": ("6.1.0-57", ["kmod", "linux-base"])},
    "ubuntu": {"linux-image-generic-hwe-24.04": ("6.8.0-60.63", ["linux-image-6.8.0-60-generic", "linux-firmware"]),
               "linux-image-6.8.0-60-generic": ("6.8.0-60.63", [])},
    "proxmox": {"proxmox-default-kernel": ("1.1.0", ["proxmox-kernel-6.8"]),
                "proxmox-kernel-6.8": ("6.8.12-9", ["proxmox-kernel-6.8.12-9-pve-signed"]),
                "proxmox-kernel-6.8.12-9-pve-signed": ("6.8.12-9", [])},
}
OS_RELEASE = {"debian": 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nID=debian\nVERSION_ID="12"\n',
              "ubuntu": 'PRETTY_NAME="Ubuntu 24.04.2 LTS"\nID=ubuntu\nVERSION_ID="24.04"\n',
              "proxmox": 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nID=debian\nVERSION_ID="12"\n'}


def host(tmp_path, distro):
    write(tmp_path, "/etc/os-release", OS_RELEASE[distro])
    status = "Package: proxmox-ve\nStatus: install ok installed\nVersion: 8.4.0\n" if distro == "proxmox" else ""
    write(tmp_path, "/var/lib/dpkg/status", status)
    return str(tmp_path)


@pytest.mark.parametrize("distro, package, release, pretty", [
    ("debian", "linux-image-6.1.0-57-amd64", "6.1.0-57-amd64", "Debian GNU/Linux 12 (bookworm)"),
    ("ubuntu", "linux-image-6.8.0-60-generic", "6.8.0-60-generic", "Ubuntu 24.04.2 LTS"),
])
def test_a_package_no_source_offers_stops_the_plan_naming_the_variables(tmp_path, distro, package, release, pretty):
    root = host(tmp_path, distro)
    with pytest.raises(TuningError) as failure:
        plan_package(root, PVE, Gate(check_mode=True), SOURCES[distro].get, KERNEL_VARS)
    assert str(failure.value) == (
        "no package %s is available from this host's apt sources (%s); fix: set kernel_package: %s and "
        "kernel_release: %s (this distribution's kernel), or add the source that has %s" % (
            PVE, pretty, package, release, PVE))


def test_proxmox_suggests_its_default_kernel(tmp_path):
    root = host(tmp_path, "proxmox")
    with pytest.raises(TuningError, match=re.escape(
            "set kernel_package: proxmox-kernel-6.8.12-9-pve-signed and kernel_release: 6.8.12-9-pve")):
        plan_package(root, "proxmox-kernel-7.0.0-1-pve-signed", Gate(check_mode=True), SOURCES["proxmox"].get,
                     KERNEL_VARS)


def test_an_available_package_is_pending_with_its_candidate(tmp_path):
    root = host(tmp_path, "debian")
    result = plan_package(root, "linux-image-6.1.0-57-amd64", Gate(check_mode=True), SOURCES["debian"].get)
    assert result["changed"] and result["after"] == "6.1.0-57 (installed by apt)"


def test_without_a_distribution_kernel_the_fix_names_the_variables(tmp_path):
    root = host(tmp_path, "debian")
    with pytest.raises(TuningError, match="; fix: set kernel_package and kernel_release to a kernel package"):
        plan_package(root, PVE, Gate(check_mode=True), {}.get, KERNEL_VARS)


def test_apt_view_reads_the_candidate_and_its_depends(monkeypatch):
    """python3-apt's objects as the plan reads them: the candidate's version and its Depends."""
    package = types.SimpleNamespace(name="linux-image-6.1.0-57-amd64")
    version = types.SimpleNamespace(ver_str="6.1.0-57", depends_list={
        "Depends": [[types.SimpleNamespace(target_pkg=package)]]})

    class DepCache:
        def __init__(self, cache):
            pass

        def get_candidate_ver(self, pkg):
            return version if pkg == "meta" else None

    fake = types.SimpleNamespace(init=lambda: None, DepCache=DepCache,
                                 Cache=lambda progress: {"linux-image-amd64": "meta", "virtual": "none"})
    monkeypatch.setitem(sys.modules, "apt_pkg", fake)
    candidate = apt_view()
    assert candidate("linux-image-amd64") == ("6.1.0-57", ["linux-image-6.1.0-57-amd64"])
    assert candidate("virtual") is None and candidate("absent") is None


# apt-cache's answers on a host whose module Python has no apt bindings (a venv first on PATH).
APT_CACHE = {
    "linux-image-amd64": (0, "Package: linux-image-amd64\nVersion: 6.1.192-3\nDepends: linux-image-6.1.0-57-amd64"
                             " (= 6.1.192-3)\n\n", ""),
    "infertune-test-kernel": (0, "Package: infertune-test-kernel\nVersion: 6.12.95-1~bpo12+1\nDepends: kmod,"
                                 " linux-base (>= 4.3~) | linux-base-x\n\n", ""),
    "absent-kernel": (100, "", "N: Unable to locate package absent-kernel\nE: No packages found\n"),
}


def apt_cache(argv):
    if argv == ["apt-cache", "--version"]:
        return 0, "apt 2.6.1 (amd64)\n", ""
    assert argv[:3] == ["apt-cache", "show", "--no-all-versions"]
    return APT_CACHE[argv[3]]


def test_apt_cache_view_reads_the_candidate_and_its_depends():
    from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node.packages import apt_cache_view

    candidate = apt_cache_view(apt_cache)
    assert candidate("linux-image-amd64") == ("6.1.192-3", ["linux-image-6.1.0-57-amd64"])
    assert candidate("infertune-test-kernel") == ("6.12.95-1~bpo12+1", ["kmod", "linux-base"])
    assert candidate("absent-kernel") is None
    assert apt_cache_view(lambda argv: (127, "", "apt-cache: command not found")) is None


@pytest.fixture
def no_apt_bindings(monkeypatch):
    from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node import packages

    monkeypatch.setattr(packages, "apt_view", lambda: None)


def test_without_apt_bindings_the_plan_asks_apt_cache(no_apt_bindings):
    result = plan_package("/", "infertune-test-kernel", Gate(check_mode=True, runner=apt_cache), variables=KERNEL_VARS)
    assert result["changed"] and result["after"] == "6.12.95-1~bpo12+1 (installed by apt)"
    assert result["msg"] == "infertune-test-kernel to be installed with apt (6.12.95-1~bpo12+1)"
    with pytest.raises(TuningError, match="no package absent-kernel is available from this host's apt sources"):
        plan_package("/", "absent-kernel", Gate(check_mode=True, runner=apt_cache), variables=KERNEL_VARS)


def test_without_apt_bindings_or_apt_cache_the_plan_stops_naming_the_interpreter(no_apt_bindings):
    missing = Gate(check_mode=True, runner=lambda argv: (127, "", "%s: command not found" % argv[0]))
    with pytest.raises(TuningError) as failure:
        plan_package("/", "infertune-test-kernel", missing, variables=KERNEL_VARS)
    assert "this module's Python (%s) has no apt bindings (python3-apt)" % sys.executable in str(failure.value)
    assert "ansible_python_interpreter" in str(failure.value)
