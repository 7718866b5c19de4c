"""Boot-time persistence the lab emulates: sysctl.d precedence and modprobe.d options."""


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
