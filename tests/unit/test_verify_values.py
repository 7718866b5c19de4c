"""tests/verify reads the values a host was tuned to from the run alone (the file
python -m infertune.verify writes): no role defaults of its own, no guess where the run gave none."""
import sys

import pytest
from verifycheck import VERIFY, load

sys.path.insert(0, str(VERIFY))
conftest = load("conftest")

RESOLVED = {"gpu-01": {"pcie_max_read_request": 4096}, "gpu-02": {"pcie_max_read_request": 2048}}


def test_each_host_gets_its_own_entry():
    assert conftest.values_for("gpu-02", "ansible", RESOLVED) == {"pcie_max_read_request": 2048}


def test_a_host_the_run_did_not_resolve_fails_naming_it_and_what_there_is():
    with pytest.raises(pytest.fail.Exception, match=r"gpu-09: no expected values .* \(it has: gpu-01, gpu-02\)"):
        conftest.values_for("gpu-09", "ansible", RESOLVED)


def test_on_the_host_itself_a_file_for_one_host_is_that_host_s():
    # Written by a run with --limit gpu-02; the host's hostname need not be its inventory name.
    one = {"gpu-02": RESOLVED["gpu-02"]}
    assert conftest.values_for("node17.example", "local", one) == RESOLVED["gpu-02"]
    with pytest.raises(pytest.fail.Exception):
        conftest.values_for("node17.example", "local", RESOLVED)
    with pytest.raises(pytest.fail.Exception):
        conftest.values_for("node17.example", "ansible", one)


def test_without_the_run_s_values_the_suite_stops_and_says_how_to_get_them(monkeypatch):
    monkeypatch.delenv("INFERTUNE_VERIFY_EXPECTED", raising=False)
    with pytest.raises(pytest.fail.Exception, match="playbooks/verify.yml"):
        conftest.resolved.__wrapped__()
