"""The lab's nvidia-smi against rendered models: formats, ids, and failure modes."""
import os
import signal
import subprocess
import time

from labhw import BOOT

TOOL = os.path.join(BOOT, "nvidia-smi")


def smi(hw, *args):
    proc = subprocess.run([TOOL, *args], capture_output=True, text=True, env={**os.environ, "LAB_HW_DIR": str(hw)})
    return proc.returncode, proc.stdout


def test_list_gpus(render_host, seed):
    rc, out = smi(render_host(seed), "-L")
    lines = out.splitlines()
    assert rc == 0 and len(lines) == 8
    assert lines[0].startswith("GPU 0: NVIDIA RTX PRO 6000 Blackwell Server Edition (UUID: GPU-")
    # A board's UUID survives reboots.
    assert smi(render_host(seed), "-L")[1] == out


def test_query_with_units_and_header(render_host, seed):
    rc, out = smi(render_host(seed), "--query-gpu=index,pci.bus_id,memory.total,utilization.gpu",
                  "--format=csv", "-i", "1")
    assert rc == 0
    assert out == ("index, pci.bus_id, memory.total [MiB], utilization.gpu [%]\n"
                   "1, 00000000:14:00.0, 97887 MiB, 0 %\n")


def test_query_noheader_nounits(render_host, xeon):
    rc, out = smi(render_host(xeon), "--query-gpu=name,compute_cap,memory.total,driver_version,"
                  "pcie.link.gen.max,pcie.link.width.current,persistence_mode", "--format=csv,noheader,nounits")
    assert rc == 0
    assert out.splitlines() == ["NVIDIA H100 80GB HBM3, 9.0, 81559, 580.95.05, 5, 16, Disabled"] * 4


def test_unknown_field(render_host, seed):
    assert smi(render_host(seed), "--query-gpu=index,bogus", "--format=csv") == (
        2, 'Field "bogus" is not a valid field to query.\n\n')


def test_driver_unloaded(render_host, seed):
    rc, out = smi(render_host(seed, faults={"driver-unloaded": ""}), "-L")
    assert rc == 9
    assert out.startswith("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.")


def test_no_matching_gpu(render_host, seed):
    assert smi(render_host(seed), "-L", "-i", "8") == (6, "No devices were found\n")


def test_lost_gpu(render_host, seed):
    rc, out = smi(render_host(seed, faults={"gpu-lost": "3"}), "--query-gpu=index", "--format=csv,noheader")
    assert rc == 15
    assert out.splitlines()[3] == ("Unable to determine the device handle for GPU 0000:34:00.0: "
                                   "GPU is lost. Reboot the system to recover this GPU")
    assert out.splitlines()[4] == "4"


def test_old_driver_is_what_nvidia_smi_and_sysfs_report(render_host, xeon):
    hw = render_host(xeon, faults={"old-driver": "570.172.08"})
    rc, out = smi(hw, "--query-gpu=driver_version", "--format=csv,noheader")
    assert rc == 0 and out.splitlines() == ["570.172.08"] * 4
    assert (hw / "sys/module/nvidia/version").read_text().strip() == "570.172.08"


PERSISTENCED = os.path.join(BOOT, "nvidia-persistenced")
PERSISTENCE = ("--query-gpu=persistence_mode", "--format=csv,noheader")


def persistenced(hw):
    return subprocess.run([PERSISTENCED, "--user", "root"], capture_output=True, text=True, timeout=10,
                          env={**os.environ, "LAB_HW_DIR": str(hw)})


def test_persistence_mode_is_on_while_the_daemon_holds_the_gpus(render_host, seed):
    hw = render_host(seed)
    assert smi(hw, *PERSISTENCE) == (0, "Disabled\n" * 8)
    # The parent returns once the daemon holds the GPUs (Type=forking): no wait for the answer.
    assert persistenced(hw).returncode == 0
    pid_file = hw / "nvidia-persistenced.pid"
    pid = int(pid_file.read_text())
    try:
        assert smi(hw, *PERSISTENCE) == (0, "Enabled\n" * 8)
    finally:
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 5
    while pid_file.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert smi(hw, *PERSISTENCE) == (0, "Disabled\n" * 8)
    # Where the lab's unit tells systemd to look for it.
    unit = open(os.path.join(BOOT, "nvidia-persistenced.service")).read()
    assert "Type=forking\nPIDFile=/run/lab-hw/nvidia-persistenced.pid\n" in unit


def test_persistenced_fails_without_the_driver(render_host, seed):
    hw = render_host(seed, faults={"driver-unloaded": ""})
    proc = persistenced(hw)
    assert proc.returncode == 1
    assert proc.stderr == "nvidia-persistenced failed to initialize. Check syslog for more details.\n"
    assert not (hw / "nvidia-persistenced.pid").exists()
