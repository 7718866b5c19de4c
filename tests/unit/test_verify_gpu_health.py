"""tests/verify's GPU health check: the health fields ride in the GPU checks' one nvidia-smi, the
kernel log's Xid lines in the same round, judged by the plan's own table; a reset or rma GPU fails
the host, warn passes, and the check is not applicable with gpu_gate_health false."""
import subprocess
import sys

from fakehost import REPO
from verifycheck import load, outcome, resolved

# The suite's own modules (verifycheck puts tests/verify on the path).
from readings import KMSG_READ, gpu_health_reading

H100 = (REPO / "tests" / "fixtures" / "gpu" / "h100-health-query.csv").read_text().strip()
UNIT = "LoadState=loaded\nUnitFileState=enabled\nActiveState=active\n"
IDENTITY = 13  # the plan's identity fields, first in the real answer


def answer(row=H100, kernel=""):
    """What the GPU round prints: the unit, the checks' fields then the health fields, the Xid lines."""
    values = [v.strip() for v in row.split(",")]
    # index, bus id, compute capability, persistence mode, memory; then uuid and the health fields.
    checks = [values[0], values[3], values[5], values[8], values[6], values[2]] + values[IDENTITY:]
    return UNIT + "@@\n" + ", ".join(checks) + "\n@@rc=0\n@@\n" + kernel


def check(output, overrides=None):
    verify = load("test_gpu_health")
    return outcome(verify.test_gpu_health, "h1", gpu_health_reading(output), resolved(overrides))


def test_a_healthy_real_answer_passes():
    assert check(answer()) == "pass"


def test_a_remap_pending_fails_naming_the_gpu_and_the_signal():
    pending = H100.replace(", No, No, 0, 0, [N/A]", ", Yes, No, 0, 0, [N/A]")  # remapped_rows.pending
    assert pending != H100
    assert check(answer(pending)) == (
        "h1: GPU health: expected no GPU reset or rma, found GPU 0 (bus 00000000:00:06.0, serial 1650000000001, uuid "
        "GPU-00000000-0000-4000-8000-000000000001): remap: row remap pending (applied at the next GPU reset or reboot) (reset)")


def test_a_reset_class_xid_of_this_boot_fails_and_an_application_one_does_not():
    app = "NVRM: Xid (PCI:0000:00:06): 13, pid=1, Graphics Exception\n"
    assert check(answer(kernel=app)) == "pass"
    failed = check(answer(kernel=app + "4,9,9,-;NVRM: Xid (PCI:0000:00:06): 79, pid=1, GPU has fallen off the bus.\n"))
    assert failed.endswith(": xid: Xid 13, 79 (reset)"), failed


def test_not_applicable_without_the_health_check():
    assert check(answer(), {"gpu_gate_health": False}).endswith("not applicable on this host: gpu_gate_health is false")


def test_the_kernel_log_read_prints_only_xid_lines_and_says_when_it_cannot_read(tmp_path):
    log = tmp_path / "kmsg"
    log.write_text("6,1,1,-;NVRM: loading\n4,2,2,-;NVRM: Xid (PCI:0000:00:06): 79, pid=1, x\n")
    run = subprocess.run([sys.executable, "-c", KMSG_READ.replace("/dev/kmsg", str(log))], capture_output=True, text=True)
    assert run.stdout == "4,2,2,-;NVRM: Xid (PCI:0000:00:06): 79, pid=1, x\n"
    missing = subprocess.run([sys.executable, "-c", KMSG_READ.replace("/dev/kmsg", str(tmp_path / "none"))],
                             capture_output=True, text=True)
    rows, kernel, other = gpu_health_reading(answer(kernel=missing.stdout))
    assert kernel is None and other == "@@kmsg-unreadable No such file or directory"
