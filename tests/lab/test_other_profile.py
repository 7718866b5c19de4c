"""Non-seed hosts. Intel Xeon with 4x H100: the play completes, the AMD parts are skipped
and explained, NVFP4 runs there only through sglang's weight-only Marlin fallback (named in
the plan and the report), and a second run changes nothing. 8x B200 (SM100): the backend the
seed host cannot run (flashinfer_trtllm) is supported there, with its source in the report. Four
RTX PRO 6000 Workstation Edition cards (VGA class, where the seed's Server Edition is a 3D
controller) behind one switch whose root port has no ACS capability, on a kernel that starts
amd-pstate-epp by itself: tuned and verified like the seed's GPUs."""
import json

import pytest

from helpers import ROOT, labctl, on_host, playbook, recap

pytestmark = pytest.mark.lab

HOST = "lab-gpu-08"
B200_HOST = "lab-gpu-07"
WS_HOST = "lab-gpu-06"


@pytest.fixture(scope="module")
def profiled(lab):
    """One lab up for both: each host recreated with its profile, sglang's files on both."""
    labctl("up", "--hosts", "8", "--profile", "seed-epyc-rtxpro6000", "--profile-map",
           f"{HOST}=xeon-h100,{B200_HOST}=b200,{WS_HOST}=ws-epyc-rtxpro6000")


def test_xeon_h100_host_converges_with_amd_parts_skipped(profiled, tmp_path):
    expectations = tmp_path / "xeon.yml"
    expectations.write_text(f"gpu_nodes:\n  hosts:\n    {HOST}:\n      gpu_gate_expected_count: 4\n"
                            "      gpu_gate_compute_capability: \"9.0\"\n      sglang_tp: 4\n"
                            # flashinfer_cutlass refuses NVFP4 below SM100; auto picks Marlin.
                            "      sglang_moe_runner_backend: auto\n")
    args = ("site.yml", "-i", "inventory/lab", "-i", str(expectations), "--limit", HOST)
    # The backend is judged where sglang's files are to be written: make sure they are.
    on_host(HOST, "rm -f /usr/local/sbin/sglang-launch")
    rc, out = playbook(*args)
    assert rc == 0, out[-6000:]
    said = " ".join(out.split())  # the callback folds long lines
    assert "GenuineIntel; amd_pstate exists only on AMD CPUs" in said
    assert "through the fallback Marlin, weight-only" in said, out[-4000:]
    backend = json.loads((ROOT / "reports" / "fleet.json").read_text())["hosts"][HOST]["knobs"]["backend"]
    assert "Marlin, weight-only" in backend["tuning"]["msg"]
    cmdline = on_host(HOST, "cat /proc/cmdline")
    assert "processor.max_cstate=1" in cmdline and "amd_pstate=" not in cmdline
    rc, out = playbook(*args)
    assert rc == 0 and recap(out)[HOST]["changed"] == 0, out[-4000:]


def test_b200_host_runs_the_sm100_backend(profiled, tmp_path):
    expectations = tmp_path / "b200.yml"
    expectations.write_text(f"gpu_nodes:\n  hosts:\n    {B200_HOST}:\n      gpu_gate_compute_capability: \"10.0\"\n"
                            "      sglang_moe_runner_backend: flashinfer_trtllm\n")
    args = ("site.yml", "-i", "inventory/lab", "-i", str(expectations), "--limit", B200_HOST)
    on_host(B200_HOST, "rm -f /usr/local/sbin/sglang-launch")
    rc, out = playbook(*args)
    assert rc == 0, out[-6000:]
    record = json.loads((ROOT / "reports" / "fleet.json").read_text())["hosts"][B200_HOST]
    assert record["result"] == "pass", record
    backend = record["knobs"]["backend"]["tuning"]
    assert backend["after"].startswith("supported"), backend
    assert "flashinfer_trtllm is supported" in backend["msg"], backend
    assert "--moe-runner-backend flashinfer_trtllm" in " ".join(on_host(B200_HOST, "cat /etc/sglang/sglang.env"
                                                                        " /usr/local/sbin/sglang-launch").split())
    rc, out = playbook(*args)
    assert rc == 0 and recap(out)[B200_HOST]["changed"] == 0, out[-4000:]


def test_workstation_gpus_behind_one_switch_are_tuned_and_verified(profiled, tmp_path):
    expectations = tmp_path / "ws.yml"
    expectations.write_text(f"gpu_nodes:\n  hosts:\n    {WS_HOST}:\n      gpu_gate_expected_count: 4\n"
                            "      sglang_tp: 4\n      sglang_ep: 4\n")
    args = ("site.yml", "-i", "inventory/lab", "-i", str(expectations), "--limit", WS_HOST)
    on_host(WS_HOST, "rm -f /usr/local/sbin/sglang-launch")
    rc, out = playbook(*args)
    assert rc == 0, out[-6000:]
    record = json.loads((ROOT / "reports" / "fleet.json").read_text())["hosts"][WS_HOST]
    assert record["result"] == "pass", record
    gpus = [line.split()[0] for line in on_host(WS_HOST, "lspci -n -d 10de::0300").splitlines()]
    assert len(gpus) == 4, gpus
    # Every VGA-class GPU read back by lspci at MaxReadReq 4096 (Device Control bits 14:12 = 5).
    for bdf in gpus:
        assert (int(on_host(WS_HOST, f"setpci -s {bdf} CAP_EXP+8.w").strip(), 16) >> 12) & 7 == 5, bdf
    acs = record["knobs"]["pcie_acs"]["tuning"]
    assert sorted(acs["after"]) == ["0000:42:00.0", "0000:42:01.0", "0000:42:02.0", "0000:42:03.0"], acs
    assert set(acs["after"].values()) == {"0x0011"}, acs
    assert "no ACS capability (nothing to clear) on 0000:40:01.1" in acs["msg"], acs
    rc, out = playbook(*args)
    assert rc == 0 and recap(out)[WS_HOST]["changed"] == 0, out[-4000:]
