"""reports/sglang-targets.json (infertune/targets.py): the Prometheus file_sd list of the
fleet's sglang /metrics, written with the fleet report, merged over the last one."""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import yaml

from fakehost import REPO
from infertune import targets

# What the run resolved for each host (the role defaults under its own variables).
DEFAULTS = {"sglang_host": "0.0.0.0", "sglang_port": 30000, "sglang_enable_metrics": True}
RUN = {
    "gpu-a": {"address": "10.0.0.1", "expected": DEFAULTS},
    "gpu-b": {"address": "fd00::2", "expected": dict(DEFAULTS, sglang_port=31000)},
    # -e gives strings.
    "gpu-c": {"address": "10.0.0.3", "expected": dict(DEFAULTS, sglang_enable_metrics="false")},
    "gpu-d": {"address": "10.0.0.4", "expected": dict(DEFAULTS, sglang_host="192.168.7.4")},
}
FLEET = ["gpu-a", "gpu-b", "gpu-c", "gpu-d"]


def write(tmp_path, run=RUN, fleet=FLEET):
    path = targets.write(tmp_path / "reports", run, fleet)
    return json.loads(path.read_text()) if path else None


def test_the_fleet_metrics_endpoints_as_file_sd_targets(tmp_path):
    listed = write(tmp_path)
    assert listed == [
        {"labels": {"host": "gpu-a"}, "targets": ["10.0.0.1:30000"]},
        {"labels": {"host": "gpu-b"}, "targets": ["[fd00::2]:31000"]},
        # gpu-c serves no /metrics; gpu-d listens on one address only.
        {"labels": {"host": "gpu-d"}, "targets": ["192.168.7.4:30000"]},
    ]
    assert write(tmp_path) == listed
    assert oct((tmp_path / "reports" / "sglang-targets.json").stat().st_mode & 0o777) == "0o644"


def test_a_limited_run_keeps_the_other_hosts_and_drops_hosts_gone(tmp_path):
    (tmp_path / "reports").mkdir()
    (tmp_path / "reports" / "sglang-targets.json").write_text(json.dumps([
        {"labels": {"host": "gpu-b"}, "targets": ["old-b:30000"]},
        {"labels": {"host": "gpu-gone"}, "targets": ["gone:30000"]},
    ]))
    listed = write(tmp_path, run={"gpu-a": RUN["gpu-a"]})
    assert listed == [{"labels": {"host": "gpu-a"}, "targets": ["10.0.0.1:30000"]},
                      {"labels": {"host": "gpu-b"}, "targets": ["old-b:30000"]}]


def test_a_check_run_writes_nothing(tmp_path):
    run = {host: dict(entry, check_mode=True) for host, entry in RUN.items()}
    assert write(tmp_path, run=run) is None and not (tmp_path / "reports").exists()


def test_the_target_comes_from_the_run_alone(tmp_path):
    """No defaults file of its own: a port the run resolved is the port listed, and a host the run
    resolved no sglang settings for gets no target rather than one guessed from the role."""
    run = {"gpu-a": {"address": "10.0.0.1", "expected": dict(DEFAULTS, sglang_port=30123)},
           "gpu-b": {"address": "10.0.0.2", "expected": {}}}
    assert write(tmp_path, run=run, fleet=["gpu-a", "gpu-b"]) == [
        {"labels": {"host": "gpu-a"}, "targets": ["10.0.0.1:30123"]}]


# Listen address, the address Ansible reaches the host at, the target.
ADDRESSES = [("0.0.0.0", "10.0.0.1", "10.0.0.1:30000"), ("::", "fd00::1", "[fd00::1]:30000"),
             ("192.168.7.4", "10.0.0.4", "192.168.7.4:30000"), ("fd00::5", "10.0.0.5", "[fd00::5]:30000")]


def test_the_role_and_the_file_sd_list_compute_the_target_once(tmp_path):
    """The sglang role's sglang_metrics_target (load-balancer hooks) is targets.endpoint, through
    the sglang_target filter: rendered by ansible-playbook from the role's own vars file."""
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": {
        f"h{i}": {"sglang_host": listen, "ansible_host": reached, "sglang_port": 30000}
        for i, (listen, reached, _) in enumerate(ADDRESSES)}}}))
    (tmp_path / "play.yml").write_text(
        "- hosts: all\n  gather_facts: false\n  connection: local\n"
        f"  vars_files: [{REPO / 'roles/sglang/vars/main.yml'}]\n"
        "  tasks:\n    - ansible.builtin.debug: {msg: \"target={{ sglang_metrics_target }}\"}\n")
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    proc = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(inventory),
                           str(tmp_path / "play.yml")], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    for i, (listen, reached, wanted) in enumerate(ADDRESSES):
        assert re.search(r"^ok: \[h%d\] =>\s+msg: '?target=%s'?$" % (i, re.escape(wanted)), proc.stdout, re.M), proc.stdout
        assert targets.endpoint(listen, 30000, reached) == wanted
