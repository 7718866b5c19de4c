"""infertune/shipped.py and the knob action: a file the collection ships to the hosts (the
boot-time tool and its library) is named by its source on the control node and read there, as
Ansible's file lookup reads it; neither the task's arguments nor its result carry it."""
import pytest
from ansible.plugins.action import ActionBase

from ansible_collections.infertune.fleet.infertune import shipped
from ansible_collections.infertune.fleet.plugins.action import knob as knob_action

TOOL = shipped.COLLECTION / "roles" / "tuning_persistence" / "files" / "infertune-apply"


def test_a_source_is_read_byte_for_byte_and_other_entries_stay(tmp_path):
    (tmp_path / "crlf.txt").write_bytes(b"a\r\nb\n")
    files = [{"path": "/x", "src": str(tmp_path / "crlf.txt"), "mode": "0755"}, {"path": "/y", "content": "kept"}]
    assert shipped.inline(files, root=tmp_path) == [{"path": "/x", "mode": "0755", "content": "a\r\nb\n"},
                                                     {"path": "/y", "content": "kept"}]
    assert shipped.inline_args({"unit": "u", "files": files}, root=tmp_path)["files"][0]["content"] == "a\r\nb\n"
    assert shipped.inline_args({"value": 1}) == {"value": 1}


def test_a_source_outside_the_collection_is_refused(tmp_path):
    (tmp_path / "secret").write_text("x")
    with pytest.raises(ValueError, match="not a file of the collection"):
        shipped.inline([{"path": "/x", "src": str(tmp_path / "secret")}])
    with pytest.raises(ValueError, match="not a file of the collection"):
        shipped.inline([{"path": "/x", "src": str(shipped.COLLECTION / ".." / "elsewhere")}])


class FakeTask:
    def __init__(self, args):
        self.args = args


def test_the_knob_action_sends_the_content_and_shows_the_source(monkeypatch):
    sent = {}

    def execute_module(self, module_name=None, module_args=None, task_vars=None):
        sent.update(module_name=module_name, module_args=module_args)
        return {"changed": True, "invocation": {"module_args": module_args}}

    monkeypatch.setattr(ActionBase, "run", lambda self, tmp=None, task_vars=None: {})
    monkeypatch.setattr(knob_action.ActionModule, "_execute_module", execute_module)
    plugin = knob_action.ActionModule.__new__(knob_action.ActionModule)
    args = {"name": "tuning_persistence", "module": "systemd_unit", "stage": "persist",
            "args": {"unit": "infertune-tune.service", "files": [{"path": "/usr/local/sbin/infertune-apply",
                                                                 "src": str(TOOL), "mode": "0755"}]}}
    plugin._task = FakeTask(args)
    got = plugin.run(task_vars={})
    assert sent["module_name"] == "infertune.fleet.knob"
    assert sent["module_args"]["args"]["files"][0]["content"] == TOOL.read_text()
    assert got["invocation"] == {"module_args": args} and "content" not in str(got)

    plugin._task = FakeTask(dict(args, args={"unit": "u", "files": [{"path": "/x", "src": "/etc/passwd"}]}))
    got = plugin.run(task_vars={})
    assert got["failed"] is True and "not a file of the collection" in got["msg"]


def test_the_render_task_lists_the_tool_and_its_library_by_source(tmp_path):
    """tuning_persistence's render task at -v: every file the oneshot installs, named by its
    source, and none of their content in the output."""
    import json

    import controller_play

    rc, out = controller_play.run(tmp_path, """
        - hosts: gpu_nodes
          gather_facts: false
          tasks:
            - ansible.builtin.import_role:
                name: infertune.fleet.tuning_persistence
                tasks_from: render
            - ansible.builtin.copy:
                content: "{{ tuning_persistence_shared_files | to_json }}"
                dest: "{{ playbook_dir }}/shared.json"
                mode: "0644"
        """, """
        gpu_nodes:
          hosts:
            local-1: {ansible_connection: local}
        """, "-v")
    assert rc == 0, out
    listed = json.loads((tmp_path / "shared.json").read_text())
    library = sorted((shipped.COLLECTION / "plugins" / "module_utils" / "infertune_node").glob("*.py"))
    assert [entry["src"].rsplit("/", 1)[1] for entry in listed] == ["infertune-apply", *(p.name for p in library)]
    assert all("content" not in entry and isinstance(shipped.content(entry["src"]), str) for entry in listed)
    assert "def install(root, files, gate):" in (library[[p.name for p in library].index("files.py")]).read_text()
    assert "def install(root, files, gate)" not in out and "#!/usr/bin/python3" not in out
