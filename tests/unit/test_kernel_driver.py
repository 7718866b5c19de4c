"""Will the NVIDIA module load on the target kernel? DKMS, prebuilt packages, and the fix when neither."""
from moduleharness import run_module

from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node.kernel_driver import check, parse_dkms_status
from fakehost import write

RUNNING, TARGET = "6.8.0-60-generic", "6.8.0-65-generic"
DKMS3 = "nvidia/580.95.05, %s, x86_64: installed\n" % RUNNING


def runner(answers):
    """A command runner: argv joined by spaces -> stdout (rc 0); anything else is a missing command."""
    def run(argv):
        key = " ".join(argv)
        return (0, answers[key], "") if key in answers else (127, "", "%s: command not found" % argv[0])
    return run


def host(tmp_path, *files):
    write(tmp_path, "/proc/sys/kernel/osrelease", RUNNING + "\n")
    for rel in files:
        write(tmp_path, rel, "")
    return str(tmp_path)


def test_dkms_status_of_dkms_3_and_2():
    text = ("nvidia/580.95.05, 6.12.48+deb12-amd64, x86_64: installed\n"
            "nvidia, 535.54.03, 6.1.0-18-amd64, x86_64: installed (WARNING! Diff between built and installed module!)\n"
            "nvidia/580.95.05: added\n"
            "zfs/2.2.2, 6.1.0-18-amd64, x86_64: installed\n")
    assert [(e["version"], e["kernel"], e["state"]) for e in parse_dkms_status(text)] == [
        ("580.95.05", "6.12.48+deb12-amd64", "installed"),
        ("535.54.03", "6.1.0-18-amd64", "installed (WARNING! Diff between built and installed module!)"),
        ("580.95.05", None, "added")]


def test_found_via_dkms(tmp_path):
    root = host(tmp_path, "/lib/modules/%s/updates/dkms/nvidia.ko.zst" % TARGET,
                "/lib/modules/%s/build/Makefile" % TARGET)
    result = check(root, TARGET, runner({"dkms status": DKMS3 + "nvidia/580.95.05, %s, x86_64: installed\n" % TARGET}))
    assert result["ready"] and result["dkms_managed"] and result["dkms_installed"] and result["fix"] is None
    assert result["module_files"] == ["/lib/modules/%s/updates/dkms/nvidia.ko.zst" % TARGET]


def test_found_via_prebuilt_package(tmp_path):
    root = host(tmp_path, "/lib/modules/%s/kernel/nvidia-580srv/nvidia.ko" % TARGET)
    result = check(root, TARGET, runner({}))
    assert result["ready"] and not result["dkms_managed"]
    assert result["reason"] == "NVIDIA module for %s present (/lib/modules/%s/kernel/nvidia-580srv/nvidia.ko)" % (
        TARGET, TARGET)


def test_dkms_without_headers_names_the_header_package(tmp_path):
    root = host(tmp_path, "/lib/modules/%s/kernel/Makefile" % TARGET)
    result = check(root, TARGET, runner({"dkms status": DKMS3}))
    assert not result["ready"] and result["dkms_managed"] and not result["headers_installed"]
    assert result["fix"] == ("install linux-headers-%s; DKMS builds the module when it arrives "
                             "(or run `dkms autoinstall -k %s`)" % (TARGET, TARGET))


def test_proxmox_headers(tmp_path):
    root = host(tmp_path, "/lib/modules/6.14.11-2-pve/modules.dep")
    result = check(root, "6.14.11-2-pve", runner({"dkms status": DKMS3}))
    assert result["headers_package"] == "proxmox-headers-6.14.11-2-pve"
    assert result["fix"].startswith("install proxmox-headers-6.14.11-2-pve;")


def test_dkms_built_but_not_installed(tmp_path):
    root = host(tmp_path, "/lib/modules/%s/build/Makefile" % TARGET)
    result = check(root, TARGET, runner({"dkms status": DKMS3 + "nvidia/580.95.05, %s, x86_64: built\n" % TARGET}))
    assert result["fix"] == "run `dkms install nvidia/580.95.05 -k %s`" % TARGET


def test_dkms_with_headers_that_did_not_build(tmp_path):
    root = host(tmp_path, "/lib/modules/%s/build/Makefile" % TARGET)
    result = check(root, TARGET, runner({"dkms status": DKMS3}))
    assert result["reason"] == "DKMS has not built nvidia/580.95.05 for %s although its headers are installed" % TARGET
    assert "make.log" in result["fix"]


def test_prebuilt_missing_names_the_counterpart_package(tmp_path):
    running_ko = "/lib/modules/%s/kernel/nvidia-580srv/nvidia.ko" % RUNNING
    root = host(tmp_path, running_ko, "/lib/modules/%s/modules.dep" % TARGET)
    owner = "linux-modules-nvidia-580-server-%s" % RUNNING
    result = check(root, TARGET, runner({"dpkg-query -S /usr" + running_ko: "%s: /usr%s\n" % (owner, running_ko)}))
    assert not result["ready"] and result["running_package"] == owner
    assert result["fix"] == ("install linux-modules-nvidia-580-server-%s (the running kernel's module comes from %s), "
                             "or install the driver with DKMS and linux-headers-%s" % (TARGET, owner, TARGET))


def test_an_ubuntu_prebuilt_module_not_owned_by_dpkg_names_its_package(tmp_path):
    """Ubuntu's linux-modules-nvidia-<branch>-server-<release> links nvidia.ko in its postinst."""
    root = host(tmp_path, "/lib/modules/%s/kernel/nvidia-580srv/nvidia.ko" % RUNNING, "/lib/modules/%s/modules.dep" % TARGET)
    result = check(root, TARGET, runner({}))
    assert result["running_package"] == "linux-modules-nvidia-580-server-%s" % RUNNING
    assert result["fix"].startswith("install linux-modules-nvidia-580-server-%s (the running kernel's" % TARGET)
    write(root, "/lib/modules/%s/kernel/nvidia-580srv/nvidia.ko" % TARGET, "")
    assert check(root, TARGET, runner({}))["ready"]


def test_kernel_not_installed(tmp_path):
    result = check(host(tmp_path), TARGET, runner({}))
    assert (result["ready"], result["kernel_installed"]) == (False, False)
    assert result["fix"] == "install the kernel package for %s first" % TARGET


def test_module_fails_with_reason_and_fix(capsys):
    rc, out = run_module("nvidia_kernel_modules", {"release": "0.0.0-none", "host": "gpu-03"}, capsys)
    assert rc == 1 and out["changed"] is False
    assert out["msg"] == ("host gpu-03: the NVIDIA module will not load on kernel 0.0.0-none: kernel 0.0.0-none is "
                          "not installed (no /lib/modules/0.0.0-none); "
                          "fix: install the kernel package for 0.0.0-none first")


def test_module_reports_without_require(capsys):
    rc, out = run_module("nvidia_kernel_modules", {"release": "0.0.0-none", "require": False,
                                                   "_ansible_check_mode": True}, capsys)
    assert rc == 0 and out["ready"] is False and out["changed"] is False


def test_an_installed_target_kernel_without_its_module_is_a_plan_problem(tmp_path):
    """After a failed module proof: the target installed, no nvidia.ko for it, the running kernel's prebuilt."""
    from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node.kernel_driver import target_kernel

    root = host(tmp_path, "/lib/modules/%s/kernel/nvidia-580srv/nvidia.ko" % RUNNING,
                "/lib/modules/%s/kernel/Makefile" % TARGET)
    found = target_kernel(root, TARGET, True, runner({}))
    assert found["installed"] and found["ready"] is False
    assert found["problem"].startswith("target kernel %s is installed, but the NVIDIA module will not load on it: "
                                       "no nvidia.ko under /lib/modules/%s" % (TARGET, TARGET))
    assert "fix: install linux-modules-nvidia-580-server-%s (the running kernel's module" % TARGET in found["problem"]


def test_a_target_kernel_the_rollout_can_make_ready_is_no_plan_problem(tmp_path):
    from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node.kernel_driver import target_kernel

    dkms = runner({"dkms status": DKMS3})
    # DKMS without the target's headers: the rollout installs them, DKMS builds the module, the proof judges.
    root = host(tmp_path, "/lib/modules/%s/kernel/Makefile" % TARGET)
    assert target_kernel(root, TARGET, True, dkms)["problem"] is None
    assert "linux-headers-%s" % TARGET in target_kernel(root, TARGET, False, dkms)["problem"]
    # Not installed yet (proved after the install), the running kernel, no NVIDIA driver at all.
    assert target_kernel(host(tmp_path / "fresh"), TARGET, True, dkms)["problem"] is None
    assert target_kernel(root, RUNNING, True, dkms)["problem"] is None
    assert target_kernel(root, TARGET, True, runner({}))["problem"] is None
