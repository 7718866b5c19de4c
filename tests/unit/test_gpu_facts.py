"""GPU facts and gate: real nvidia-smi/NVML output captured on an H200, and 8x RTX PRO 6000 (SM120) output."""
import importlib.util
import json
import os
import stat
from types import SimpleNamespace

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible.module_utils.infertune_node.gpu_query import (
    GpuQueryError,
    NvmlUnavailable,
    gate_problems,
    parse_smi_csv,
    query_nvml,
    query_smi,
    smi_argv,
)
from fakehost import REPO

FIXTURES = REPO / "tests" / "fixtures" / "gpu"
H200_CSV = (FIXTURES / "h200-nvidia-smi.csv").read_text()
SM120_CSV = (FIXTURES / "rtxpro6000-8x-nvidia-smi.csv").read_text()
SEED_PROFILE = dict(expected_count=8, compute_capability="12.0", min_driver="570")


def test_h200_capture_parses_to_compute_9_0():
    (gpu,) = parse_smi_csv(H200_CSV)
    assert gpu == {
        "index": 0, "name": "NVIDIA H200", "uuid": "GPU-958065fc-0ea3-dee7-2b26-574ef17a01de",
        "pci_bus_id": "00000000:00:06.0", "pci_bdf": "0000:00:06.0", "compute_capability": "9.0",
        "memory_total_mib": 143771, "driver_version": "580.159.04", "persistence_mode": True,
        "pcie_link_gen_current": 5, "pcie_link_gen_max": 5, "pcie_link_width_current": 16,
        "pcie_link_width_max": 16,
    }


def test_h200_is_rejected_by_the_sm120_profile_naming_gpu_and_bus():
    problems = gate_problems(parse_smi_csv(H200_CSV), **SEED_PROFILE)
    assert problems == [
        "fewer GPUs than expected: found 1, expected 8",
        "GPU 0 (NVIDIA H200, bus 00000000:00:06.0): compute capability 9.0 found, 12.0 expected",
    ]


def test_h200_passes_a_profile_written_for_it():
    assert gate_problems(parse_smi_csv(H200_CSV), expected_count=1, compute_capability="9.0",
                         min_driver="580.159.04") == []


def test_sm120_host_passes_the_seed_profile():
    gpus = parse_smi_csv(SM120_CSV)
    assert [gpu["pci_bdf"] for gpu in gpus] == [
        "0000:18:00.0", "0000:2a:00.0", "0000:3c:00.0", "0000:4e:00.0",
        "0000:98:00.0", "0000:aa:00.0", "0000:bc:00.0", "0000:ce:00.0"]
    assert {gpu["compute_capability"] for gpu in gpus} == {"12.0"}
    assert gate_problems(gpus, **SEED_PROFILE) == []


def test_driver_versions_compare_as_numbers_not_text():
    gpus = parse_smi_csv(SM120_CSV)[:1]
    # "95" sorts after "159" as text; as numbers 580.95 is older than 580.159.
    assert gate_problems(gpus, min_driver="580.159") == [
        "GPU 0 (NVIDIA RTX PRO 6000 Blackwell Server Edition, bus 00000000:18:00.0): "
        "driver 580.95.05 found, at least 580.159 expected"]


def test_more_gpus_than_expected_is_a_problem_too():
    assert gate_problems(parse_smi_csv(SM120_CSV), expected_count=4) == [
        "more GPUs than expected: found 8, expected 4"]


def test_values_a_vm_hides_become_none():
    (gpu,) = parse_smi_csv(
        "0, NVIDIA H200, GPU-1, 00000000:00:06.0, 9.0, 143771, 580.159.04, [N/A], [N/A], [N/A], [N/A], [N/A]\n")
    assert [gpu[key] for key in ("persistence_mode", "pcie_link_gen_max", "pcie_link_width_current")] == [
        None, None, None]


def test_unexpected_field_count_is_reported():
    with pytest.raises(GpuQueryError, match="printed 3 fields where 12 were asked for"):
        parse_smi_csv("0, NVIDIA H200, GPU-1\n")


def test_query_smi_asks_for_every_field_without_units():
    seen = []

    def run(argv):
        seen.append(argv)
        return 0, H200_CSV, ""

    assert query_smi(run, "/usr/bin/nvidia-smi")[0]["compute_capability"] == "9.0"
    assert seen == [smi_argv("/usr/bin/nvidia-smi")]
    assert seen[0][-1] == "--format=csv,noheader,nounits"


def test_missing_nvidia_smi_is_named():
    def run(argv):
        raise OSError("nvidia-smi is not on PATH")

    with pytest.raises(GpuQueryError, match="nvidia-smi not found"):
        query_smi(run)


def test_driver_not_loaded_is_named():
    text = ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
            "Make sure that the latest NVIDIA driver is installed and running.")
    with pytest.raises(GpuQueryError, match="^NVIDIA driver not loaded"):
        query_smi(lambda argv: (9, text, ""))


def test_no_devices_means_zero_gpus_and_the_gate_says_fewer():
    gpus = query_smi(lambda argv: (6, "No devices were found", ""))
    assert gpus == []
    assert gate_problems(gpus, expected_count=8) == ["fewer GPUs than expected: found 0, expected 8"]


class FakeNvml:
    """pynvml stand-in answering with the values NVML gave on the lent H200."""

    class NVMLError(Exception):
        pass

    def __init__(self, gpus, init_error=None):
        self.gpus, self.init_error, self.shutdown = gpus, init_error, False

    def nvmlInit(self):
        if self.init_error:
            raise self.NVMLError(self.init_error)

    def nvmlShutdown(self):
        self.shutdown = True

    def nvmlSystemGetDriverVersion(self):
        return self.gpus[0]["driver_version"]

    def nvmlDeviceGetCount(self):
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index):
        return self.gpus[index]

    def nvmlDeviceGetName(self, g):
        return g["name"].encode()  # older nvidia-ml-py returns bytes

    def nvmlDeviceGetUUID(self, g):
        return g["uuid"]

    def nvmlDeviceGetPciInfo(self, g):
        return SimpleNamespace(busId=g["pci_bus_id"])

    def nvmlDeviceGetCudaComputeCapability(self, g):
        return tuple(int(part) for part in g["compute_capability"].split("."))

    def nvmlDeviceGetMemoryInfo(self, g):
        return SimpleNamespace(total=g["memory_total_mib"] * 1024 * 1024)

    def nvmlDeviceGetPersistenceMode(self, g):
        return 1 if g["persistence_mode"] else 0

    def nvmlDeviceGetCurrPcieLinkGeneration(self, g):
        return g["pcie_link_gen_current"]

    def nvmlDeviceGetMaxPcieLinkGeneration(self, g):
        return g["pcie_link_gen_max"]

    def nvmlDeviceGetCurrPcieLinkWidth(self, g):
        raise self.NVMLError("Not Supported")

    def nvmlDeviceGetMaxPcieLinkWidth(self, g):
        return g["pcie_link_width_max"]


def test_nvml_and_nvidia_smi_agree_on_the_h200():
    captured = json.loads((FIXTURES / "h200-nvml-gpus.json").read_text())
    nvml = FakeNvml(captured)
    (gpu,) = query_nvml(nvml)
    (smi,) = parse_smi_csv(H200_CSV)
    assert gpu == dict(smi, pcie_link_width_current=None)
    assert nvml.shutdown


def test_nvml_driver_not_loaded_is_named():
    with pytest.raises(GpuQueryError, match="^NVIDIA driver not loaded"):
        query_nvml(FakeNvml([], init_error="Driver Not Loaded"))


def test_nvml_without_its_library_lets_the_module_fall_back():
    with pytest.raises(NvmlUnavailable):
        query_nvml(FakeNvml([], init_error="NVML Shared Library Not Found"))


def load_module(name):
    spec = importlib.util.spec_from_file_location(name, REPO / "library" / (name + ".py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_module(name, args, capsys):
    module = load_module(name)
    with patch_module_args(args), pytest.raises(SystemExit) as exit_info:
        module.main()
    return exit_info.value.code, json.loads(capsys.readouterr().out)


@pytest.fixture
def fake_smi(tmp_path, monkeypatch):
    """nvidia-smi on PATH that prints a fixture; returns a function choosing which one."""
    def use(csv_text):
        data = tmp_path / "answer.csv"
        data.write_text(csv_text)
        script = tmp_path / "nvidia-smi"
        script.write_text("#!/bin/sh\ncat %s\n" % data)
        script.chmod(script.stat().st_mode | stat.S_IXUSR)
        monkeypatch.setenv("PATH", "%s:%s" % (tmp_path, os.environ["PATH"]))
    return use


def test_module_fails_the_h200_naming_host_gpu_and_bus(fake_smi, capsys):
    fake_smi(H200_CSV)
    rc, result = run_module("gpu_facts", dict(source="nvidia_smi", host="h200-lent", **SEED_PROFILE), capsys)
    assert rc == 1
    assert result["failed"] and not result["changed"]
    assert result["msg"] == (
        "host h200-lent does not match the GPU profile: fewer GPUs than expected: found 1, expected 8; "
        "GPU 0 (NVIDIA H200, bus 00000000:00:06.0): compute capability 9.0 found, 12.0 expected")


def test_module_reports_the_sm120_host(fake_smi, capsys):
    fake_smi(SM120_CSV)
    rc, result = run_module("gpu_facts", dict(source="nvidia_smi", host="node1", **SEED_PROFILE), capsys)
    assert rc == 0
    assert (result["gpu_count"], result["compute_capabilities"], result["source"]) == (8, ["12.0"], "nvidia_smi")
    assert result["changed"] is False and result["problems"] == []
