from ansible.module_utils.infertune_node.facts import collect
from fakehost import GPU, pci_tree, write


def test_facts_of_a_full_host(amd128):
    pci_tree(amd128)
    write(amd128, "/sys/module/nvidia_uvm/parameters/uvm_disable_hmm", "N\n")
    write(amd128, "/sys/module/snd_hda_intel/parameters/power_save", "1\n")
    hw = collect(amd128)
    assert hw["cpu"] == {"vendor": "AuthenticAMD", "family": 26, "model_name": "AMD EPYC 9555 64-Core Processor",
                         "sockets": 2, "count": 128, "numa_nodes": 2}
    assert hw["cpufreq"]["driver"] == "amd-pstate-epp"
    assert hw["cpufreq"]["governors_available"] == ["performance", "powersave"]
    assert hw["cpufreq"]["amd_pstate_status"] == "active"
    assert hw["cpuidle"]["driver"] == "acpi_idle"
    assert hw["cpuidle"]["states"] == [{"name": "POLL", "latency": 0}, {"name": "C1", "latency": 1},
                                       {"name": "C2", "latency": 400}]
    assert hw["kernel"]["release"] == "6.1.0-18-amd64"
    assert hw["lockdown"] == "none"
    assert hw["numa_balancing"] == 1
    assert hw["pci_gpus"] == [{"bdf": GPU, "vendor": "0x10de", "device": "0x2bb5", "class": "0x0300",
                               "max_read_request": 512}]
    assert hw["module_params"] == {"nvidia_uvm": {"uvm_disable_hmm": "N"}}


def test_facts_of_an_empty_host_are_null_not_a_crash(tmp_path):
    hw = collect(str(tmp_path))
    assert hw["cpu"]["count"] is None and hw["cpu"]["vendor"] is None
    assert hw["cpufreq"]["driver"] is None and hw["cpufreq"]["governors_available"] == []
    assert hw["cpuidle"] == {"driver": None, "states": []}
    assert hw["lockdown"] is None and hw["numa_balancing"] is None
    assert hw["pci_gpus"] == [] and hw["module_params"] == {}


def test_gpu_with_unreadable_config_reports_null_mrrs(amd128):
    pci_tree(amd128, gpu_config=b"\xff" * 256)
    assert collect(amd128)["pci_gpus"][0]["max_read_request"] is None
