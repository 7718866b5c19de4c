"""The lab's GPU health at the lowest level: its nvidia-smi answers the plan's health query as each
profile's card would ([N/A] where the card lacks the feature, the H100 profile a real H100's
answers), the health faults act at once (a remap pending until the next boot, a failure and a
hardware slowdown while set, a hanging nvidia-smi), and the kernel log holds the driver's Xid lines."""
import os
import subprocess
import sys
import time

import pytest
from labhw import BOOT, REPO

sys.path.insert(0, os.path.join(REPO, "plugins", "module_utils"))
sys.path.insert(0, os.path.join(REPO, "lab"))
from infertune_node import gpu_health, timed  # noqa: E402
from infra import hosts  # noqa: E402

TOOL = os.path.join(BOOT, "nvidia-smi")
LIMITS = {"sram_uncorrectable_max": 0, "remap_uncorrectable_max": 512}
REAL = (REPO + "/tests/fixtures/gpu/h100-health-query.csv")


def reader(hw, faults, **env):
    """The plan's health read against the stand-in, the host's root being a tree with its kernel log."""
    environ = {**os.environ, "LAB_HW_DIR": str(hw), "LAB_FAULTS_DIR": str(faults), **env}

    def run(argv):
        return timed.run([TOOL] + argv[1:], 10, env=environ)
    root = hw.parent / ("root-" + hw.name)
    (root / "dev").mkdir(parents=True, exist_ok=True)
    (root / "proc/sys/kernel/random").mkdir(parents=True, exist_ok=True)
    (root / "dev/kmsg").write_text((hw / "kmsg").read_text())
    (root / "proc/sys/kernel/random/boot_id").write_text((hw / "proc/sys/kernel/random/boot_id").read_text())
    return gpu_health.read(run, root=str(root), **LIMITS)


def test_the_h100_profile_answers_what_a_real_h100_answers(render_host, xeon, tmp_path):
    hw = render_host(xeon)
    fields = [f for k, f in gpu_health.HEALTH_FIELDS if k != "serial"]
    lab = subprocess.run([TOOL, "--query-gpu=" + ",".join(fields), "--format=csv,noheader,nounits", "-i", "0"],
                         capture_output=True, text=True, check=True,
                         env={**os.environ, "LAB_HW_DIR": str(hw), "LAB_FAULTS_DIR": str(tmp_path)}).stdout
    real = [v.strip() for v in open(REAL).read().split(",")]
    assert lab.strip().split(", ") == real[len(real) - len(fields):]
    gpus, health = reader(hw, tmp_path)
    assert [g["class"] for g in health["gpus"]] == ["ok"] * 4 and health["kernel_log"] == ""
    assert health["gpus"][0]["not_applicable"] == ["pcie_replays", "retired_pages"]
    assert health["gpus"][0]["serial"].startswith("1650")


def test_the_rtx_pro_profiles_answer_not_applicable_for_row_remapping(render_host, seed, tmp_path):
    _, health = reader(render_host(seed), tmp_path)
    assert len(health["gpus"]) == 8 and {g["class"] for g in health["gpus"]} == {"ok"}
    assert "remap" in health["gpus"][0]["not_applicable"]


def set_fault(faults, name, value, mtime=None):
    path = faults / name
    path.write_text(value + "\n")
    if mtime is not None:
        os.utime(path, (mtime, mtime))


def test_a_remap_pending_acts_at_once_and_the_next_boot_clears_it(render_host, xeon, tmp_path):
    hw = render_host(xeon)
    set_fault(tmp_path, "remap-pending", "3")
    _, health = reader(hw, tmp_path)
    assert [g["class"] for g in health["gpus"]] == ["ok", "ok", "ok", "reset"]
    assert health["gpus"][3]["flags"]["remap_pending"] == 1
    # Set before this boot: the boot was the reset that applied it.
    set_fault(tmp_path, "remap-pending", "3", mtime=time.time() - 3600)
    _, health = reader(hw, tmp_path)
    assert [g["class"] for g in health["gpus"]] == ["ok"] * 4


def test_a_remap_failure_and_a_hardware_slowdown_last_while_set(render_host, xeon, tmp_path):
    hw = render_host(xeon)
    set_fault(tmp_path, "remap-failure", "1", mtime=time.time() - 3600)
    set_fault(tmp_path, "hw-slowdown", "2")
    _, health = reader(hw, tmp_path)
    assert [g["class"] for g in health["gpus"]] == ["ok", "rma", "warn", "ok"]
    assert health["gpus"][2]["clock_events"] == ["hw_slowdown", "hw_thermal_slowdown"]


def test_an_xid_fault_is_in_the_kernel_log_of_every_boot_as_the_driver_writes_it(render_host, xeon, tmp_path):
    hw = render_host(xeon, faults={"xid": "79 2"})
    lines = (hw / "kmsg").read_text().splitlines()
    assert lines[0].startswith("6,0,") and "NVRM: loading NVIDIA UNIX Open Kernel Module" in lines[0]
    assert lines[1].startswith("4,1,") and lines[1].endswith(
        ";NVRM: Xid (PCI:0000:9b:00): 79, pid=4242, name=python3, GPU has fallen off the bus.")
    _, health = reader(hw, tmp_path)
    assert health["gpus"][2]["xids"] == {"79": 1} and health["gpus"][2]["class"] == "reset"
    # One that happens while the host runs: the driver appends it.
    subprocess.run([os.path.join(BOOT, "lab-kmsg"), "xid", "119", "0"], check=True,
                   env={**os.environ, "LAB_HW_DIR": str(hw)})
    assert "NVRM: Xid (PCI:0000:19:00): 119, pid=4242" in (hw / "kmsg").read_text().splitlines()[2]


def test_a_hanging_nvidia_smi_never_answers_and_is_not_ended_by_a_kill(render_host, seed, tmp_path):
    hw = render_host(seed)
    set_fault(tmp_path, "nvidia-smi-hang", "")
    with pytest.raises(gpu_health.DriverUnresponsive, match="did not answer within 10 s"):
        reader(hw, tmp_path, LAB_HANG_SECONDS="15")


@pytest.mark.parametrize("name, value, profile, message", [
    ("remap-pending", "3", "seed-epyc-rtxpro6000", r"answer \[N/A\] for row remapping"),
    ("remap-pending", None, "xeon-h100", "needs the GPU index"),
    ("xid", "79", "xeon-h100", "needs the Xid number and the GPU index"),
    ("hw-slowdown", "a", "seed-epyc-rtxpro6000", "needs the GPU index"),
])
def test_labctl_refuses_a_health_fault_the_profile_cannot_show(name, value, profile, message):
    with pytest.raises(RuntimeError, match=message):
        hosts.check_fault(name, value, hosts.load_profile(profile))
