"""The roles as a user's own play lists them: the engine on its own (infertune.fleet.infertune) plans
every knob, applies what differs now and for the next boot with check mode honoured, and leaves sglang
serving; the GPU gate reads; a role that holds variables for the engine says so instead of running
nothing.

The tests run in file order on the lab as they find it (its healthy hosts), converged by the fixture.
"""
import pytest

from helpers import on_host, playbook, recap, state_digest

pytestmark = pytest.mark.lab

ONE_BATCH = ("-e", '{"rollout_batches": ["100%"], "rollout_allow_single_batch": true}')
EPP = "/sys/devices/system/cpu/cpu*/cpufreq/energy_performance_preference"
PLAY = """- name: A user's play
  hosts: {host}
  gather_facts: false
  roles:
    - role: {role}
"""


@pytest.fixture(scope="module")
def hosts(lab):
    playbook("site.yml", *ONE_BATCH, check=True)
    return lab.healthy_hosts()


def play(tmp_path, host, role, *args):
    path = tmp_path / f"{role.rsplit('.', 1)[-1]}.yml"
    path.write_text(PLAY.format(host=host, role=role))
    return playbook(str(path), *args)


def test_the_engine_on_its_own_tunes_the_host_and_leaves_sglang_serving(hosts, tmp_path):
    host = hosts[-1]
    on_host(host, f"for f in {EPP}; do echo balance_power > $f; done")
    pid = on_host(host, "systemctl show -p MainPID --value sglang.service").strip()
    before = state_digest(host)
    rc, out = play(tmp_path, host, "infertune.fleet.infertune", "--check", "--diff")
    assert rc == 0, out[-6000:]
    assert "cpufreq: cpu0-127 epp balance_power -> performance" in out, out[-6000:]
    assert state_digest(host) == before
    rc, out = play(tmp_path, host, "infertune.fleet.infertune")
    assert rc == 0, out[-6000:]
    assert f"changed: [{host}] => (item=cpufreq)" in out, out[-6000:]
    assert on_host(host, f"sort -u {EPP}").split() == ["performance"]
    assert f"{host}: nothing waits for a reboot" in " ".join(out.split()), out[-4000:]
    # No drain, no restart: the same server process.
    assert "Stop sglang.service" not in out
    assert on_host(host, "systemctl show -p MainPID --value sglang.service").strip() == pid
    rc, out = play(tmp_path, host, "infertune.fleet.infertune")
    assert rc == 0 and recap(out)[host]["changed"] == 0, out[-4000:]


def test_the_gpu_gate_on_its_own_reads_the_gpus(hosts, tmp_path):
    rc, out = play(tmp_path, hosts[0], "infertune.fleet.gpu_gate")
    assert rc == 0 and recap(out)[hosts[0]]["failed"] == 0, out[-4000:]


@pytest.mark.parametrize("role", ["infertune.fleet.sysctl", "infertune.fleet.kernel"])
def test_a_role_that_holds_the_engines_variables_says_so(hosts, tmp_path, role):
    before = state_digest(hosts[0])
    rc, out = play(tmp_path, hosts[0], role)
    assert rc != 0
    assert f"{role} " in out and "is no role to run on its own" in " ".join(out.split()), out[-3000:]
    assert "infertune.fleet.infertune" in out and state_digest(hosts[0]) == before
