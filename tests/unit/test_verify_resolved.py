"""The values infertune_verify hands the verification are what Ansible resolves for each host in
the verify play: the roles' defaults under the host's inventory, facts and -e, templated in the
host's context, secrets left out. Run by ansible-playbook on this machine (local connection)
with a stand-in action that reads the values as plugins/action/infertune_verify.py does, without
starting pytest."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from infertune import specs

REPO = Path(__file__).resolve().parents[2]
SPEC_ROLES = ["pcie", "cpu_power", "sysctl", "sglang", "gpu_gate"]

# Reads as the real action: the verify play's resolution of the named roles' inputs.
STAND_IN = '''
import json

from ansible_collections.infertune.fleet.infertune import COLLECTION, specs
from ansible_collections.infertune.fleet.plugins.action.infertune_verify import ActionModule as Verify, inputs


class ActionModule(Verify):
    def run(self, tmp=None, task_vars=None):
        names = inputs(specs.load_specs(COLLECTION), self._task.args["roles"])
        views = self.resolved(task_vars, self._task.args["hosts"])
        with open(self._task.args["out"], "w") as handle:
            json.dump({h: {n: v[n] for n in names if n in v} for h, v in views.items()}, handle)
        return {"changed": False}
'''

PLAY = """- name: Verify, as playbooks/verify.yml does (the role's tasks skipped)
  hosts: gpu_nodes
  gather_facts: false
  tasks:
    - name: The verify play's role
      ansible.builtin.import_role:
        name: infertune.fleet.infertune
        tasks_from: verify
      when: false
    - name: A fact set during the run
      ansible.builtin.set_fact:
        pcie_mrrs_vendor: "0x1234"
      when: inventory_hostname == 'gpu-02'
    - name: Read the values
      resolved_probe:
        roles: %s
        hosts: "{{ ansible_play_hosts }}"
        out: "{{ out }}"
      run_once: true
""" % json.dumps(SPEC_ROLES)


@pytest.fixture(scope="module")
def values(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("resolved")
    (tmp / "action_plugins").mkdir()
    (tmp / "action_plugins" / "resolved_probe.py").write_text(STAND_IN)
    (tmp / "play.yml").write_text(PLAY)
    (tmp / "hosts.yml").write_text(yaml.safe_dump({"gpu_nodes": {
        "vars": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                 # Templated in each host's context.
                 "sglang_served_model_name": "{{ inventory_hostname }}-glm"},
        "hosts": {"gpu-01": {}, "gpu-02": {"pcie_max_read_request": "{{ 1024 * 2 }}", "sglang_api_key": "s3cret"}}}}))
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_ACTION_PLUGINS=str(tmp / "action_plugins"))
    proc = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(tmp / "hosts.yml"),
                           str(tmp / "play.yml"), "-e", "cpu_power_governor=schedutil", "-e", f"out={tmp / 'values.json'}"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads((tmp / "values.json").read_text())


def test_every_input_of_the_roles_is_resolved_for_every_host(values):
    names = {n for role in SPEC_ROLES for n, o in specs.load_specs()[role].options.items()
             if not o.spec.get("no_log")}
    defaults = specs.role_defaults()
    for host in ("gpu-01", "gpu-02"):
        # Every input with a default reaches the verification, set by the inventory or not.
        assert set(values[host]) == {n for n in names if n in defaults}
    # The role's default where nothing sets it.
    assert values["gpu-01"]["pcie_max_read_request"] == defaults["pcie_max_read_request"]
    assert values["gpu-01"]["sysctl_settings"] == defaults["sysctl_settings"]


def test_inventory_facts_and_extra_vars_win_templated_per_host(values):
    assert values["gpu-02"]["pcie_max_read_request"] == 2048
    assert [values[h]["sglang_served_model_name"] for h in ("gpu-01", "gpu-02")] == ["gpu-01-glm", "gpu-02-glm"]
    assert {values[h]["cpu_power_governor"] for h in values} == {"schedutil"}
    assert values["gpu-02"]["pcie_mrrs_vendor"] == "0x1234"
    assert values["gpu-01"]["pcie_mrrs_vendor"] == specs.role_defaults()["pcie_mrrs_vendor"]


def test_secrets_are_never_handed_over(values):
    assert "sglang_api_key" not in values["gpu-02"]
    assert "s3cret" not in json.dumps(values)


def test_no_role_and_no_check_reads_a_defaults_file_of_its_own():
    """One reading of every value: Ansible's. A role that looked up another role's defaults file,
    or a check that rendered the roles' defaults, would verify against a second reading."""
    readers = [str(path.relative_to(REPO)) for path in sorted((REPO / "roles").glob("*/*/*.yml"))
               if "defaults/main.yml" in path.read_text()]
    readers += [str(path.relative_to(REPO)) for path in sorted((REPO / "tests" / "verify").glob("*.py"))
                if "defaults" in path.read_text()]
    # The verification's and the report's Python (the input check, the docs generators and the defaults
    # generator read or write the defaults files as specs: which names a role declares, what the tables
    # print, what the specs say).
    readers += [str(path.relative_to(REPO)) for path in sorted((REPO / "infertune").glob("*.py"))
                if path.name not in ("specs.py", "validation.py", "docs_vars.py", "docs_knobs.py", "role_defaults.py")
                and ("\"defaults\"" in path.read_text() or "defaults/main.yml" in path.read_text())]
    assert readers == []
