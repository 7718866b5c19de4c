"""The sglang stand-in holds a request in flight and exports it as sglang does, so a drain can wait for it."""
import json
import re
import threading
import time
import urllib.error
import urllib.request

from standin_sglang import StandinSglang

# The expression the drain waits on (sglang_drain_running in roles/sglang/vars/main.yml; sum == 0).
RUNNING = re.compile(r"sglang:num_running_reqs\{[^}]*\} ([0-9.e+]+)")
HOLD = 0.8


def get(url):
    with urllib.request.urlopen(url, timeout=5) as response:
        return response.read().decode()


def running(url):
    return sum(float(v) for v in RUNNING.findall(get(url + "/metrics")))


def generate(url, results, headers=None):
    body = json.dumps({"text": "hi", "sampling_params": {"max_new_tokens": 2}}).encode()
    request = urllib.request.Request(url + "/generate", body, {"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            results.append(response.status)
    except urllib.error.HTTPError as exc:
        results.append(exc.code)


def test_drain_waits_for_the_request_in_flight():
    with StandinSglang(hold=HOLD) as srv:
        assert running(srv.url) == 0
        results = []
        client = threading.Thread(target=generate, args=(srv.url, results))
        client.start()
        deadline = time.monotonic() + 5
        while running(srv.url) == 0 and time.monotonic() < deadline:
            time.sleep(0.02)
        started = time.monotonic()
        assert running(srv.url) == 1
        while running(srv.url) > 0:  # the drain's loop
            time.sleep(0.05)
        drained = time.monotonic()
        client.join()
    assert drained - started > HOLD / 2
    # The server counts a request done only after it has sent the answer.
    assert results == [200]


def test_metrics_and_health_need_no_api_key_but_generate_does():
    with StandinSglang(api_key="secret") as srv:
        assert 'sglang:num_running_reqs{engine_type="unified",model_name="standin"' in get(srv.url + "/metrics")
        assert get(srv.url + "/health_generate") == ""
        results = []
        generate(srv.url, results)
        generate(srv.url, results, {"Authorization": "Bearer secret"})
    assert results == [401, 200]


def test_runs_from_sglang_launch_server_command_line(tmp_path):
    """As the lab runs it for sglang.launch_server: the API key from --config, other options ignored."""
    import socket
    import subprocess
    import sys
    from pathlib import Path

    config = tmp_path / "secret-args.yaml"
    config.write_text("api-key: 'it''s'\n")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(
        [sys.executable, str(Path(__file__).with_name("standin_sglang.py")), "--model-path", "/models/x",
         "--moe-runner-backend", "flashinfer_cutedsl", "--enable-metrics", "--host", "127.0.0.1",
         "--port", str(port), "--config", str(config)], stdout=subprocess.PIPE, text=True)
    try:
        said = server.stdout.readline()
        assert "--moe-runner-backend flashinfer_cutedsl" in said and "--enable-metrics" in said
        results = []
        url = f"http://127.0.0.1:{port}"
        generate(url, results)
        generate(url, results, {"Authorization": "Bearer it's"})
        assert results == [401, 200]
    finally:
        server.terminate()
        server.wait(timeout=10)
