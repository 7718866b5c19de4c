"""The control node's own needs (infertune/needs.py): declared per use in the collection's
requirements files, checked in the Python that runs ansible-playbook before any host is touched,
and a verification that could not run is never "not verified" without its reason, nor rc 0."""
import json
import os
import re
import subprocess

import pytest
import yaml

import barepython
from fakehost import REPO
from infertune import needs

INVENTORY = {"gpu_nodes": {"hosts": {"local-1": {"ansible_connection": "local"}}}}


def requirements(name):
    """{distribution: pinned version} of a requirements file, its -r includes followed."""
    pins = {}
    for line in (REPO / name).read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line.startswith("-r "):
            pins.update(requirements(line[3:].strip()))
        elif "==" in line:
            name_, version = line.split("==")
            pins[name_.strip()] = version.strip()
    return pins


def test_a_missing_or_old_package_is_one_line_with_the_pip_command():
    lines = needs.problems(["verify", "plot"], python="/opt/py/bin/python3", find_spec=lambda m: None if m == "testinfra" else m,
                           version=lambda d: {"pytest": "8.3.4", "matplotlib": "3.11.2"}[d])
    assert lines == [
        "control node: the verification (tests/verify) needs pytest (8.3.4 installed, 9.0 or newer needed),"
        " pytest-testinfra (not installed) in /opt/py/bin/python3, the Python that runs ansible-playbook; install them"
        f" with: /opt/py/bin/python3 -m pip install -r {REPO}/requirements.txt"]
    assert needs.problems(["plot"], version=lambda d: "3.11.0rc1", find_spec=lambda m: m) == []
    with pytest.raises(ValueError, match="unknown use 'lint'"):
        needs.problems(["lint"])


def test_each_use_has_its_requirements_file_with_the_tested_pins():
    for use, wanted in needs.NEEDS.items():
        pins = requirements(needs.REQUIREMENTS[use])
        for distribution, _module, oldest in wanted:
            assert needs.release(pins[distribution]) >= needs.release(oldest), (use, distribution)
        # The DSA warning of every ansible command (requirements.txt says why).
        assert pins["cryptography"] == "50.0.2"
    assert set(requirements("requirements.txt")) == {"pytest", "pytest-testinfra", "cryptography"}
    # The checkout's tooling holds every one of them, at the same pins.
    dev = requirements("requirements-dev.txt")
    assert requirements("requirements-benchmark.txt").items() <= dev.items()
    # The execution environment's declaration names the same packages (PyYAML comes with ansible-core).
    ee = {line for line in (REPO / "meta" / "ee-requirements.txt").read_text().splitlines() if line and line[0] != "#"}
    assert ee - {"PyYAML"} == {d for wanted in needs.NEEDS.values() for d, _m, _o in wanted}


def ansible_playbook(python, tmp_path, *argv):
    """ansible-playbook run by PYTHON (sys.executable on the controller), from an empty directory
    with no ansible.cfg, on a local host that may be tuned (the control node)."""
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump(INVENTORY))
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_") or k == "ANSIBLE_COLLECTIONS_PATH"}
    env.update(ANSIBLE_NOCOLOR="1", ANSIBLE_PYTHON_INTERPRETER=str(python))
    proc = subprocess.run([str(python), "-m", "ansible.cli.playbook", *argv, "-i", "hosts.yml",
                           "-e", "infertune_allow_control_node=true", "-e", f"report_dir={tmp_path / 'reports'}"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    return proc.returncode, proc.stdout + proc.stderr


@pytest.fixture(scope="module")
def without_pytest(tmp_path_factory):
    return barepython.python_without(tmp_path_factory.mktemp("bare") / "venv", *barepython.PYTEST)


def test_a_verification_without_pytest_fails_with_the_pip_command_and_reports_why(without_pytest, tmp_path):
    rc, out = ansible_playbook(without_pytest, tmp_path, "infertune.fleet.verify", "--check")
    assert rc != 0, out
    flat = " ".join(out.split())
    assert re.search(r"needs pytest \(not installed\), pytest-testinfra \(not installed\) in \S+/bin/python", flat), out
    assert f"{without_pytest} -m pip install -r " in flat and "/requirements.txt" in flat
    host = json.loads((tmp_path / "reports" / "fleet.json").read_text())["hosts"]["local-1"]
    assert host["result"] == "not verified" and host["reason"].startswith("the verification could not run: "), host


def test_the_rollout_stops_before_any_host_is_read(without_pytest, tmp_path):
    rc, out = ansible_playbook(without_pytest, tmp_path, "infertune.fleet.site", "--check")
    assert rc != 0 and "pip install -r " in out, out
    assert "TASK [infertune.fleet.infertune : Read every knob" not in out, out
    # The drift watch needs no pytest unless it verifies.
    rc, out = ansible_playbook(without_pytest, tmp_path, "infertune.fleet.drift", "-e", "report_drift_textfile_dir=",
                               "-e", "report_drift_verify=true")
    assert rc != 0 and "pip install -r " in out and "TASK [infertune.fleet.infertune : Read every knob" not in out, out


def test_pytest_that_ends_without_its_junit_report_is_a_verification_that_could_not_run(monkeypatch, tmp_path, capsys):
    from infertune import verify

    class Ended:
        returncode, stdout, stderr = 1, "", "ImportError while loading conftest"

    monkeypatch.setattr(verify.subprocess, "run", lambda *a, **k: Ended())
    monkeypatch.setattr("sys.stdin", __import__("io").StringIO(json.dumps(
        {"gpu-1": {"verify": True, "expected": {}, "results": None, "rollout": {"stage": "verify"}}})))
    assert verify.main(["--dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("the verification could not run: pytest exited 1 without its JUnit report") and "conftest" in err
    host = json.loads((tmp_path / "fleet.json").read_text())["hosts"]["gpu-1"]
    assert host["result"] == "not verified" and host["reason"].startswith("the verification could not run: pytest exited 1")
