"""infertune.fleet.infertune_publish (plugins/action/infertune_publish.py, infertune/publish.py): the
one way a role publishes into the run's record - the stage a host reached, knob results merged into
infertune_results, the reason it ended, the GPUs the gate read - as the host's variables (add_host's
answer, as the plan publishes the record), never changed, the same under --check."""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.plugins.action import ActionBase
from ansible.template import Templar

from ansible_collections.infertune.fleet.plugins.action import infertune_publish as action
from infertune import publish
from roletemplates import trusted

REPO = Path(__file__).resolve().parents[2]
DRAIN = {"changed": True, "before": "active", "after": "stopped", "hooks": ["before_drain"]}


def test_reached_names_the_stage():
    assert publish.host_vars(None, reached="drain") == {"infertune_reached": "drain"}


def test_results_replace_each_knobs_result_and_keep_the_others():
    current = {"cpufreq": {"changed": False}, "drain": DRAIN}
    got = publish.host_vars(current, results={"cpufreq": {"changed": True, "applied": True}, "reboot": {"changed": False}})
    assert got == {"infertune_results": {"cpufreq": {"changed": True, "applied": True}, "drain": DRAIN,
                                         "reboot": {"changed": False}}}
    # The host's variables are never changed in place.
    assert current == {"cpufreq": {"changed": False}, "drain": DRAIN}


def test_update_merges_fields_into_a_knobs_result_and_creates_a_missing_one():
    """As the kernel package's result (into the plan's entry) and the hooks (into the drain's)."""
    current = {"kernel_package": {"changed": True, "before": None, "after": "6.8", "applied": False}, "drain": DRAIN}
    got = publish.host_vars(current, update={"kernel_package": {"changed": False, "applied": True},
                                             "drain": {"hooks": ["before_drain", "after_serve"]}})
    assert got["infertune_results"] == {
        "kernel_package": {"changed": False, "before": None, "after": "6.8", "applied": True},
        "drain": dict(DRAIN, hooks=["before_drain", "after_serve"])}
    assert publish.host_vars(None, update={"drain": {"hooks": ["after_serve"]}}) == {
        "infertune_results": {"drain": {"hooks": ["after_serve"]}}}


def test_results_apply_before_update_and_every_name_can_go_in_one_call():
    got = publish.host_vars({"a": {"x": 1}}, reached="runtime", results={"a": {"y": 2}}, update={"a": {"z": 3}},
                            failure="apply: failed", gpus=[{"index": 0}])
    assert got == {"infertune_reached": "runtime", "infertune_results": {"a": {"y": 2, "z": 3}},
                   "infertune_failure": "apply: failed", "infertune_gpus": [{"index": 0}]}


def test_a_publication_without_results_leaves_infertune_results_alone():
    assert "infertune_results" not in publish.host_vars({"a": {}}, reached="verify", failure="x")


@pytest.mark.parametrize("options, error", [
    ({}, "nothing to publish"),
    ({"reached": "rebooting"}, "reached: one of plan, boot config, drain"),
    ({"results": ["drain"]}, "results: a mapping of knob names"),
    ({"results": {"drain": "stopped"}}, "results.drain: a mapping"),
    ({"update": {"": {}}}, "update: a knob name must be a non-empty string"),
    ({"failure": ""}, "failure: the reason, a non-empty string"),
    ({"gpus": {"index": 0}}, "gpus: a list"),
])
def test_bad_input_is_refused_with_the_reason(options, error):
    with pytest.raises(publish.PublishError, match=error):
        publish.host_vars({}, **options)


def test_a_record_that_is_not_a_mapping_is_not_merged_into():
    with pytest.raises(publish.PublishError, match="infertune_results is not a mapping"):
        publish.host_vars("oops", results={"a": {}})
    with pytest.raises(publish.PublishError, match="update.a: the knob's result is not a mapping"):
        publish.host_vars({"a": "x"}, update={"a": {"b": 1}})


class FakeTask:
    def __init__(self, args):
        self.args = args


def published(monkeypatch, args, **variables):
    monkeypatch.setattr(ActionBase, "run", lambda self, tmp=None, task_vars=None: {})
    plugin = action.ActionModule.__new__(action.ActionModule)
    plugin._task = FakeTask(args)
    task_vars = trusted(dict(variables, inventory_hostname="gpu-1"))
    plugin._templar = Templar(loader=DataLoader(), variables=task_vars)
    return plugin.run(task_vars=task_vars)


@pytest.mark.parametrize("check_mode", [False, True])
def test_the_action_merges_into_the_hosts_record_and_answers_as_add_host(monkeypatch, check_mode):
    got = published(monkeypatch, {"reached": "drain", "update": {"drain": {"hooks": ["after_serve"]}}},
                    infertune_results={"drain": DRAIN, "cpufreq": {"changed": False}}, ansible_check_mode=check_mode)
    assert got["changed"] is False and "failed" not in got
    assert got["add_host"] == {"host_name": "gpu-1", "groups": [], "host_vars": {
        "infertune_reached": "drain",
        "infertune_results": {"drain": dict(DRAIN, hooks=["after_serve"]), "cpufreq": {"changed": False}}}}


def test_the_action_reads_a_record_that_is_a_template_and_starts_one_where_none_is(monkeypatch):
    got = published(monkeypatch, {"results": {"b": {"changed": True}}},
                    infertune_results="{{ {'a': {'changed': false}} }}")
    assert got["add_host"]["host_vars"]["infertune_results"] == {"a": {"changed": False}, "b": {"changed": True}}
    got = published(monkeypatch, {"results": {"b": {"changed": True}}})
    assert got["add_host"]["host_vars"]["infertune_results"] == {"b": {"changed": True}}


def test_the_action_fails_on_bad_input_and_publishes_nothing(monkeypatch):
    got = published(monkeypatch, {"reached": "somewhere"})
    assert got["failed"] is True and "add_host" not in got
    assert got["msg"].startswith("infertune_publish: reached: one of plan, boot config")


def test_the_action_needs_no_connection_and_runs_in_check_mode():
    assert action.ActionModule._requires_connection is False
    assert action.ActionModule._supports_check_mode is True
    assert action.ActionModule._VALID_ARGS == frozenset(publish.OPTIONS)


# The plan's record (add_host, as infertune_host_plan answers), then each stage's publication as
# the roles make them; a last task keeps what a later play reads.
PLAY = """- name: Plan
  hosts: gpu_nodes
  gather_facts: false
  tasks:
    - name: The plan's record
      ansible.builtin.add_host:
        name: "{{ item }}"
        infertune_results:
          kernel_package: {changed: true, before: null, after: "6.8", applied: false}
          cpufreq: {changed: true, before: balance_power, after: performance}
      loop: "{{ ansible_play_hosts }}"
      changed_when: false

- name: Roll out
  hosts: gpu_nodes
  gather_facts: false
  tasks:
    - name: Record the boot config stage
      infertune.fleet.infertune_publish:
        reached: boot config
      changed_when: false
    - name: Publish the package's result
      infertune.fleet.infertune_publish:
        update:
          kernel_package: {changed: true, applied: "{{ not ansible_check_mode }}"}
      changed_when: false
    - name: Record the drain stage
      infertune.fleet.infertune_publish:
        reached: drain
      changed_when: false
    - name: Publish the drain
      infertune.fleet.infertune_publish:
        results:
          drain:
            changed: true
            before: active
            applied: "{{ not ansible_check_mode }}"
            hooks: "{{ infertune_results.drain.hooks | default([]) }}"
      changed_when: false
    - name: Record a hook
      infertune.fleet.infertune_publish:
        update:
          drain:
            hooks: "{{ infertune_results.drain.hooks | default([]) + ['after_serve'] }}"
      changed_when: false
    - name: Publish the results of a stage, as the knobs' loop does (roles/infertune/tasks/knobs.yml)
      infertune.fleet.infertune_publish:
        results: >-
          {%- set ns = namespace(out={}) -%}
          {%- for applied in applied_knobs -%}
          {%-   set ns.out = ns.out | combine({applied.item: {
                  'changed': applied.changed, 'before': applied.before, 'after': applied.after,
                  'applied': not ansible_check_mode}}) -%}
          {%- endfor -%}
          {{ ns.out }}
      vars:
        applied_knobs:
          - {item: cpufreq, changed: false, before: performance, after: performance}
          - {item: sysctl, changed: true, before: {vm.swappiness: "60"}, after: {vm.swappiness: "10"}}
      changed_when: false
    - name: A later task of the play sees the record
      ansible.builtin.assert:
        that:
          - infertune_reached == 'drain'
          - infertune_results.drain.hooks == ['after_serve']
          - infertune_results.cpufreq.after == 'performance'
          - infertune_results.sysctl.after['vm.swappiness'] == '10'

- name: Verify
  hosts: gpu_nodes
  gather_facts: false
  tasks:
    - name: Record the verify stage
      infertune.fleet.infertune_publish:
        reached: verify
      changed_when: false
    - name: Keep the record
      ansible.builtin.copy:
        content: "{{ {'reached': infertune_reached, 'results': infertune_results} | to_json }}"
        dest: "{{ out }}/{{ inventory_hostname }}.json"
        mode: "0644"
      delegate_to: localhost
      check_mode: false
      changed_when: false  # the test's own file, not the record
"""


@pytest.mark.parametrize("check", [False, True], ids=["run", "check"])
def test_a_run_publishes_the_record_stage_by_stage_without_a_change(tmp_path, check):
    inventory = {"all": {"vars": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable},
                         "children": {"gpu_nodes": {"hosts": {"gpu-a": {}, "gpu-b": {}}}}}}
    (tmp_path / "inventory.yml").write_text(yaml.safe_dump(inventory))
    (tmp_path / "play.yml").write_text(PLAY)
    argv = [str(Path(sys.executable).parent / "ansible-playbook"), str(tmp_path / "play.yml"),
            "-i", str(tmp_path / "inventory.yml"), "-e", f"out={tmp_path}"] + (["--check"] if check else [])
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    proc = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    for host in ("gpu-a", "gpu-b"):
        assert re.search(rf"^{host}\s*: ok=\d+\s+changed=0\s", out.split("PLAY RECAP")[1], re.M), out[-2000:]
        record = json.loads((tmp_path / f"{host}.json").read_text())
        assert record["reached"] == "verify"
        assert record["results"] == {
            "kernel_package": {"changed": True, "before": None, "after": "6.8", "applied": not check},
            "cpufreq": {"changed": False, "before": "performance", "after": "performance", "applied": not check},
            "sysctl": {"changed": True, "before": {"vm.swappiness": "60"}, "after": {"vm.swappiness": "10"},
                       "applied": not check},
            "drain": {"changed": True, "before": "active", "applied": not check, "hooks": ["after_serve"]}}
