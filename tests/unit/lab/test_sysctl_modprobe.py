"""Boot-time persistence the lab emulates: sysctl.d precedence and modprobe.d options."""
import pathlib

from labhw import REPO, load_profile

from hwmodel import render  # noqa: E402  (labhw puts lab/boot on sys.path)

PROFILES = pathlib.Path(REPO) / "lab" / "profiles"


def numa(hw):
    return (hw / "proc/sys/kernel/numa_balancing").read_text().strip()


def param(hw, module, name):
    return (hw / "sys/module" / module / "parameters" / name).read_text().strip()


def test_numa_balancing_firmware_default(render_host, seed):
    assert numa(render_host(seed)) == "1"


def test_etc_file_masks_same_name_in_usr_lib(render_host, seed):
    hw = render_host(seed, files={"usr/lib/sysctl.d/60-numa.conf": "kernel.numa_balancing = 0\n",
                                  "etc/sysctl.d/60-numa.conf": "# local\nkernel.numa_balancing=1\n"})
    assert numa(hw) == "1"


def test_later_file_name_wins_across_directories(render_host, seed):
    hw = render_host(seed, files={"etc/sysctl.d/10-a.conf": "kernel.numa_balancing = 3\n",
                                  "usr/lib/sysctl.d/90-b.conf": "kernel/numa_balancing = 0\n",
                                  "run/sysctl.d/50-c.conf": "kernel.numa_balancing = 2\n"})
    assert numa(hw) == "0"


def test_sysctl_conf_applies_as_99_sysctl(render_host, seed):
    hw = render_host(seed, files={"etc/sysctl.d/50-x.conf": "kernel.numa_balancing = 2\n",
                                  "etc/sysctl.conf": "kernel.numa_balancing = 0\n"})
    assert numa(hw) == "0"
    hw = render_host(seed, files={"etc/sysctl.d/99-zz.conf": "kernel.numa_balancing = 2\n"})
    assert numa(hw) == "2"


def test_modprobe_options_read_back_like_the_kernel(render_host, seed):
    assert param(render_host(seed), "nvidia_uvm", "uvm_disable_hmm") == "N"
    hw = render_host(seed, files={"etc/modprobe.d/nvidia-uvm.conf": "options nvidia-uvm uvm_disable_hmm=1\n"})
    assert param(hw, "nvidia_uvm", "uvm_disable_hmm") == "Y"
    assert param(hw, "nvidia_uvm", "uvm_perf_prefetch_enable") == "1"


def test_later_modprobe_file_and_cmdline_order(render_host, seed):
    hw = render_host(seed, cmdline="ro nvidia_uvm.uvm_disable_hmm=1",
                     files={"etc/modprobe.d/zz.conf": "options nvidia_uvm uvm_disable_hmm=N\n"})
    assert param(hw, "nvidia_uvm", "uvm_disable_hmm") == "N"
    hw = render_host(seed, cmdline="ro nvidia_uvm.uvm_disable_hmm=1")
    assert param(hw, "nvidia_uvm", "uvm_disable_hmm") == "Y"


def test_bad_bool_value_keeps_module_from_loading(render_host, seed):
    hw = render_host(seed, files={"etc/modprobe.d/x.conf": "options nvidia_uvm uvm_disable_hmm=maybe\n"})
    assert not (hw / "sys/module/nvidia_uvm").exists()
    assert (hw / "sys/module/nvidia").exists()


def test_driver_unloaded_removes_nvidia_modules(render_host, seed):
    hw = render_host(seed, faults={"driver-unloaded": ""})
    assert not list((hw / "sys/module").glob("nvidia*"))


def test_lockdown_file(render_host, seed):
    assert (render_host(seed) / "sys/kernel/security/lockdown").read_text() == "[none] integrity confidentiality\n"
    hw = render_host(seed, faults={"lockdown": ""})
    assert (hw / "sys/kernel/security/lockdown").read_text() == "none [integrity] confidentiality\n"


def test_every_boot_gets_a_new_boot_id(render_host, seed):
    first = (render_host(seed) / "proc/sys/kernel/random/boot_id").read_text()
    assert first != (render_host(seed) / "proc/sys/kernel/random/boot_id").read_text()


def test_every_sysctl_the_profile_names_is_rendered_and_mounted(render_host, seed):
    profile = dict(seed, sysctl={**seed["sysctl"], "net.core.somaxconn": "4096"})
    hw = render_host(profile, files={"etc/sysctl.d/60-infertune.conf": "vm.swappiness = 10\n"})
    assert (hw / "proc/sys/vm/swappiness").read_text().strip() == "10"
    assert (hw / "proc/sys/net/core/somaxconn").read_text().strip() == "4096"
    assert numa(hw) == "1"
    mounted = render.mounts(profile)
    assert {"proc/sys/kernel/numa_balancing", "proc/sys/vm/swappiness", "proc/sys/net/core/somaxconn"} <= set(mounted)
    assert set(render.MOUNTS) <= set(mounted)


def test_a_sysctl_the_profile_does_not_name_is_neither_rendered_nor_mounted(render_host, seed):
    # Left to the container's read-only /proc/sys, so a write to it fails as it should.
    hw = render_host(seed, files={"etc/sysctl.d/60-x.conf": "vm.dirty_ratio = 5\n"})
    assert not (hw / "proc/sys/vm/dirty_ratio").exists()
    assert "proc/sys/vm/dirty_ratio" not in render.mounts(seed)


def test_every_profile_models_swappiness_at_the_kernel_default():
    for path in PROFILES.glob("*.yml"):
        profile = load_profile(path.stem)
        if "extends" not in profile:  # the others take their base's
            assert profile["sysctl"]["vm.swappiness"] == "60", path.name


def test_the_made_up_nvidia_parameter_is_modelled_and_read_from_modprobe_d(render_host, seed):
    assert param(render_host(seed), "nvidia", "NVreg_InfertuneTest") == "0"
    hw = render_host(seed, files={"etc/modprobe.d/infertune-nvidia.conf": "options nvidia NVreg_InfertuneTest=1\n"})
    assert param(hw, "nvidia", "NVreg_InfertuneTest") == "1"
