"""tests/verify/test_services.py's sglang check against the unit states systemctl reports."""
import http.server
import socket
import subprocess
import sys
import threading

import pytest

from verifycheck import load, outcome

CHECK = load("test_services").test_sglang_unit


def units(active, health=""):
    return {"sglang": f"LoadState=loaded\nUnitFileState=disabled\nActiveState={active}\n", "health": health}


@pytest.mark.parametrize("active", ["active", "activating"])
def test_a_unit_asked_stopped_that_runs_or_waits_to_restart_fails(active):
    want = {"sglang_service_enabled": False, "sglang_service_started": False}
    found = outcome(CHECK, "h1", units(active), want)
    assert "stopped" in found and f"ActiveState {active}" in found


@pytest.mark.parametrize("active", ["inactive", "failed"])
@pytest.mark.parametrize("started", [False, "false"])  # -e passes a string
def test_a_unit_asked_stopped_that_is_stopped_passes(active, started):
    want = {"sglang_service_enabled": False, "sglang_service_started": started}
    assert outcome(CHECK, "h1", units(active), want) == "pass"


def test_a_unit_asked_started_must_answer_health():
    want = {"sglang_service_enabled": False, "sglang_service_started": True}
    assert outcome(CHECK, "h1", units("active", "200\n"), want) == "pass"
    assert "/health: no answer" in outcome(CHECK, "h1", units("active"), want)


@pytest.fixture
def server():
    """An HTTP server on loopback whose /health answers what `status` holds."""
    status = [200]

    class Health(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's name)
            self.send_response(status[0] if self.path == "/health" else 404)
            self.end_headers()

        def log_message(self, *args):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Health)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield httpd.server_address[1], status
    httpd.shutdown()


def health(port):
    """What the verification's /health probe prints for 127.0.0.1:port (its last line)."""
    proc = subprocess.run([sys.executable, "-c", load("test_services").HEALTH, "127.0.0.1", str(port)],
                          capture_output=True, text=True, timeout=30, check=False)
    return (proc.stdout + proc.stderr).strip().splitlines()[-1]


def test_the_health_probe_prints_the_status_the_server_answers(server):
    port, status = server
    assert health(port) == "200"
    status[0] = 503
    assert health(port) == "503"
    want = {"sglang_service_enabled": False, "sglang_service_started": True}
    assert "/health: 503" in outcome(CHECK, "h1", units("active", health(port) + "\n"), want)


def test_the_health_probe_says_why_nothing_answered():
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        closed = unused.getsockname()[1]
    assert "ConnectionRefusedError" in health(closed)
