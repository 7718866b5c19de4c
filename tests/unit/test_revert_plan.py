"""The revert's plan: every kind has a revert; the catalog's revert selection (every knob but sglang,
whatever its toggle, each with the verb revert, the oneshot among the boot-time knobs); the plan
action with verb revert reads every entry, unit knobs too, once, and publishes a plan that says
revert; predict and the knob module run the verb an entry names."""
from ansible.parsing.dataloader import DataLoader
from ansible.plugins.action import ActionBase
from ansible.template import Templar

import yaml

from ansible_collections.infertune.fleet.plugins.action import infertune_host_plan as action
from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node import knobs
from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node.kinds import KINDS
from fakehost import REPO, read, write
from roletemplates import trusted
from test_host_plan_action import VARIABLES, FakeTask

CATALOG = yaml.safe_load((REPO / "roles/infertune/vars/main.yml").read_text())


def test_every_kind_has_a_revert_taking_the_record():
    missing = sorted(name for name, kind in KINDS.items() if not callable(kind.revert))
    assert missing == [], "a kind without revert: %s" % ", ".join(missing)
    # A kind that records nothing says in its own code why it needs no record.
    assert sorted(name for name, kind in KINDS.items() if kind.original is None) == ["apt_hold", "deb_package"]


def test_only_sglang_is_left_out_of_the_revert():
    kept = [entry["name"] for entry in CATALOG["infertune_knobs"] if entry.get("revert") == "keep"]
    assert kept == ["sglang"]
    assert {entry.get("revert", "") for entry in CATALOG["infertune_knobs"]} <= {"", "keep"}
    oneshot = next(e for e in CATALOG["infertune_knobs"] if e["name"] == "tuning_persistence")
    assert oneshot["args"]["remove"] == ["/run/infertune"]


def test_predict_runs_each_entry_with_its_verb(tmp_path):
    root = str(tmp_path)
    write(root, "/proc/sys/vm/swappiness", "10\n")
    write(root, "/var/lib/infertune/original/swap.json", '{"state": {"files": {}, "live": {"vm.swappiness": "60"}}}')
    entry = {"name": "swap", "module": "sysctl", "stage": "runtime",
             "args": {"settings": [{"name": "vm.swappiness", "value": "10"}], "path": "/etc/sysctl.d/x.conf"}}
    applied = knobs.predict([entry], root)["swap"]
    reverted = knobs.predict([dict(entry, verb="revert")], root)["swap"]
    assert applied["changed"] and applied["after"] == {"vm.swappiness": "10"}
    assert reverted["changed"] and reverted["after"] == {"vm.swappiness": "60"} and reverted["runtime_pending"]
    assert read(root, "/proc/sys/vm/swappiness") == "10"


def planned(monkeypatch, answer):
    reads = []

    def execute_module(self, module_name=None, module_args=None, task_vars=None):
        reads.append(module_args)
        return answer

    monkeypatch.setattr(ActionBase, "run", lambda self, tmp=None, task_vars=None: {})
    monkeypatch.setattr(action.ActionModule, "_execute_module", execute_module)
    monkeypatch.setattr(action, "own_machine_id", lambda: "m-1")
    plugin = action.ActionModule.__new__(action.ActionModule)
    plugin._task = FakeTask({"verb": "revert", "read": "read_options", "catalog": "catalog", "knobs": "all_knobs"})
    # The unit knob's content names the installed sglang, which no revert read looks for.
    task_vars = trusted(dict(VARIABLES, inventory_hostname="gpu-1", ansible_check_mode=True,
                             infertune_plan_backend={"sglang_version": "0.5.23"}))
    plugin._templar = Templar(loader=DataLoader(), variables=task_vars)
    return plugin.run(task_vars=task_vars), reads


def test_the_revert_plan_reads_every_entry_once_with_the_verb_revert(monkeypatch):
    answer = {"plan": {"pending": ["sglang"], "failed": {}, "reboot": False, "drain": False, "machine_id": "m-2",
                       "results": {"sglang": {"changed": True, "msg": "sglang.service: files removed"}}}}
    got, reads = planned(monkeypatch, answer)
    assert len(reads) == 1 and "fingerprint" not in reads[0]
    assert [(k["name"], k["verb"]) for k in reads[0]["knobs"]] == [("sysctl", "revert"), ("sglang", "revert"),
                                                                  ("governor", "revert")]
    assert reads[0]["reboot_strategy"] == "auto" and "doc" not in reads[0]["knobs"][1]
    host_vars, groups = got["add_host"]["host_vars"], got["add_host"]["groups"]
    assert host_vars["infertune_plan"]["verb"] == "revert" and groups == ["infertune_pending"]
    assert host_vars["infertune_results"]["sglang"]["msg"] == "sglang.service: files removed"


def test_a_knob_that_cannot_be_put_back_stops_the_host_in_the_plan(monkeypatch):
    answer = {"plan": {"pending": [], "failed": {"governor": "cannot read x"}, "reboot": False, "drain": False,
                       "machine_id": "m-2", "results": {"governor": {"failed": True, "msg": "cannot read x"}}}}
    got, _ = planned(monkeypatch, answer)
    host_vars, groups = got["add_host"]["host_vars"], got["add_host"]["groups"]
    assert groups == [] and host_vars["infertune_failure"] == "gpu-1: governor (role cpu_power): cannot read x"


def test_the_knob_module_keeps_no_record_where_asked_not_to(tmp_path, capsys):
    from moduleharness import run_module
    path = tmp_path / "infertune-test.conf"
    rc, result = run_module("knob", {"name": "revert_record_off", "module": "modprobe_options", "record": False,
                                     "args": {"options": {"nvidia": {"NVreg_X": 1}}, "path": str(path)}}, capsys)
    assert rc == 0 and result["changed"] and path.exists()
    assert not any("/var/lib/infertune" in action for action in result["actions"])
