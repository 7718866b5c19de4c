"""Non-seed hosts. Intel Xeon with 4x H100: the play completes, the AMD parts are skipped
and explained, NVFP4 runs there only through sglang's weight-only Marlin fallback (named in
the plan and the report), and a second run changes nothing. 8x B200 (SM100): the backend the
seed host cannot run (flashinfer_trtllm) is supported there, with its source in the report. Four
RTX PRO 6000 Workstation Edition cards (VGA class, where the seed's Server Edition is a 3D
controller) behind one switch whose root port has no ACS capability, on a kernel that starts
amd-pstate-epp by itself: tuned and verified like the seed's GPUs."""
import json

import pytest
import yaml

from helpers import ROOT, labctl, on_host, playbook, recap

pytestmark = pytest.mark.lab

HOST = "lab-gpu-08"
B200_HOST = "lab-gpu-07"
WS_HOST = "lab-gpu-06"


@pytest.fixture(scope="module")
def profiled(lab):
    """One lab up for all: each host recreated with its profile, sglang's files on each. Afterwards
    the default profiles again (these hosts' GPUs fail the default gate the next modules run)."""
    labctl("up", "--hosts", "8", "--profile", "seed-epyc-rtxpro6000", "--profile-map",
           f"{HOST}=xeon-h100,{B200_HOST}=b200,{WS_HOST}=ws-epyc-rtxpro6000")
    yield
    labctl("up", "--profile-map", "")


def converge(host, host_vars, tmp_path):
    """site.yml on HOST alone, HOST_VARS over the inventory (what its profile differs in); its
    output, and its arguments for the second run."""
    expectations = tmp_path / "expectations.yml"
    expectations.write_text(yaml.safe_dump({"gpu_nodes": {"hosts": {host: host_vars}}}))
    args = ("site.yml", "-i", "inventory/lab", "-i", str(expectations), "--limit", host)
    # The backend is judged where sglang's files are to be written: make sure they are.
    on_host(host, "rm -f /usr/local/sbin/sglang-launch")
    rc, out = playbook(*args)
    assert rc == 0, out[-6000:]
    return args, out


def fleet_record(host):
    return json.loads((ROOT / "reports" / "fleet.json").read_text())["hosts"][host]


def assert_second_run_changes_nothing(host, args):
    rc, out = playbook(*args)
    assert rc == 0 and recap(out)[host]["changed"] == 0, out[-4000:]


def test_xeon_h100_host_converges_with_amd_parts_skipped(profiled, tmp_path):
    # flashinfer_cutlass refuses NVFP4 below SM100; auto picks Marlin.
    args, out = converge(HOST, {"gpu_gate_expected_count": 4, "gpu_gate_compute_capability": "9.0", "sglang_tp": 4,
                                "sglang_moe_runner_backend": "auto"}, tmp_path)
    said = " ".join(out.split())  # the callback folds long lines
    assert "GenuineIntel; amd_pstate exists only on AMD CPUs" in said
    assert "through the fallback Marlin, weight-only" in said, out[-4000:]
    assert "Marlin, weight-only" in fleet_record(HOST)["knobs"]["backend"]["tuning"]["msg"]
    cmdline = on_host(HOST, "cat /proc/cmdline")
    assert "processor.max_cstate=1" in cmdline and "amd_pstate=" not in cmdline
    assert_second_run_changes_nothing(HOST, args)


def test_b200_host_runs_the_sm100_backend(profiled, tmp_path):
    args, _ = converge(B200_HOST, {"gpu_gate_compute_capability": "10.0",
                                   "sglang_moe_runner_backend": "flashinfer_trtllm"}, tmp_path)
    record = fleet_record(B200_HOST)
    assert record["result"] == "pass", record
    backend = record["knobs"]["backend"]["tuning"]
    assert backend["after"].startswith("supported"), backend
    assert "flashinfer_trtllm is supported" in backend["msg"], backend
    assert "--moe-runner-backend flashinfer_trtllm" in " ".join(on_host(B200_HOST, "cat /etc/sglang/sglang.env"
                                                                        " /usr/local/sbin/sglang-launch").split())
    assert_second_run_changes_nothing(B200_HOST, args)


def test_workstation_gpus_behind_one_switch_are_tuned_and_verified(profiled, tmp_path):
    args, _ = converge(WS_HOST, {"gpu_gate_expected_count": 4, "sglang_tp": 4, "sglang_ep": 4}, tmp_path)
    record = fleet_record(WS_HOST)
    assert record["result"] == "pass", record
    gpus = [line.split()[0] for line in on_host(WS_HOST, "lspci -n -d 10de::0300").splitlines()]
    assert len(gpus) == 4, gpus
    # Every VGA-class GPU at MaxReadReq 4096 as setpci reads it back (Device Control bits 14:12 = 5).
    for bdf in gpus:
        assert (int(on_host(WS_HOST, f"setpci -s {bdf} CAP_EXP+8.w").strip(), 16) >> 12) & 7 == 5, bdf
    acs = record["knobs"]["pcie_acs"]["tuning"]
    assert sorted(acs["after"]) == ["0000:42:00.0", "0000:42:01.0", "0000:42:02.0", "0000:42:03.0"], acs
    assert set(acs["after"].values()) == {"0x0011"}, acs
    assert "no ACS capability (nothing to clear) on 0000:40:01.1" in acs["msg"], acs
    assert_second_run_changes_nothing(WS_HOST, args)
