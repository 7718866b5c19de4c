"""tests/verify's GPU checks: one nvidia-smi round per host answers the count, the compute
capability, persistence mode and BAR1 against memory (nvidia-smi is slow to start on a real
8-GPU host)."""
import inspect

from verifycheck import load, outcome, resolved

# The suite's own modules (verifycheck puts tests/verify on the path).
from readings import gpu_reading

UNIT = ("LoadState=loaded\nUnitFileState=enabled\nActiveState=active\n"
        "ExecStart={ path=/usr/bin/nvidia-persistenced ; argv[]=/usr/bin/nvidia-persistenced }\n")
SMI = ("0, 00000000:18:00.0, 12.0, Enabled, 97887\n"
       "1, 00000000:19:00.0, 12.0, Disabled, [N/A]\n")


def test_the_reading_parses_the_unit_and_every_gpu():
    state, rows, other = gpu_reading(UNIT + "@@\n" + SMI + "@@rc=0\n")
    assert state["UnitFileState"] == "enabled" and state["ActiveState"] == "active"
    assert rows == [("0", "00000000:18:00.0", "12.0", "Enabled", "97887"),
                    ("1", "00000000:19:00.0", "12.0", "Disabled", "[N/A]")]
    assert other == []


def test_the_reading_keeps_what_nvidia_smi_said_instead_of_gpus():
    failed = "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n@@rc=9\n"
    state, rows, other = gpu_reading(UNIT + "@@\n" + failed)
    assert rows == []
    assert other == ["NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.",
                     "exit status 9"]


def test_every_gpu_check_reads_one_nvidia_smi_round_per_host():
    """conftest's gpu_state runs GPUS once per module (the fleet keeps the answer for the session);
    the count, compute capability, persistence and BAR1 checks all take it, and GPUS asks
    nvidia-smi once."""
    conftest = load("conftest")
    commands = []

    def sh(command):
        commands.append(command)
        return UNIT + "@@\n" + SMI + "@@rc=0\n"

    output = conftest.gpu_output._get_wrapped_function()(sh, resolved({"gpu_gate_health": False}))
    state, rows, other = conftest.gpu_state._get_wrapped_function()(output)
    assert commands == [conftest.GPUS] and conftest.GPUS.count("nvidia-smi") == 1
    # With the health check, the same one nvidia-smi asks for the health fields too.
    conftest.gpu_output._get_wrapped_function()(sh, resolved({}))
    assert commands[1] == conftest.GPUS_HEALTH and conftest.GPUS_HEALTH.count("nvidia-smi") == 1
    assert len(rows) == 2
    nvidia, fabric = load("test_nvidia"), load("test_pcie_fabric")
    assert "gpu_state" in inspect.signature(nvidia.gpus).parameters
    assert all("gpu_state" in inspect.signature(check).parameters
               for check in (nvidia.test_nvidia_persistence, fabric.test_pcie_bar1))
    gpus = nvidia.gpus._get_wrapped_function()((state, rows, other))
    assert outcome(nvidia.test_gpu_count, "h1", gpus, resolved({"gpu_gate_expected_count": "2"})) == "pass"
    assert outcome(nvidia.test_nvidia_persistence, "h1", (state, rows, other), resolved({})) == (
        "h1: persistence mode: expected nvidia-persistenced.service enabled and active, Enabled on every GPU,"
        " found Disabled on GPU 1")


def test_without_systemctl_persistence_is_what_the_gpus_report():
    nvidia = load("test_nvidia")
    reading = gpu_reading("sh: 1: systemctl: not found\n@@\n" + SMI.replace("Disabled", "Enabled") + "@@rc=0\n")
    assert reading[0] == {"systemctl": "not found (this host does not run systemd)"}
    assert outcome(nvidia.test_nvidia_persistence, "h1", reading, resolved({})) == "pass"
    off = gpu_reading("sh: 1: systemctl: not found\n@@\n" + SMI + "@@rc=0\n")
    assert outcome(nvidia.test_nvidia_persistence, "h1", off, resolved({})) == (
        "h1: persistence mode: expected Enabled on every GPU, found Disabled on GPU 1")
