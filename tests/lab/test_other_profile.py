"""A non-seed host (Intel Xeon, 4x H100): the play completes, the AMD parts are skipped
and explained, NVFP4 runs there only through sglang's weight-only Marlin fallback (named in
the plan and the report), and a second run changes nothing."""
import json

import pytest

from helpers import ROOT, labctl, on_host, playbook, recap

pytestmark = pytest.mark.lab

HOST = "lab-gpu-08"


def test_xeon_h100_host_converges_with_amd_parts_skipped(lab, tmp_path):
    labctl("up", "--hosts", "8", "--profile", "seed-epyc-rtxpro6000", "--profile-map", f"{HOST}=xeon-h100")
    playbook("lab/provision/sglang.yml", "--limit", f"localhost,{HOST}", check=True)
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
