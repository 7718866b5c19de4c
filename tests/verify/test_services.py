"""sglang.service (role sglang) and the boot-time re-apply oneshot (role tuning_persistence)."""
import json
import shlex

import pytest

from expected import truthy
from outcome import mismatch, not_applicable
from probes import probe
from readings import properties, sections

RESULTS = "/run/infertune/apply.json"
# GET /health, print the status code: a socket alone (urllib's imports cost a host about 40 ms of
# CPU more per verification). Arguments: address, port.
HEALTH = ("import socket, sys; s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=10);"
          " s.sendall(b'GET /health HTTP/1.0\\r\\nHost: localhost\\r\\n\\r\\n');"
          " print(s.makefile('rb').readline().split()[1].decode())")


UNITS = ("sglang", "health", "oneshot", "results")


@probe("units")
def units_read(want):
    """Both units' state, sglang's /health when it should serve, the oneshot's results: one command."""
    # sglang answers /health without the API key; bound to all addresses it answers on loopback.
    address = "127.0.0.1" if want["sglang_host"] in ("0.0.0.0", "::") else want["sglang_host"]
    health = (f"python3 -c {shlex.quote(HEALTH)} {shlex.quote(str(address))} {int(want['sglang_port'])} 2>&1 | tail -n1"
              if truthy(want["sglang_service_started"]) else "true")
    return ("systemctl show sglang.service -p LoadState -p UnitFileState -p ActiveState 2>&1; echo @@;"
            f" {health}; echo @@;"
            " systemctl show infertune-tune.service -p UnitFileState -p ActiveState -p Result 2>&1; echo @@;"
            f" cat {RESULTS} 2>/dev/null")


@pytest.fixture(scope="module")
def units(sh, want):
    return dict(zip(UNITS, sections(sh(units_read(want)), len(UNITS))))


# is-active states of a unit that runs or will run again (Restart=on-failure waits in
# "activating"): sglang_service_started: false asks for none of them.
RUNNING = ("active", "activating", "reloading")


def test_sglang_unit(name, units, want):
    enabled, started = truthy(want["sglang_service_enabled"]), truthy(want["sglang_service_started"])
    state, answer = properties(units["sglang"]), units["health"]
    found = ", ".join(f"{k} {v}" for k, v in sorted(state.items())) or "systemctl not available"
    expected = "installed, " + ("enabled" if enabled else "not enabled") + (
        ", active and /health 200" if started else ", stopped")
    problems = state.get("LoadState") != "loaded"
    problems |= (state.get("UnitFileState") == "enabled") != enabled
    if started:
        problems |= state.get("ActiveState") != "active" or answer.strip() != "200"
        found += f", /health: {answer.strip() or 'no answer'}"
    else:
        problems |= state.get("ActiveState") in RUNNING
    if problems:
        mismatch(name, "sglang.service", expected, found)


def test_tuning_persistence(name, units, want):
    if not want["tuning_persistence_enabled"]:
        not_applicable(name, "boot-time re-apply", "tuning_persistence_enabled is false")
    state, results = properties(units["oneshot"]), units["results"]
    try:
        failed = [f"{knob}: {r.get('msg', '')}" for knob, r in sorted(json.loads(results).items()) if not r.get("ok")]
    except ValueError:
        failed = [f"{RESULTS} absent or unreadable"]
    expected = f"infertune-tune.service enabled, run this boot with every knob ok in {RESULTS}"
    if state.get("UnitFileState") != "enabled" or state.get("ActiveState") != "active" or failed:
        found = ", ".join(f"{k} {v}" for k, v in sorted(state.items())) or "systemctl not available"
        mismatch(name, "boot-time re-apply", expected, "; ".join([found] + failed))
