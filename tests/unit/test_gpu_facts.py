"""GPU facts and gate: real nvidia-smi/NVML output captured on an H200, and 8x RTX PRO 6000 (SM120) output."""
import json
import hashlib
import os
import stat
from types import SimpleNamespace

import pytest

from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node.cuda_driver import CUDA_MIN_DRIVER, driver_floor, torch_build
from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node.gpu_query import (
    GpuQueryError,
    NvmlUnavailable,
    gate_problems,
    match_table,
    parse_smi_csv,
    query_nvml,
    query_smi,
    smi_argv,
)
from fakehost import REPO
from moduleharness import run_module

FIXTURES = REPO / "tests" / "fixtures" / "gpu"
H200_CSV = (FIXTURES / "h200-nvidia-smi.csv").read_text()
SM120_CSV = (FIXTURES / "rtxpro6000-8x-nvidia-smi.csv").read_text()
SEED_PROFILE = dict(expected_count=8, compute_capability="12.0", min_driver="570")


def test_h200_capture_parses_to_compute_9_0():
    (gpu,) = parse_smi_csv(H200_CSV)
    assert gpu == {
        "index": 0, "name": "NVIDIA H200", "uuid": "GPU-9d72ad01-818a-9018-9e51-d67dd9fefd20",
        "pci_bus_id": "00000000:00:06.0", "pci_bdf": "0000:00:06.0", "pci_device_id": "0x2335",
        "compute_capability": "9.0",
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
        "0, NVIDIA H200, GPU-1, 00000000:00:06.0, 0x233510DE, 9.0, 143771, 580.159.04, [N/A], [N/A], [N/A], [N/A], "
        "[N/A]\n")
    assert [gpu[key] for key in ("persistence_mode", "pcie_link_gen_max", "pcie_link_width_current")] == [
        None, None, None]


def test_unexpected_field_count_is_reported():
    with pytest.raises(GpuQueryError, match="printed 3 fields where 13 were asked for"):
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
    with pytest.raises(GpuQueryError, match=r"^nvidia-smi not found \(nvidia-smi: command not found\)"):
        query_smi(lambda argv: (127, "", "nvidia-smi: command not found"))


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
        return SimpleNamespace(busId=g["pci_bus_id"], pciDeviceId=int(g["pci_device_id"], 16) << 16 | 0x10DE)

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


def test_persistence_off_fails_the_gate_naming_each_gpu():
    gpus = parse_smi_csv(SM120_CSV)[:2]
    assert gate_problems(gpus) == []
    assert gate_problems(gpus, require_persistence=True) == [
        "GPU %d (NVIDIA RTX PRO 6000 Blackwell Server Edition, bus %s): persistence mode off, required on "
        "(nvidia-persistenced or nvidia-smi -pm 1)" % (gpu["index"], gpu["pci_bus_id"]) for gpu in gpus]
    assert gate_problems(parse_smi_csv(H200_CSV), require_persistence=True) == []


def test_persistence_hidden_by_a_vm_is_not_taken_for_on():
    (gpu,) = parse_smi_csv(H200_CSV)
    assert gate_problems([dict(gpu, persistence_mode=None)], require_persistence=True)[0].endswith(
        "persistence mode unknown, required on (nvidia-persistenced or nvidia-smi -pm 1)")


def torch_venv(root, text):
    version_py = root / "lib" / "python3.11" / "site-packages" / "torch" / "version.py"
    version_py.parent.mkdir(parents=True)
    version_py.write_text(text)
    return str(root)


def test_driver_floor_follows_the_cuda_release_of_the_installed_torch(tmp_path):
    # torch 2.11.0+cu130 as found on the lent H200 (tests/fixtures/gpu/h200-env.txt).
    venv = torch_venv(tmp_path / "h200", "from typing import Optional\n__version__ = '2.11.0+cu130'\n"
                                         "cuda: Optional[str] = '13.0'\ngit_version = 'x'\n")
    floor = driver_floor(venv)
    assert (floor["torch_version"], floor["cuda_version"], floor["min_driver"]) == ("2.11.0+cu130", "13.0", "580.65.06")
    assert gate_problems(parse_smi_csv(H200_CSV), driver_floor=floor) == []
    old = dict(parse_smi_csv(H200_CSV)[0], driver_version="575.57.08")
    assert gate_problems([old], driver_floor=floor) == [
        "GPU 0 (NVIDIA H200, bus 00000000:00:06.0): driver 575.57.08 found, CUDA 13.0 (torch 2.11.0+cu130 in %s) "
        "needs at least 580.65.06" % venv]


def test_no_torch_cpu_torch_or_unknown_cuda_derive_no_floor(tmp_path):
    assert driver_floor(str(tmp_path))["reason"].startswith("unknown CUDA, floor not derived: no torch/version.py")
    cpu = torch_venv(tmp_path / "cpu", "__version__ = '2.9.1+cpu'\ncuda = None\n")
    assert torch_build(cpu) == ("2.9.1+cpu", None)
    assert "CPU-only build" in driver_floor(cpu)["reason"]
    future = torch_venv(tmp_path / "future", "__version__ = '3.0'\ncuda = '14.2'\n")
    assert driver_floor(future)["min_driver"] is None and "14.2" in driver_floor(future)["reason"]
    assert list(CUDA_MIN_DRIVER) == sorted(CUDA_MIN_DRIVER, key=lambda r: tuple(map(int, r.split("."))))


def test_empty_extra_floor_is_no_floor():
    assert gate_problems(parse_smi_csv(H200_CSV), min_driver="") == []


def test_gpus_are_matched_to_the_gpu_table_by_device_id_then_name():
    import yaml
    table = yaml.safe_load((REPO / "infertune" / "data" / "gpu_specs.yml").read_text())
    (h200,) = parse_smi_csv(H200_CSV)
    assert match_table(table, h200) == "h200"
    assert match_table(table, dict(h200, name="renamed")) == "h200"
    assert match_table(table, dict(h200, pci_device_id=None, name="NVIDIA B200")) == "b200"
    assert match_table(table, dict(h200, pci_device_id="0xffff", name="unknown")) is None
    assert match_table(table, parse_smi_csv(SM120_CSV)[0]) == "rtx-pro-6000-server"


def test_module_gates_on_derived_floor_and_persistence(fake_smi, tmp_path, capsys):
    fake_smi(SM120_CSV)
    venv = torch_venv(tmp_path / "cu130", "__version__ = '2.11.0+cu130'\ncuda = '13.0'\n")
    rc, result = run_module("gpu_facts", dict(source="nvidia_smi", host="node1", venv=venv,
                                              require_persistence=True), capsys)
    assert rc == 1
    # 580.95.05 meets CUDA 13.0's floor; only persistence (off on every lab/seed GPU) fails.
    assert result["driver_floor"]["min_driver"] == "580.65.06"
    assert result["msg"].startswith("host node1 does not match the GPU profile: GPU 0 (NVIDIA RTX PRO 6000 Blackwell "
                                    "Server Edition, bus 00000000:18:00.0): persistence mode off")
    assert len(result["problems"]) == 8 and all("persistence mode off" in p for p in result["problems"])


def test_the_plan_gates_the_gpus_and_fingerprints_in_its_one_read(fake_smi, tmp_path, capsys):
    """infertune_plan runs the same gate as gpu_facts and never fails for it: the plan says."""
    fake_smi(H200_CSV)
    unit_file = tmp_path / "sglang.service"
    unit_file.write_text("[Unit]\n")
    rc, result = run_module("infertune_plan", {
        "knobs": [], "gpu_gate": dict(source="nvidia_smi", **SEED_PROFILE),
        "fingerprint": {"files": [str(unit_file), str(tmp_path / "absent")], "units": []}}, capsys)
    assert rc == 0 and result["changed"] is False
    plan = result["plan"]
    assert plan["pending"] == [] and not plan["reboot"] and not plan["drain"]
    assert plan["gpus"]["problems"][0] == "fewer GPUs than expected: found 1, expected 8"
    assert plan["fingerprint"]["files"] == {str(unit_file): {"sha1": hashlib.sha1(b"[Unit]\n").hexdigest(),
                                                             "mode": "0644"},
                                            str(tmp_path / "absent"): None}


MISSING_SMI = ("nvidia-smi not found (/opt/none/nvidia-smi: command not found): "
               "is the NVIDIA driver installed on this host?")


def test_a_missing_nvidia_smi_reads_the_same_through_both_modules(capsys):
    """gpu_facts and the plan run commands through the one runner: rc 127 and the same message."""
    gate_args = dict(source="nvidia_smi", nvidia_smi="/opt/none/nvidia-smi", **SEED_PROFILE)
    rc, result = run_module("gpu_facts", dict(gate_args, host="node1"), capsys)
    assert rc == 1 and result["msg"] == "host node1: " + MISSING_SMI and result["problems"] == [MISSING_SMI]
    rc, result = run_module("infertune_plan", {"knobs": [], "gpu_gate": gate_args}, capsys)
    assert rc == 0 and result["plan"]["gpus"]["problems"][0] == MISSING_SMI


def test_the_shared_runner_answers_127_for_a_missing_binary_and_runs_the_rest():
    from ansible_collections.infertune.fleet.plugins.module_utils.infertune_module import runner

    class Module:
        def get_bin_path(self, name):
            return "/usr/bin/" + name if name == "true" else None

        def run_command(self, argv, environ_update):
            return 0, " ".join(argv) + " " + environ_update["LC_ALL"], ""

    run = runner(Module())
    assert run(["no-such-tool", "-x"]) == (127, "", "no-such-tool: command not found")
    assert run(["true", "-x"]) == (0, "/usr/bin/true -x C", "")
