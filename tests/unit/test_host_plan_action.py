"""plugins/action/infertune_host_plan.py: one task plans a host - the first read, the catalog
resolved with its answer bound, a second read only where a unit differs (with the backend check
resolved then) and the record, published as the host's variables with the group it joins (none
for a host its plan stops), as add_host answers; an unreachable host where the task ignores them."""
import collections
import hashlib

import pytest
from ansible._internal._templating import _engine
from ansible.errors import AnsibleConnectionFailure
from ansible.parsing.dataloader import DataLoader
from ansible.plugins.action import ActionBase
from ansible.template import Templar

from ansible_collections.infertune.fleet.plugins.action import infertune_host_plan as action
from roletemplates import trusted

SHA1 = hashlib.sha1(b"release 0.5.23\n").hexdigest()
# Stand-ins for the role's variables, resolved by name with the reads' answers bound: the unit
# file's content comes from the release the first read found.
VARIABLES = {
    "all_knobs": [{"name": "sysctl", "role": "numa_balancing", "module": "sysctl", "doc": {"label": "x"}, "rules": {"v": ["int"]},
                 "args": {}},
                # A controller-only key is never rendered (this one would fail).
                {"name": "sglang", "role": "sglang", "module": "systemd_unit", "paths": ["/u"],
                 "doc": {"knob": "{{ never_defined }}"},
                 "args": {"unit": "sglang.service", "enabled": True, "started": True,
                          "files": [{"path": "/u", "content": "release {{ infertune_plan_backend.sglang_version }}\n"}]}},
                {"name": "governor", "role": "cpu_power", "module": "sysfs", "args": {"value": "{{ 'perf' ~ 'ormance' }}"}},
                # Left out by the selection (a run with --skip-tags pcie).
                {"name": "mrrs", "role": "pcie", "module": "pcie_mrrs", "args": {"value": 4096}}],
    # The run's selection, as the role's is: a template over every entry.
    "catalog": "{{ all_knobs | rejectattr('role', 'eq', 'pcie') }}",
    "backend_check": "{{ {'venv': '/v', 'changed': infertune_units_changed} }}",
    "problems": "{{ ['argv refused'] if infertune_plan_argv_check.refused | default(false) else [] }}",
    # The read's options reference the selection, as the role's do.
    "read_options": {"reboot_strategy": "{{ 'auto' if catalog | length == 3 else 'never' }}"},
}


class FakeTask:
    def __init__(self, args, ignore_unreachable=False):
        self.args = args
        self.ignore_unreachable = ignore_unreachable


def published(got):
    """The host variables and the groups the action publishes for its host (gpu-1)."""
    assert got["add_host"]["host_name"] == "gpu-1"
    return got["add_host"]["host_vars"], got["add_host"]["groups"]


def first_plan(sha1=SHA1, pending=(), failed=None, machine_id="m-1"):
    return {"plan": {"pending": list(pending), "failed": failed or {}, "reboot": False, "drain": False, "results": {},
                     "machine_id": machine_id, "gpus": {"gpus": [{"index": 0}], "problems": []},
                     "backend": {"sglang_version": "0.5.23"},
                     "fingerprint": {"files": {"/u": {"sha1": sha1, "mode": "0644"}},
                                     "units": {"sglang.service": {"enabled": "enabled", "active": "active"}}}}}


def planned(monkeypatch, answers, allow_control_node=False, ignore_unreachable=False, check_mode=False, **variables):
    """Run the action with module answers in order (an exception is raised); returns (result, the
    options each read got)."""
    reads = []

    def execute_module(self, module_name=None, module_args=None, task_vars=None):
        assert module_name == "infertune.fleet.infertune_plan"
        reads.append(module_args)
        answer = answers[len(reads) - 1]
        if isinstance(answer, Exception):
            raise answer
        return answer

    monkeypatch.setattr(ActionBase, "run", lambda self, tmp=None, task_vars=None: {})
    monkeypatch.setattr(action.ActionModule, "_execute_module", execute_module)
    monkeypatch.setattr(action, "own_machine_id", lambda: "m-1")
    plugin = action.ActionModule.__new__(action.ActionModule)
    plugin._task = FakeTask({"read": "read_options", "catalog": "catalog", "knobs": "all_knobs",
                             "second_backend": "backend_check", "problems": "problems",
                             "allow_control_node": allow_control_node}, ignore_unreachable)
    task_vars = trusted(dict(VARIABLES, inventory_hostname="gpu-1", ansible_check_mode=check_mode, **variables))
    plugin._templar = Templar(loader=DataLoader(), variables=task_vars)
    return plugin.run(task_vars=task_vars), reads


def test_a_converged_host_is_read_once_and_joins_the_converged_group(monkeypatch):
    got, reads = planned(monkeypatch, [first_plan()], allow_control_node="true", check_mode=True)
    assert len(reads) == 1
    host_vars, groups = published(got)
    assert got["changed"] is False and host_vars["infertune_plan"]["pending"] == []
    assert host_vars["infertune_plan"]["results"]["sglang"]["msg"] == "sglang.service: files in place"
    assert host_vars["infertune_results"]["sglang"]["msg"] == "sglang.service: files in place"
    assert host_vars["infertune_gpus"] == [{"index": 0}] and host_vars["sglang_support"] == {"sglang_version": "0.5.23"}
    assert host_vars["infertune_check_mode"] is True and "infertune_failure" not in host_vars
    assert groups == ["infertune_converged"] and "add_group" not in got


def test_documentation_keys_of_the_catalog_never_reach_the_host(monkeypatch):
    _, reads = planned(monkeypatch, [first_plan()], allow_control_node=True)
    assert reads[0]["knobs"] == [{"name": "sysctl", "role": "numa_balancing", "module": "sysctl", "args": {}},
                                 {"name": "governor", "role": "cpu_power", "module": "sysfs", "args": {"value": "performance"}}]


def test_the_first_read_gets_the_catalogs_knobs_and_the_units_fingerprint(monkeypatch):
    """The read's options are the task's, with the knobs (all but the unit knobs) and the unit
    knobs' paths and units taken from the catalog; the record sees the catalog in its order."""
    seen = {}
    record = action.host_plan.record

    def spy(host, catalog, *args, **kwargs):
        seen["catalog"] = [knob["name"] for knob in catalog]
        return record(host, catalog, *args, **kwargs)

    monkeypatch.setattr(action.host_plan, "record", spy)
    _, reads = planned(monkeypatch, [first_plan()], allow_control_node=True)
    assert reads[0]["reboot_strategy"] == "auto"
    assert [k["name"] for k in reads[0]["knobs"]] == ["sysctl", "governor"]
    assert reads[0]["fingerprint"] == {"files": ["/u"], "units": ["sglang.service"]}
    assert seen["catalog"] == ["sysctl", "sglang", "governor"]


def compiled(monkeypatch):
    """How often each template is compiled (ansible-core's engine: a reference renders anew)."""
    counts = collections.Counter()
    compile_template = _engine.TemplateEngine._compile_template

    def counting(self, template, options):
        counts[str(template)] += 1
        return compile_template(self, template, options)

    monkeypatch.setattr(_engine.TemplateEngine, "_compile_template", counting)
    return counts


@pytest.mark.parametrize("differs", [False, True])
def test_the_selection_is_rendered_once_and_the_reads_see_what_it_selects(monkeypatch, differs):
    """The read's options, the unit knobs resolved after the read and the problems reference the
    selection; it is rendered once, the entries it names bound in its place (a unit knob still
    renders with the release the read found)."""
    counts = compiled(monkeypatch)
    answers = [first_plan(sha1="0" * 40), {"plan": {"pending": ["sglang"], "failed": {}, "results": {}}}] if differs \
        else [first_plan()]
    got, reads = planned(monkeypatch, answers, allow_control_node=True)
    assert counts[VARIABLES["catalog"]] == 1, counts
    assert reads[0]["reboot_strategy"] == "auto" and [k["name"] for k in reads[0]["knobs"]] == ["sysctl", "governor"]
    if differs:
        assert reads[1]["knobs"][0]["args"]["files"][0]["content"] == "release 0.5.23\n"
    else:
        assert published(got)[0]["infertune_plan"]["results"]["sglang"]["msg"] == "sglang.service: files in place"


def test_what_the_first_resolution_rendered_is_not_rendered_again(monkeypatch):
    """A unit file that holds other knobs' arguments (the boot-time oneshot's configuration) and
    the unit knobs' paths read what the first resolution rendered for the read and the fingerprint:
    each is compiled once per host. A rendered value is data, never a template again."""
    counts = compiled(monkeypatch)
    knobs = [dict(knob) for knob in VARIABLES["all_knobs"]]
    knobs[1] = dict(knobs[1], paths="{{ ['/u'] }}", args=dict(knobs[1]["args"], files=[
        {"path": "/u", "content": "{{ all_knobs | selectattr('name', 'eq', 'governor') | map(attribute='args') | first"
                                  " | to_json }} {{ all_knobs[0].args.text }}\n"}]))
    knobs[0] = dict(knobs[0], args={"text": "{{ '{{ never_defined }}' }}"})
    content = '{"value": "performance"} {{ never_defined }}\n'
    answer = first_plan(sha1=hashlib.sha1(content.encode()).hexdigest())
    got, reads = planned(monkeypatch, [answer], allow_control_node=True, all_knobs=knobs)
    assert counts["{{ 'perf' ~ 'ormance' }}"] == 1, counts
    assert counts["{{ ['/u'] }}"] == 1, counts
    assert counts["{{ '{{ never_defined }}' }}"] == 1, counts
    assert reads[0]["fingerprint"] == {"files": ["/u"], "units": ["sglang.service"]}
    assert reads[0]["knobs"][0]["args"] == {"text": "{{ never_defined }}"}
    # The file rendered from them is the one deployed: the host is converged.
    assert published(got)[1] == ["infertune_converged"]


def test_flat_flattens_nested_lists_as_ansibles_flatten_filter_does():
    assert action.host_plan.flat([["/a", ["/b"]], [], "/c", None]) == ["/a", "/b", "/c"]


def test_rendered_over_replaces_only_the_keys_an_entry_has():
    entries = [{"name": "a", "args": "{{ x }}", "doc": "{{ y }}"}, {"name": "b", "enabled": "{{ z }}"}, {"name": "c"}]
    got = action.host_plan.rendered_over(entries, {"a": {"name": "a", "args": {"v": 1}},
                                                   "b": {"paths": ["/p"]}})
    assert got == [{"name": "a", "args": {"v": 1}, "doc": "{{ y }}"}, {"name": "b", "enabled": "{{ z }}"}, {"name": "c"}]
    assert entries[0]["args"] == "{{ x }}"


@pytest.mark.parametrize("entries", ["{{ [] }}", [{"name": "sysctl"}], [{"name": "sysctl"}, {"name": "sysctl"}]],
                         ids=["not-a-list", "unnamed-selected", "duplicate-names"])
def test_a_selection_not_made_of_distinct_named_entries_is_rendered_at_each_reference(monkeypatch, entries):
    """Nothing is bound where the knobs variable does not hold every entry the selection names,
    once: the plan is the same, the selection rendered for each reference."""
    counts = compiled(monkeypatch)
    got, reads = planned(monkeypatch, [first_plan()], allow_control_node=True,
                         catalog=VARIABLES["catalog"].replace("all_knobs", "real_knobs"),
                         real_knobs=VARIABLES["all_knobs"], all_knobs=entries)
    assert counts[VARIABLES["catalog"].replace("all_knobs", "real_knobs")] > 1
    assert reads[0]["reboot_strategy"] == "auto" and [k["name"] for k in reads[0]["knobs"]] == ["sysctl", "governor"]
    assert published(got)[1] == ["infertune_converged"]


def test_a_unit_that_differs_gets_a_second_read_whose_answer_the_record_sees(monkeypatch):
    second = {"plan": {"pending": ["sglang"], "failed": {}, "drain": True, "results": {"sglang": {"changed": True}},
                       "backend": {"verdict": "supported", "reason": "ok", "findings": [], "refused": True}}}
    got, reads = planned(monkeypatch, [first_plan(sha1="0" * 40), second], allow_control_node=True)
    assert len(reads) == 2
    assert [k["name"] for k in reads[1]["knobs"]] == ["sglang"] and reads[1]["secret_files"] == {"sglang": []}
    # Resolved with the unit knobs that differ bound.
    assert reads[1]["backend"] == {"venv": "/v", "changed": ["sglang"]}
    host_vars, groups = published(got)
    assert host_vars["infertune_plan"]["pending"] == ["sglang"] and host_vars["infertune_plan"]["drain"] is True
    assert host_vars["sglang_support"]["verdict"] == "supported" and host_vars["sglang_support"]["sglang_version"] == "0.5.23"
    # The second read's command-line check reaches the problems; the host is stopped.
    assert host_vars["infertune_failure"] == "argv refused" and groups == []


def test_the_control_node_is_stopped_unless_allowed(monkeypatch):
    host_vars, groups = published(planned(monkeypatch, [first_plan()])[0])
    assert host_vars["infertune_failure"].startswith("gpu-1: is the control node") and groups == []
    host_vars, groups = published(planned(monkeypatch, [first_plan(machine_id="other")])[0])
    assert "infertune_failure" not in host_vars and groups == ["infertune_converged"]


@pytest.mark.parametrize("which", [0, 1])
def test_a_read_that_fails_fails_the_task_with_its_answer(monkeypatch, which):
    failed = {"failed": True, "msg": "boom"}
    answers = [failed] if which == 0 else [first_plan(sha1="0" * 40), failed]
    got, reads = planned(monkeypatch, answers, allow_control_node=True)
    assert got["failed"] is True and got["msg"] == "boom" and "add_host" not in got and len(reads) == which + 1


@pytest.mark.parametrize("which", [0, 1])
def test_an_unreachable_host_is_unreachable_unless_the_task_ignores_it(monkeypatch, which):
    lost = AnsibleConnectionFailure("ssh: connect to host gpu-1 port 22: Connection timed out")
    answers = [lost] if which == 0 else [first_plan(sha1="0" * 40), lost]
    with pytest.raises(AnsibleConnectionFailure):
        planned(monkeypatch, answers, allow_control_node=True)
    # The drift watch goes on past it: the host is published with the reason, in no group.
    got, _ = planned(monkeypatch, answers, allow_control_node=True, ignore_unreachable=True)
    host_vars, groups = published(got)
    assert host_vars == {"infertune_unreachable": str(lost), "infertune_check_mode": False} and groups == []
    assert not got.get("failed") and not got.get("unreachable") and got["changed"] is False


def test_an_unreachable_answer_stays_unreachable_unless_the_task_ignores_it(monkeypatch):
    """A connection plugin may answer unreachable rather than raise: the strategy must see it so."""
    got, _ = planned(monkeypatch, [{"unreachable": True, "msg": "gone"}], allow_control_node=True)
    assert got["unreachable"] is True and got["msg"] == "gone" and "add_host" not in got
    got, _ = planned(monkeypatch, [{"unreachable": True, "msg": "gone"}], allow_control_node=True,
                     ignore_unreachable=True)
    assert published(got) == ({"infertune_unreachable": "gone", "infertune_check_mode": False}, [])


def test_a_file_shipped_from_the_collection_is_compared_and_sent_by_its_content(monkeypatch):
    """A unit file named by its source (src, a file of the collection: the boot-time tool and its
    library) is read on the control node: the plan compares its content, the second read gets it."""
    tool = action.shipped.COLLECTION / "roles" / "tuning_persistence" / "files" / "infertune-apply"
    knobs = [dict(knob) for knob in VARIABLES["all_knobs"]]
    knobs[1] = dict(knobs[1], args=dict(knobs[1]["args"], files=[{"path": "/u", "src": str(tool), "mode": "0755"}]))
    deployed = first_plan(sha1=hashlib.sha1(tool.read_bytes()).hexdigest())
    deployed["plan"]["fingerprint"]["files"]["/u"]["mode"] = "0755"
    got, reads = planned(monkeypatch, [deployed], allow_control_node=True, all_knobs=knobs)
    assert published(got)[1] == ["infertune_converged"]
    got, reads = planned(monkeypatch, [first_plan(sha1="0" * 40), {"plan": {"pending": ["sglang"], "failed": {},
                                                                             "results": {}}}],
                         allow_control_node=True, all_knobs=knobs)
    assert reads[1]["knobs"][0]["args"]["files"] == [{"path": "/u", "mode": "0755", "content": tool.read_text()}]


@pytest.mark.parametrize("verbosity", [1, 3])
def test_a_planned_hosts_answer_reaches_callbacks_censored_below_vvv(monkeypatch, verbosity):
    """Its record is as large as the host: the strategy publishes it, callbacks (the output, job
    events) get it censored; -vvv shows it. A failed read is shown whole."""
    monkeypatch.setattr(action.Display(), "verbosity", verbosity)
    got, _ = planned(monkeypatch, [first_plan()], allow_control_node=True)
    assert published(got)[1] == ["infertune_converged"]
    assert got.get("_ansible_no_log", False) is (verbosity < 3)
    got, _ = planned(monkeypatch, [{"failed": True, "msg": "boom"}], allow_control_node=True)
    assert "_ansible_no_log" not in got
