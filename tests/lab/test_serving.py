"""A serving lab: every host's sglang.service runs the stand-in (the lab image's serving layer) with
the role's own unit and flags. A converge that drains a serving host lets its requests in
flight finish, and the load-balancer hooks pair up; a repair that applies live (EPP) leaves the
server, its request in flight and the balancer alone; sglang_service_started: false stops a
running unit and the verification agrees. Works with the hosts the lab has (2 or more)."""
import json
import subprocess
import sys
import time

import pytest

from helpers import BIN, GPU_MRRS_512, ROOT, on_host, playbook, recap

pytestmark = pytest.mark.lab

EPP = "/sys/devices/system/cpu/cpu*/cpufreq/energy_performance_preference"
# After the canary, one batch with the rest.
ONE_BATCH = ("-e", '{"rollout_batches": ["100%"], "rollout_allow_single_batch": true}')
REQUESTS = 2
HOLD = 15  # seconds each request stays in flight: past the drain's first count (every 5 s)

# A load-balancer hook on the control node: logs its event, host and target; before the drain
# it starts REQUESTS held chat requests to the host (detached, each logs its answer) and
# returns once the server counts them all in flight.
HOOK = """import json, os, re, subprocess, sys, time, urllib.request
log, target = sys.argv[1], os.environ.get("INFERTUNE_SGLANG_TARGET") or sys.argv[3]
if sys.argv[2] == "client":
    body = json.dumps({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4, "hold": %(hold)d}).encode()
    request = urllib.request.Request(f"http://{target}/v1/chat/completions", body, {"Content-Type": "application/json"})
    try:
        status = urllib.request.urlopen(request, timeout=300).status
    except Exception as exc:
        status = type(exc).__name__
    open(log, "a").write(f"answered {status}\\n")
    sys.exit()
open(log, "a").write(f"{os.environ['INFERTUNE_HOOK_EVENT']} {os.environ['INFERTUNE_HOST']}\\n")
if os.environ["INFERTUNE_HOOK_EVENT"] == "before_drain":
    for _ in range(%(requests)d):
        subprocess.Popen([sys.executable, __file__, log, "client", target], stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    for _ in range(300):
        text = urllib.request.urlopen(f"http://{target}/metrics", timeout=10).read().decode()
        if sum(float(v) for v in re.findall(r"num_running_reqs\\{[^}]*\\} (\\S+)", text)) >= %(requests)d:
            break
        time.sleep(0.1)
"""


def fleet():
    return json.loads((ROOT / "reports" / "fleet.json").read_text())


def serving(host):
    """sglang.service's ActiveState and what /health answers on the host."""
    return on_host(host, "systemctl is-active sglang.service;"
                         " python3 -c \"import urllib.request as u;"
                         " print(u.urlopen('http://127.0.0.1:30000/health', timeout=5).status)\" 2>&1 | tail -n1"
                   ).split()


@pytest.fixture(scope="module")
def hosts(lab):
    """Every host converged and serving."""
    playbook("site.yml", *ONE_BATCH, check=True)
    names = sorted(lab.hosts())
    assert {h: serving(h) for h in names} == {h: ["active", "200"] for h in names}
    return names


def hooks_file(tmp_path, log):
    """An extra-variables file with both load-balancer hooks (HOOK, logging to `log`)."""
    hook = tmp_path / "hook.py"
    hook.write_text(HOOK % {"hold": HOLD, "requests": REQUESTS})
    argv = [str(BIN / "python"), str(hook), str(log)]
    hooks = {"sglang_before_drain_command": argv + ["before_drain"], "sglang_after_serve_command": argv + ["after"]}
    (tmp_path / "hooks.json").write_text(json.dumps(hooks))
    return tmp_path / "hooks.json"


def test_requests_in_flight_finish_and_the_hooks_pair_up(hosts, tmp_path):
    victim, log = hosts[-1], tmp_path / "hooks.log"
    extra = hooks_file(tmp_path, log)
    on_host(victim, GPU_MRRS_512)  # a change that drains
    rc, out = playbook("site.yml", *ONE_BATCH, "-e", f"@{extra}")
    assert rc == 0, out[-6000:]
    assert f"{victim}: drain yes (pcie_mrrs), reboot no" in out, out[-6000:]
    assert f"RETRYING: [{victim}]: Wait for in-flight requests to finish" in out, out[-6000:]
    # Only the drained host: its requests answered before the stop, then back into the balancer.
    assert log.read_text().splitlines() == [f"before_drain {victim}"] + ["answered 200"] * REQUESTS + [
        f"after_serve {victim}"]
    entry = fleet()["hosts"][victim]
    assert entry["rollout"]["drained"] and entry["result"] == "pass", entry
    assert entry["knobs"]["drain"]["tuning"]["hooks"] == ["before_drain", "after_serve"]
    assert all(fleet()["hosts"][h]["knobs"]["drain"]["tuning"] is None for h in hosts if h != victim)
    assert serving(victim) == ["active", "200"]


def running_requests(host):
    text = on_host(host, "python3 -c \"import urllib.request as u;"
                         " print(u.urlopen('http://127.0.0.1:30000/metrics', timeout=5).read().decode())\"")
    return sum(float(line.split()[-1]) for line in text.splitlines() if line.startswith("sglang:num_running_reqs"))


def test_a_live_repair_leaves_the_server_its_request_and_the_balancer_alone(hosts, tmp_path):
    """EPP set back by hand on a serving host: written live, no drain, no hook, no restart."""
    victim, log = hosts[-1], tmp_path / "hooks.log"
    extra = hooks_file(tmp_path, log)
    pid = on_host(victim, "systemctl show -p MainPID --value sglang.service").strip()
    target = on_host(victim, "hostname -I").split()[0] + ":30000"
    # A request held in flight for the whole run, from the control node.
    client = subprocess.Popen([sys.executable, "-c", HOOK % {"hold": 180, "requests": 1}, str(log), "client", target])
    for _ in range(100):
        if running_requests(victim) >= 1:
            break
        time.sleep(0.2)
    try:
        on_host(victim, f"for f in {EPP}; do echo balance_power > $f; done")
        rc, out = playbook("site.yml", *ONE_BATCH, "-e", f"@{extra}")
        assert rc == 0, out[-6000:]
        assert f"{victim}: drain no: cpufreq applied live, reboot no" in out, out[-6000:]
        assert f"changed: [{victim}] => (item=cpufreq)" in out, out[-6000:]
        # The sglang role's drain never ran: no hook, no wait for the request, no stop.
        assert "TASK [infertune.fleet.sglang : Stop sglang.service]" not in out, out[-6000:]
        assert on_host(victim, f"sort -u {EPP}").split() == ["performance"]
        # The same server process, the request still in flight, no hook ran.
        assert on_host(victim, "systemctl show -p MainPID --value sglang.service").strip() == pid
        assert running_requests(victim) == 1 and client.poll() is None
        assert not log.exists()
        entry = fleet()["hosts"][victim]
        assert entry["result"] == "pass" and not entry["rollout"]["drained"], entry
    finally:
        client.wait(timeout=300)
    assert log.read_text().splitlines() == ["answered 200"]


def test_started_false_stops_a_running_unit_and_the_verification_agrees(hosts, tmp_path):
    victim = hosts[-1]
    stopped = ("-e", '{"sglang_service_started": false}', "--limit", victim)
    try:
        rc, out = playbook("site.yml", *stopped)
        assert rc == 0, out[-6000:]
        assert serving(victim)[0] == "inactive"
        assert fleet()["hosts"][victim]["knobs"]["sglang"]["verify"] == "pass"
        # Started again by hand: the verification of the same variables says it is off.
        on_host(victim, "systemctl start sglang.service")
        rc, out = playbook("playbooks/verify.yml", *stopped)
        assert rc != 0 and "sglang.service: expected installed, enabled, stopped" in out, out[-6000:]
        # And the next converge stops it again.
        rc, out = playbook("site.yml", *stopped)
        assert rc == 0 and recap(out)[victim]["changed"] > 0, out[-6000:]
        assert serving(victim)[0] == "inactive"
    finally:
        playbook("site.yml", "--limit", victim, check=True)
    assert serving(victim) == ["active", "200"]
