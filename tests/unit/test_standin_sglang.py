"""The sglang stand-in (lab/standin/sglang_server.py, which the lab's sglang.service runs) holds
requests in flight and exports them as sglang does, so a drain can wait for them."""
import json
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

from fakehost import REPO
from sglang_server import StandinSglang

SERVER = REPO / "lab" / "standin" / "sglang_server.py"

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


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def launch(*options):
    """The stand-in as the lab's sglang.service runs it; returns (process, url, its first line)."""
    port = free_port()
    server = subprocess.Popen([sys.executable, str(SERVER), "--host", "127.0.0.1", "--port", str(port), *options],
                              stdout=subprocess.PIPE, text=True)
    return server, f"http://127.0.0.1:{port}", server.stdout.readline()


def status(url):
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


def test_runs_from_sglang_launch_server_command_line(tmp_path):
    """As the lab runs it for sglang.launch_server: the API key from --config, other options ignored."""
    config = tmp_path / "secret-args.yaml"
    config.write_text("api-key: 'it''s'\n")
    server, url, said = launch("--model-path", "/models/x", "--moe-runner-backend", "flashinfer_cutedsl",
                               "--enable-metrics", "--config", str(config))
    try:
        assert "--moe-runner-backend flashinfer_cutedsl" in said and "--enable-metrics" not in said
        results = []
        generate(url, results)
        generate(url, results, {"Authorization": "Bearer it's"})
        assert results == [401, 200]
        assert status(url + "/metrics") == 200
    finally:
        server.terminate()
        server.wait(timeout=10)


def test_metrics_only_with_enable_metrics_as_sglang():
    server, url, _ = launch("--model-path", "/models/x")
    try:
        assert (status(url + "/metrics"), status(url + "/health")) == (404, 200)
    finally:
        server.terminate()
        server.wait(timeout=10)


def chat(url, results, **fields):
    body = json.dumps({"model": "GLM", "messages": [{"role": "user", "content": "hi there"}], **fields}).encode()
    request = urllib.request.Request(url + "/v1/chat/completions", body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        results.append(json.loads(response.read()))


def settled(url, want, seconds=5.0):
    """The gauge once it reads `want`, or its last reading after `seconds`: the server counts a
    request done just after its answer is sent, so a client can read the answer first."""
    deadline = time.monotonic() + seconds
    value = running(url)
    while value != want and time.monotonic() < deadline:
        time.sleep(0.02)
        value = running(url)
    return value


def test_requests_held_in_flight_are_counted_until_answered():
    """Each request's own hold keeps it running; /metrics counts every one until it is answered."""
    with StandinSglang() as srv:
        results = []
        clients = [threading.Thread(target=chat, args=(srv.url, results), kwargs={"hold": 300}) for _ in range(3)]
        for client in clients:
            client.start()
        deadline = time.monotonic() + 10
        while srv.active < 3 and time.monotonic() < deadline:
            time.sleep(0.02)
        in_flight = running(srv.url)
        quick = []
        chat(srv.url, quick)  # not held: answered while the others wait
        still = settled(srv.url, 3), len(results)
        srv.release()
        for client in clients:
            client.join(timeout=30)
        after = settled(srv.url, 0)
    assert in_flight == 3 and still == (3, 0)
    assert quick[0]["object"] == "chat.completion" and quick[0]["model"] == "GLM"
    assert len(results) == 3 and after == 0


def test_chat_completions_in_the_openai_shape():
    with StandinSglang(model="GLM-5-NVFP4") as srv:
        results = []
        chat(srv.url, results, max_tokens=2)
        chat(srv.url, results, max_tokens=8, ignore_eos=True, model="")
        models = json.loads(get(srv.url + "/v1/models"))
    first, second = results
    assert first["choices"][0]["message"] == {"role": "assistant", "content": " tok tok"}
    assert first["choices"][0]["finish_reason"] == "length"
    assert first["usage"] == {"prompt_tokens": 2, "completion_tokens": 2, "total_tokens": 4}
    assert second["model"] == "GLM-5-NVFP4" and second["usage"]["completion_tokens"] == 8
    assert [m["id"] for m in models["data"]] == ["GLM-5-NVFP4"]


def test_chat_completions_stream_one_chunk_per_token():
    with StandinSglang() as srv:
        body = json.dumps({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 5, "stream": True}).encode()
        request = urllib.request.Request(srv.url + "/v1/chat/completions", body, {"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=10) as response:
            events = [line[6:] for line in response.read().decode().splitlines() if line.startswith("data: ")]
    chunks = [json.loads(e) for e in events[:-1]]
    assert events[-1] == "[DONE]" and len(chunks) == 3  # the pretend EOS after 3 tokens
    assert {c["object"] for c in chunks} == {"chat.completion.chunk"}
    assert [c["choices"][0]["finish_reason"] for c in chunks] == [None, None, "stop"]
