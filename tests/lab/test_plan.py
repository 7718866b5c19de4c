"""Plan, then apply, on a converged lab fleet: the plan sends only hosts with pending changes
into the serial batches; bad hardware input fails in the plan before any change; --limit,
--tags and -e reach the plan, the knobs and the verification alike.

The tests run in file order on one fleet converged by the fixture.
"""
import json
import re
import subprocess

import pytest

from helpers import GPU_MRRS_512, ROOT, fresh_lab, gpu_mrrs, on_host, playbook, recap, state_digest

pytestmark = pytest.mark.lab

EPP = "/sys/devices/system/cpu/cpu*/cpufreq/energy_performance_preference"


@pytest.fixture(scope="module")
def hosts(lab):
    fresh_lab()
    # Canary, then the rest at once: the batching is test_site's.
    playbook("site.yml", "-e", '{"rollout_batches": ["100%"], "rollout_allow_single_batch": true}', check=True)
    return sorted(lab.hosts())


def boot_ids(hosts):
    return {h: on_host(h, "cat /proc/sys/kernel/random/boot_id").strip() for h in hosts}


def batched(out):
    """Hosts that ran a task of the rollout play (the serial batches)."""
    # A run whose every host failed its plan ends before the rollout play.
    play = out.partition("PLAY [Roll out the hosts with pending changes")[2].split("PLAY [Verify", 1)[0]
    return set(re.findall(r"^(?:ok|changed|skipping|fatal): \[([^\]]+)\]", play, re.M))


def fleet():
    return json.loads((ROOT / "reports" / "fleet.json").read_text())


def test_noop_run_puts_no_host_into_a_batch(hosts):
    boots = boot_ids(hosts)
    rc, out = playbook("site.yml")
    assert rc == 0, out[-6000:]
    assert "%d host(s) planned: 0 with pending changes, 0 stopped by the plan, %d converged" % (len(hosts), len(hosts)) in out, out[-4000:]
    assert not batched(out), out[-4000:]
    assert all(r["changed"] == 0 for r in recap(out).values()), out[-4000:]
    assert boot_ids(hosts) == boots
    assert all(fleet()["hosts"][h]["result"] == "pass" for h in hosts)


def test_epp_changed_by_hand_retunes_that_host_alone_without_a_drain(hosts):
    victim, others = hosts[2], [h for h in hosts if h != hosts[2]]
    on_host(victim, f"for f in {EPP}; do echo balance_power > $f; done")
    boots = boot_ids(hosts)
    rc, out = playbook("site.yml")
    assert rc == 0, out[-6000:]
    assert f"{victim}: drain no: cpufreq applied live, reboot no" in out, out[-4000:]
    assert batched(out) == {victim}, out[-4000:]
    result = recap(out)
    assert result[victim]["changed"] > 0 and all(result[h]["changed"] == 0 for h in others), out[-4000:]
    assert f"changed: [{victim}] => (item=cpufreq)" in out
    assert "TASK [infertune.fleet.sglang : Stop sglang.service]" not in out, out[-4000:]
    assert on_host(victim, f"sort -u {EPP}").split() == ["performance"]
    assert boot_ids(hosts) == boots
    assert fleet()["hosts"][victim]["result"] == "pass"


def test_governor_the_cpus_do_not_offer_fails_in_the_plan(hosts):
    before = {h: state_digest(h) for h in hosts[:2]}
    rc, out = playbook("site.yml", "-e", "cpu_power_governor=userspace")
    assert rc != 0
    assert "cpufreq (role cpu_power): governor='userspace' is not available" in out, out[-4000:]
    assert not batched(out)
    assert all(r["changed"] == 0 for r in recap(out).values())
    assert {h: state_digest(h) for h in before} == before


def test_limit_excluding_a_host_reports_exactly_the_others(hosts):
    rc, out = playbook("site.yml", "--limit", "!lab-gpu-02")
    assert rc == 0, out[-4000:]
    assert sorted(fleet()["hosts"]) == [h for h in hosts if h != "lab-gpu-02"]


def test_tags_pcie_changes_only_maxreadreq(hosts):
    victim = hosts[3]
    on_host(victim, GPU_MRRS_512 + f"; for f in {EPP}; do echo balance_power > $f; done")
    rc, out = playbook("site.yml", "--tags", "pcie")
    assert rc == 0, out[-6000:]
    assert batched(out) == {victim}, out[-4000:]
    assert re.findall(r"^changed: \[[^\]]+\] => \(item=(\w+)\)", out, re.M) == ["pcie_mrrs"], out[-4000:]
    assert "MaxReadReq 4096" in gpu_mrrs(victim)
    # The EPP is another knob: left as it was found.
    assert on_host(victim, f"sort -u {EPP}").split() == ["balance_power"]
    checks = fleet()["hosts"][victim]["knobs"]
    assert checks["pcie_mrrs"]["verify"] == "pass" and checks["cpufreq"]["verify"] == "not checked"
    rc, out = playbook("site.yml")
    assert rc == 0 and batched(out) == {victim}, out[-4000:]


def test_extra_variables_reach_the_knob_and_the_verification(hosts):
    host = hosts[0]
    # key=value extra variables are strings: the GPU gate counts "8" GPUs as 8.
    rc, out = playbook("site.yml", "--limit", host, "-e", "pcie_max_read_request=2048", "-e", "gpu_gate_expected_count=8")
    assert rc == 0, out[-6000:]
    assert fleet()["hosts"][host]["result"] == "pass"
    assert "MaxReadReq 2048" in gpu_mrrs(host)
    rc, out = playbook("site.yml", "--limit", host)
    assert rc == 0, out[-6000:]


def test_an_unprivileged_user_with_become_converges_a_host(hosts):
    host = hosts[5]
    on_host(host, f"for f in {EPP}; do echo balance_power > $f; done")
    args = ("-i", "inventory/lab", "-i", "inventory/lab-unprivileged.yml", "--limit", host)
    rc, out = playbook("site.yml", *args)
    assert rc == 0, out[-6000:]
    assert batched(out) == {host} and fleet()["hosts"][host]["result"] == "pass"
    assert on_host(host, f"sort -u {EPP}").split() == ["performance"]
    # The session was the user's: root was reached through sudo only.
    assert "infertune" in on_host(host, "journalctl -q --no-pager -t sudo | tail -n 20")
    rc, out = playbook("site.yml", *args)
    assert rc == 0 and recap(out)[host]["changed"] == 0, out[-4000:]


def test_the_control_node_is_refused_before_anything_runs(tmp_path):
    own = subprocess.run(["hostname", "-I"], capture_output=True, text=True, check=True).stdout.split()[0]
    inventory = tmp_path / "self.yml"
    inventory.write_text("gpu_nodes:\n  hosts:\n    by-connection:\n      ansible_connection: local\n"
                         f"    by-address:\n      ansible_host: {own}\n"
                         "    by-loopback:\n      ansible_host: 127.0.0.1\n")
    rc, out = playbook("site.yml", "-i", str(inventory))
    assert rc != 0
    for host, why in (("by-connection", "connection local"), ("by-address", f"({own}) belongs to the control node"),
                      ("by-loopback", "is loopback")):
        assert f"host {host}: is the control node (" in out and why in out, out[-4000:]
    assert "TASK [infertune : Read every knob" not in out
