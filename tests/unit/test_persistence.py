"""Persistence mode: the nvidia_persistence knob (the driver's unit, no files of ours), the plan's
line when the unit is missing, and when the GPU gate asks for persistence mode."""
import json
import os
import subprocess
import sys

import pytest
import yaml

from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node import knobs
from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node.gate import Gate
from ansible_collections.infertune.fleet.infertune import host_plan
from fakehost import REPO

CATALOG = yaml.safe_load((REPO / "roles/infertune/vars/main.yml").read_text())["infertune_knobs"]
ENTRY = next(e for e in CATALOG if e["name"] == "nvidia_persistence")
UNIT = "nvidia-persistenced.service"


class Systemctl:
    """Answers is-enabled/is-active as systemctl does ((rc, stdout) per verb) and show with the
    unit file's path (fragment), records every other call."""

    def __init__(self, enabled=(1, "disabled"), active=(3, "inactive"), fragment=""):
        self.state, self.calls = {"is-enabled": enabled, "is-active": active, "show": (0, str(fragment))}, []

    def __call__(self, argv):
        if argv[1] in self.state:
            rc, out = self.state[argv[1]]
            return rc, out + "\n" if out else "", ""
        self.calls.append(argv[1:])
        return 0, "", ""


def test_the_knob_is_the_drivers_unit_applied_before_the_drain():
    assert (ENTRY["role"], ENTRY["stage"], ENTRY["module"]) == ("nvidia", "boot", "systemd_unit")
    assert ENTRY["args"] == {"unit": UNIT, "files": [], "enabled": True, "started": True,
                             "wanted_by": "multi-user.target", "drop_exec_args": ["--no-persistence-mode"]}
    assert "paths" not in ENTRY and not ENTRY.get("drain") and not ENTRY.get("oneshot")
    assert ENTRY["toggle"] == "nvidia_persistence_enabled" and ENTRY["toggle"] in ENTRY["enabled"]


def test_check_mode_predicts_enable_and_start_and_runs_neither():
    systemctl = Systemctl()
    results = knobs.predict([ENTRY], runner=systemctl)
    assert results["nvidia_persistence"] == {
        "changed": True, "before": {"enabled": "disabled", "active": "inactive"},
        "after": {"enabled": "enabled", "active": "active"}, "reboot_required": False, "runtime_pending": False,
        "msg": UNIT + ": enabled, active", "differs": "enabled: disabled -> enabled; active: inactive -> active"}
    _, _, actions = knobs.run("systemd_unit", ENTRY["args"], Gate(check_mode=True, runner=systemctl))
    assert actions == ["systemctl enable " + UNIT, "systemctl restart " + UNIT] and systemctl.calls == []
    # Starting the daemon disturbs no client: a host with only this pending is neither drained nor rebooted.
    assert knobs.summarize([ENTRY], results, "when_needed") == {
        "pending": ["nvidia_persistence"], "failed": {}, "reboot": False, "reboot_reasons": [], "drain": False,
        "drain_reasons": [], "live": []}


def test_applied_it_enables_and_starts_then_stays_put():
    systemctl = Systemctl()
    contract, _, _ = knobs.run("systemd_unit", ENTRY["args"], Gate(runner=systemctl))
    assert systemctl.calls == [["enable", UNIT], ["restart", UNIT]] and contract["changed"]
    in_place = Systemctl(enabled=(0, "enabled"), active=(0, "active"))
    contract, _, actions = knobs.run("systemd_unit", ENTRY["args"], Gate(runner=in_place))
    assert not contract["changed"] and actions == [] and in_place.calls == []


# is-enabled for a unit no file defines: recent systemd prints not-found; older prints nothing
# on stdout (the error on stderr) and exits 1.
@pytest.mark.parametrize("answer, said", [((4, "not-found"), "not-found"), ((1, ""), "unknown")])
def test_a_missing_unit_fails_in_the_plan_naming_it(answer, said):
    systemctl = Systemctl(enabled=answer)
    results = knobs.predict([ENTRY], runner=systemctl)
    assert results["nvidia_persistence"] == {
        "failed": True, "changed": False, "msg": f"{UNIT}: no such unit on this host (systemctl is-enabled: {said})"}
    assert knobs.summarize([ENTRY], results, "when_needed")["failed"] == {
        "nvidia_persistence": results["nvidia_persistence"]["msg"]}
    assert systemctl.calls == []


def test_a_host_without_systemctl_is_said_once_not_as_missing_units():
    """No systemd (a container image, another init): every unit knob fails alike, in one line."""
    from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node.systemd import NO_SYSTEMCTL, unit_states

    def absent(argv):
        return 127, "", f"{argv[0]}: command not found"
    oneshot = next(e for e in CATALOG if e["name"] == "tuning_persistence")
    entries = [ENTRY, dict(oneshot, args=dict(oneshot["args"], files=[]))]
    results = knobs.predict(entries, runner=absent)
    assert {name: r["msg"] for name, r in results.items()} == {
        "nvidia_persistence": NO_SYSTEMCTL, "tuning_persistence": NO_SYSTEMCTL}
    assert unit_states([UNIT], absent) == {UNIT: {"enabled": NO_SYSTEMCTL, "active": NO_SYSTEMCTL}}
    failed = {name: r["msg"] for name, r in results.items()}
    assert host_plan.knob_failures("gpu-07", entries, failed) == [
        "gpu-07: nvidia_persistence, tuning_persistence (roles nvidia, tuning_persistence): systemctl not found"
        " (this host does not run systemd); set nvidia_persistence_enabled: false to leave it out"]


def test_a_static_unit_without_a_target_fails_instead_of_never_converging():
    # A packaged unit with no [Install] section, and no target named to start it at boot.
    args = dict(ENTRY["args"], wanted_by=None, drop_exec_args=None)
    results = knobs.predict([dict(ENTRY, args=args)], runner=Systemctl(enabled=(0, "static")))
    assert results["nvidia_persistence"]["msg"] == (
        f"{UNIT}: systemctl cannot enable it to start at boot (is-enabled: static)")


def test_a_unit_whose_files_are_written_is_not_missing(tmp_path):
    # A unit of ours (sglang, the oneshot) is unknown until its first install: no failure.
    files = [{"path": str(tmp_path / "x.service"), "content": "[Unit]\n"}]
    results = knobs.predict([{"name": "x", "module": "systemd_unit", "args": {"unit": "x.service", "files": files}}],
                            runner=Systemctl(enabled=(4, "not-found")))
    assert results["x"]["changed"] and "failed" not in results["x"]


# The catalog's variables on this machine, over every role's defaults, as the roles see them.
PLAY = """- name: Rules
  hosts: all
  gather_facts: false
  vars_files: %s
  tasks:
    - name: When the gate asks for persistence mode, before any change and after the knob
      ansible.builtin.debug:
        msg: "GATE {{ item[0] }}/{{ item[1] }}: plan={{ infertune_gate_check.require_persistence }}
          after={{ infertune_gate_check_applied.require_persistence }}"
      vars:
        gpu_gate_require_persistence: "{{ item[0] }}"
        nvidia_persistence_enabled: "{{ item[1] }}"
      loop: [[true, true], [true, false], [false, true], [false, false]]
      tags: [always]

    - name: The catalog's knobs as the plan names them
      ansible.builtin.debug:
        msg: "CATALOG {{ infertune_selected_knobs | map(attribute='name') | zip(infertune_selected_knobs | map(attribute='role'),
                        infertune_selected_knobs | map(attribute='toggle', default='')) | to_json }}"
      tags: [always]
"""


def play(tmp_path, *args):
    files = sorted(str(path) for path in REPO.glob("roles/*/defaults/main.yml"))
    files.append(str(REPO / "roles/infertune/vars/main.yml"))
    (tmp_path / "play.yml").write_text(PLAY % (files,))
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_STDOUT_CALLBACK="default",
               ANSIBLE_NOCOLOR="1", ANSIBLE_CALLBACK_RESULT_FORMAT="json")
    proc = subprocess.run([str(REPO / ".venv/bin/ansible-playbook"), "-i", "gpu-07,", "-c", "local",
                           "-e", f"ansible_python_interpreter={sys.executable}", str(tmp_path / "play.yml"), *args],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def test_the_gate_asks_for_persistence_where_it_should_be_on_by_then(tmp_path):
    out = play(tmp_path)
    # gpu_gate_require_persistence/nvidia_persistence_enabled: the plan leaves it to the knob;
    # after it (the proof after a reboot) the knob's run asks too.
    for case in ("GATE True/True: plan=False after=True", "GATE True/False: plan=True after=True",
                 "GATE False/True: plan=False after=True", "GATE False/False: plan=False after=False"):
        assert case in out, out
    # A run that leaves the knob out (--tags pcie) is not stopped by a daemon it does not touch.
    out = play(tmp_path, "--tags", "pcie")
    for case in ("GATE True/True: plan=False after=False", "GATE True/False: plan=True after=True"):
        assert case in out, out


def test_the_plan_names_the_host_the_unit_and_the_variable(tmp_path):
    out = play(tmp_path)
    line = next(line for line in out.splitlines() if '"msg": "CATALOG ' in line)
    names = json.loads(json.loads(line.split('"msg": ', 1)[1].rstrip(","))[len("CATALOG "):])
    catalog = [{"name": name, "role": role, "toggle": toggle or None} for name, role, toggle in names]
    failed = {"nvidia_persistence": f"{UNIT}: no such unit on this host"}
    assert host_plan.knob_failures("gpu-07", catalog, failed) == [
        f"gpu-07: nvidia_persistence (role nvidia): {UNIT}: no such unit on this host;"
        " set nvidia_persistence_enabled: false to leave it out"]


def selected(tmp_path, *args):
    out = play(tmp_path, *args)
    line = next(line for line in out.splitlines() if '"msg": "CATALOG ' in line)
    return [(name, role) for name, role, _ in json.loads(json.loads(line.split('"msg": ', 1)[1].rstrip(","))[len("CATALOG "):])]


def test_tags_skip_tags_and_toggles_choose_the_catalog_entries(tmp_path):
    catalog = yaml.safe_load((REPO / "roles/infertune/vars/main.yml").read_text())["infertune_knobs"]
    every = [(k["name"], k["role"]) for k in catalog]
    chosen = selected(tmp_path)
    assert chosen == [k for k in every if k in chosen]  # in catalog order
    assert {("sysctl", "sysctl"), ("kernel_package", "kernel"), ("amd_pstate", "cpu_power")} <= set(chosen)
    assert {role for _, role in selected(tmp_path, "--tags", "pcie")} == {"pcie"}
    assert selected(tmp_path, "--tags", "sysctl,boot_kernel") == [
        k for k in every if k[0] in ("sysctl", "boot_kernel")]
    assert not {role for _, role in selected(tmp_path, "--skip-tags", "cpu_power")} & {"cpu_power"}
    assert "amd_pstate" not in {n for n, _ in selected(tmp_path, "--skip-tags", "amd_pstate")}
    assert "nvidia_persistence" not in {n for n, _ in selected(tmp_path, "-e", "nvidia_persistence_enabled=false")}
    assert "tuning_persistence" not in {r for _, r in selected(tmp_path, "-e", "tuning_persistence_enabled=false")}
    assert {r for _, r in selected(tmp_path, "-e", "tuning_persistence_enabled=true")} >= {"tuning_persistence"}
