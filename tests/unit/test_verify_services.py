"""tests/verify/test_services.py's sglang check against the unit states systemctl reports."""
import sys

import pytest

from fakehost import REPO
from verifycheck import load, outcome

sys.path.insert(0, str(REPO / "tests" / "verify"))
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
