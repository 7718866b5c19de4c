"""roles/sglang/tasks/drain.yml and deploy.yml, run for real by ansible-playbook on this machine
against the stand-in server: a fake systemctl says the unit is active and, when asked to stop
it, logs how many requests /metrics counted at that moment. The load-balancer hooks log what
they got. deploy.yml writes its files into the test's directory (sglang_files from -e).
"""
import json
import os
import subprocess
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from sglang_server import StandinSglang

REPO = Path(__file__).resolve().parents[2]

# systemctl as the drain and ansible.builtin.systemd_service call it.
SYSTEMCTL = """#!/usr/bin/env python3
import re, sys, urllib.request
log = open({log!r}, "a")
args = [a for a in sys.argv[1:] if not a.startswith("--")]
if args[0] == "is-active":
    print({active!r})
elif args[0] == "is-enabled":
    print("enabled")
elif args[0] == "show":
    print("Id=sglang.service\\nNames=sglang.service\\nLoadState=loaded\\nActiveState={active}\\n"
          "SubState=running\\nUnitFileState=enabled\\nDescription=stand-in")
elif args[0] == "stop":
    try:
        text = urllib.request.urlopen({metrics!r}, timeout=5).read().decode()
        running = sum(float(v) for v in re.findall(r"num_running_reqs\\{{[^}}]*\\}} (\\S+)", text))
    except Exception:
        running = "unreadable"
    log.write("stop %s\\n" % running)
else:
    log.write("other %s\\n" % " ".join(sys.argv[1:]))
"""

HOOK = """#!/bin/sh
echo "hook $1 $INFERTUNE_HOOK_EVENT $INFERTUNE_HOST $INFERTUNE_SGLANG_TARGET" >> {log}
"""

# A before-drain hook that sends one request, so it is in flight when the drain starts; the
# request logs its answer (or how it broke) when it ends.
SEND = """#!/bin/sh
{python} -c '
import json, sys, urllib.request
body = json.dumps({{"text": "hi", "sampling_params": {{"max_new_tokens": 2}}}}).encode()
request = urllib.request.Request("{url}/generate", body, {{"Content-Type": "application/json"}})
try:
    status = urllib.request.urlopen(request, timeout=120).status
except Exception as exc:
    status = type(exc).__name__
open("{log}", "a").write("answered %s\\n" % status)
' </dev/null >/dev/null 2>&1 &
sleep 1
"""

PLAY = """- name: Drain or deploy
  hosts: all
  gather_facts: false
  tasks:
    - name: Run the sglang role's {tasks}
      ansible.builtin.include_role:
        name: infertune.fleet.sglang
        tasks_from: {tasks}
"""


# The rollout's order for one host (roles/infertune/tasks/apply.yml), then its drain result.
DRAIN_AND_DEPLOY = """- name: Drain, then deploy
  hosts: all
  gather_facts: false
  tasks:
    - name: Drain
      ansible.builtin.include_role:
        name: infertune.fleet.sglang
        tasks_from: drain
    - name: Deploy
      ansible.builtin.include_role:
        name: infertune.fleet.sglang
        tasks_from: deploy
    - name: Keep the drain's result
      ansible.builtin.copy:
        content: "{{{{ infertune_results.drain | to_json }}}}"
        dest: {dest}
        mode: "0644"
"""


def run_drain(tmp_path, port, *extra, check=False, tasks="drain", active="active", play=None):
    """ansible-playbook on the drain (or deploy, or `play`) with a unit `active` as systemctl
    is-active says; returns (rc, output, log lines, seconds)."""
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    log = tmp_path / "calls.log"
    log.touch()
    systemctl = bindir / "systemctl"
    systemctl.write_text(SYSTEMCTL.format(log=str(log), metrics=f"http://127.0.0.1:{port}/metrics", active=active))
    hook = bindir / "lb-hook"
    hook.write_text(HOOK.format(log=log))
    send = bindir / "send-request"
    send.write_text(SEND.format(python=sys.executable, url=f"http://127.0.0.1:{port}", log=log))
    for path in (systemctl, hook, send):
        path.chmod(0o755)
    (tmp_path / "play.yml").write_text(play or PLAY.format(tasks=tasks))
    (tmp_path / "vars.json").write_text(json.dumps({"sglang_port": port, "ansible_python_interpreter": sys.executable}))
    argv = [str(Path(sys.executable).parent / "ansible-playbook"), str(tmp_path / "play.yml"),
            "-i", "gpu-x,", "-c", "local", "-e", f"@{tmp_path / 'vars.json'}", *extra]
    if check:
        argv.append("--check")
    env = dict(os.environ, PATH=f"{bindir}:{os.environ['PATH']}", ANSIBLE_CONFIG=str(REPO / "ansible.cfg"),
               ANSIBLE_NOCOLOR="1")
    started = time.monotonic()
    proc = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    return proc.returncode, proc.stdout + proc.stderr, log.read_text().splitlines(), time.monotonic() - started


def hold_a_request(srv):
    """Send one request (in flight as long as the server holds it); return once the server counts it."""
    body = json.dumps({"text": "hi", "sampling_params": {"max_new_tokens": 2}}).encode()
    request = urllib.request.Request(srv.url + "/generate", body, {"Content-Type": "application/json"})
    client = threading.Thread(target=lambda: urllib.request.urlopen(request, timeout=300), daemon=True)
    client.start()
    deadline = time.monotonic() + 5
    while srv.active == 0 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert srv.active == 1


def port_of(srv):
    return int(srv.url.rsplit(":", 1)[1])


def test_the_drain_waits_for_the_request_in_flight_before_the_stop(tmp_path):
    hook = {"sglang_before_drain_command": [str(tmp_path / "bin" / "send-request")], "sglang_drain_timeout": 60}
    (tmp_path / "hook.json").write_text(json.dumps(hook))
    # Held past the hook's own tasks and the drain's first count, even on a busy machine.
    with StandinSglang(hold=15) as srv:
        rc, out, calls, _ = run_drain(tmp_path, port_of(srv), "-e", f"@{tmp_path / 'hook.json'}")
    assert rc == 0, out[-3000:]
    assert "RETRYING: [gpu-x]: Wait for in-flight requests to finish" in out
    # The request was answered, then the server stopped with nothing in flight.
    assert calls == ["answered 200", "stop 0.0"], out[-3000:]


def test_unreadable_metrics_fail_the_host_before_the_stop_without_waiting(tmp_path):
    with StandinSglang(metrics=False) as srv:
        rc, out, calls, seconds = run_drain(tmp_path, port_of(srv), "-e", "sglang_drain_timeout=120")
    assert rc != 0
    assert "cannot count sglang's in-flight requests" in out and "sglang_drain_force" in out
    assert calls == []  # never stopped
    assert seconds < 60  # a 404 does not change: no waiting out the timeout


def test_drain_force_stops_a_server_it_cannot_count(tmp_path):
    with StandinSglang(metrics=False) as srv:
        rc, out, calls, _ = run_drain(tmp_path, port_of(srv), "-e", "sglang_drain_force=true")
    assert rc == 0, out[-3000:]
    assert calls == ["stop unreadable"]


def test_the_before_drain_hooks_run_on_the_controller_before_the_drain(tmp_path):
    posts = []

    class Balancer(BaseHTTPRequestHandler):
        def do_POST(self):
            posts.append((self.path, json.loads(self.rfile.read(int(self.headers["Content-Length"])))))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args):
            pass

    balancer = ThreadingHTTPServer(("127.0.0.1", 0), Balancer)
    threading.Thread(target=balancer.serve_forever, daemon=True).start()
    hook = {"sglang_before_drain_command": [str(tmp_path / "bin" / "lb-hook"), "remove"],
            "sglang_before_drain_url": f"http://127.0.0.1:{balancer.server_address[1]}/out?pool=llm"}
    (tmp_path / "hook.json").write_text(json.dumps(hook))
    try:
        with StandinSglang() as srv:
            rc, out, calls, _ = run_drain(tmp_path, port_of(srv), "-e", f"@{tmp_path / 'hook.json'}")
    finally:
        balancer.shutdown()
    assert rc == 0, out[-3000:]
    # The server is read on loopback; the balancer learns the address the fleet reaches it at
    # (ansible_host, here the inventory name).
    assert calls == [f"hook remove before_drain gpu-x gpu-x:{port_of(srv)}", "stop 0.0"], out[-3000:]
    assert posts == [("/out?pool=llm", {"event": "before_drain", "host": "gpu-x", "target": f"gpu-x:{port_of(srv)}"})]


# The rollout's block around the drain (roles/infertune/tasks/apply.yml): the stage and the reason kept.
RESCUED_DRAIN = """- name: Drain, or keep why not
  hosts: all
  gather_facts: false
  tasks:
    - name: Drain, or keep why not
      block:
        - name: Drain
          ansible.builtin.include_role:
            name: infertune.fleet.sglang
            tasks_from: drain
      rescue:
        - name: Keep the stage and the reason
          ansible.builtin.copy:
            content: "{{{{ {{'reached': infertune_reached | default('plan'), 'msg': ansible_failed_result.msg}} | to_json }}}}"
            dest: {dest}
            mode: "0644"
"""


@pytest.mark.parametrize("how", ["command", "url"])
def test_a_failed_before_drain_hook_says_what_it_said_and_leaves_the_host_serving(tmp_path, how):
    refuse = tmp_path / "bin" / "lb-refuse"
    refuse.parent.mkdir(exist_ok=True)
    refuse.write_text("#!/bin/sh\necho working >&2\necho \"lb refused to remove $INFERTUNE_HOST\" >&2\nexit 3\n")
    refuse.chmod(0o755)

    class Refusing(BaseHTTPRequestHandler):
        def do_POST(self):
            self.send_response(409)
            self.end_headers()

        def log_message(self, *args):
            pass

    balancer = ThreadingHTTPServer(("127.0.0.1", 0), Refusing)
    threading.Thread(target=balancer.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{balancer.server_address[1]}/out"
    hook = ({"sglang_before_drain_command": [str(refuse), "remove"]} if how == "command"
            else {"sglang_before_drain_url": url})
    (tmp_path / "hook.json").write_text(json.dumps(hook))
    kept = tmp_path / "kept.json"
    try:
        with StandinSglang() as srv:
            rc, out, calls, _ = run_drain(tmp_path, port_of(srv), "-e", f"@{tmp_path / 'hook.json'}",
                                          play=RESCUED_DRAIN.format(dest=kept))
    finally:
        balancer.shutdown()
    assert rc == 0 and "stop" not in " ".join(calls), out[-3000:]
    stopped = json.loads(kept.read_text())
    said = (f"{refuse} remove exited 3: working / lb refused to remove gpu-x" if how == "command"
            else f"POST {url} answered 409: ")
    assert stopped["msg"].startswith(f"before_drain hook {said}"), stopped
    assert stopped["msg"].endswith("the host is left as it was (serving, not drained)")
    # Never drained: the stage is the one before the drain.
    assert stopped["reached"] == "plan"


def test_check_mode_reads_once_and_neither_hooks_nor_stops(tmp_path):
    hook = {"sglang_before_drain_command": [str(tmp_path / "bin" / "lb-hook"), "remove"]}
    (tmp_path / "hook.json").write_text(json.dumps(hook))
    with StandinSglang(hold=120) as srv:
        hold_a_request(srv)
        rc, out, calls, _ = run_drain(tmp_path, port_of(srv), "-e", f"@{tmp_path / 'hook.json'}",
                                      "-e", "sglang_drain_timeout=60", check=True)
        still_running = srv.active
    assert rc == 0, out[-3000:]
    assert calls == []
    assert still_running == 1  # one read, no wait for the request


def test_check_mode_still_tells_a_drain_that_could_not_count(tmp_path):
    with StandinSglang(metrics=False) as srv:
        rc, out, calls, _ = run_drain(tmp_path, port_of(srv), check=True)
    assert rc != 0 and "cannot count" in out
    assert calls == []


def deploy(tmp_path, port, **facts):
    """deploy.yml with its files in tmp_path and an after-serve hook; returns (rc, output, log lines)."""
    files = {"sglang_files": [{"path": str(tmp_path / "sglang.env"), "content": "A=1\n"}],
             "sglang_secret_files": [{"path": str(tmp_path / "secrets.env"), "content": "", "mode": "0600"}],
             "sglang_unit_file": str(tmp_path / "sglang.service"), "sglang_health_timeout": 10,
             "sglang_after_serve_command": [str(tmp_path / "bin" / "lb-hook"), "add"], **facts}
    (tmp_path / "deploy.json").write_text(json.dumps(files))
    rc, out, calls, _ = run_drain(tmp_path, port, "-e", f"@{tmp_path / 'deploy.json'}", tasks="deploy")
    return rc, out, calls


def test_the_after_serve_hook_runs_once_a_drained_host_serves_again(tmp_path):
    with StandinSglang() as srv:
        rc, out, calls = deploy(tmp_path, port_of(srv), infertune_results={"drain": {"changed": True}})
    assert rc == 0, out[-3000:]
    assert "Wait for /health_generate" in out
    assert [c for c in calls if c.startswith("hook")] == [f"hook add after_serve gpu-x gpu-x:{port_of(srv)}"]


def test_no_after_serve_hook_for_a_host_that_does_not_serve(tmp_path):
    with StandinSglang() as srv:
        port = port_of(srv)
        rc, out, calls = deploy(tmp_path, port, infertune_results={"drain": {"changed": True}}, sglang_service_started=False)
        assert rc == 0, out[-3000:]
        assert not [c for c in calls if c.startswith("hook")]
    # Drained, but the server never answers its health check: the host fails and stays out.
    rc, out, calls = deploy(tmp_path, port, infertune_results={"drain": {"changed": True}})
    assert rc != 0 and "Wait for /health" in out
    assert not [c for c in calls if c.startswith("hook")]


@pytest.mark.parametrize("active", ["active", "inactive", "activating"])
def test_the_load_balancer_hooks_run_both_for_a_serving_host_or_neither(tmp_path, active):
    """A host out of the load balancer comes back into it; one never taken out is left alone
    (not serving, or waiting to restart after a crash). The drain's result lists what ran."""
    hooks = {"sglang_before_drain_command": [str(tmp_path / "bin" / "lb-hook"), "remove"],
             "sglang_after_serve_command": [str(tmp_path / "bin" / "lb-hook"), "add"],
             "sglang_files": [{"path": str(tmp_path / "sglang.env"), "content": "A=1\n"}],
             "sglang_secret_files": [{"path": str(tmp_path / "secrets.env"), "content": "", "mode": "0600"}],
             "sglang_unit_file": str(tmp_path / "sglang.service"), "sglang_health_timeout": 10}
    (tmp_path / "hook.json").write_text(json.dumps(hooks))
    play = DRAIN_AND_DEPLOY.format(dest=tmp_path / "drain.json")
    with StandinSglang() as srv:
        rc, out, calls, _ = run_drain(tmp_path, port_of(srv), "-e", f"@{tmp_path / 'hook.json'}", active=active,
                                      play=play)
    assert rc == 0, out[-3000:]
    ran = [c for c in calls if c.startswith("hook")]
    drain = json.loads((tmp_path / "drain.json").read_text())
    target = f"gpu-x:{port_of(srv)}"
    if active == "active":
        assert ran == [f"hook remove before_drain gpu-x {target}", f"hook add after_serve gpu-x {target}"]
        assert drain["hooks"] == ["before_drain", "after_serve"] and drain["changed"]
    else:
        assert ran == [] and drain["hooks"] == [] and not drain["changed"]
