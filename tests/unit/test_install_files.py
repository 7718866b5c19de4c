import tempfile

from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node.files import install
from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node.gate import Gate, TuningError
import pytest

from fakehost import snapshot
from moduleharness import run_module

SCRIPT = {"path": "/usr/local/sbin/tool", "content": "#!/bin/bash\necho ok\n", "mode": "0755",
          "validate": "bash -n %s"}
CONF = {"path": "/etc/infertune/runtime.json", "content": "{}\n"}


def test_installs_with_mode_then_idempotent(tmp_path):
    root = str(tmp_path)
    result = install(root, [SCRIPT, CONF], Gate())
    assert result["files"] == [SCRIPT["path"], CONF["path"]]
    tool = tmp_path / "usr/local/sbin/tool"
    assert tool.read_text() == SCRIPT["content"] and oct(tool.stat().st_mode & 0o777) == "0o755"
    assert oct((tmp_path / "etc/infertune/runtime.json").stat().st_mode & 0o777) == "0o644"
    assert install(root, [SCRIPT, CONF], Gate()) == {"changed": False, "files": [], "diff": []}


def test_mode_only_change_keeps_content(tmp_path):
    root = str(tmp_path)
    install(root, [SCRIPT], Gate())
    result = install(root, [dict(SCRIPT, mode="0700")], Gate())
    assert result["changed"]
    assert oct((tmp_path / "usr/local/sbin/tool").stat().st_mode & 0o777) == "0o700"


def test_check_mode_reports_and_writes_nothing(tmp_path):
    root = str(tmp_path)
    install(root, [CONF], Gate())
    before = snapshot(root)
    result = install(root, [dict(CONF, content="{\"x\": 1}\n"), SCRIPT], Gate(check_mode=True))
    assert result["files"] == [CONF["path"], SCRIPT["path"]]
    assert result["diff"][0]["before"] == "{}\n" and result["diff"][1]["before"] == ""
    assert snapshot(root) == before


def test_failed_validation_leaves_the_old_file(tmp_path):
    root = str(tmp_path)
    install(root, [SCRIPT], Gate())
    broken = dict(SCRIPT, content="#!/bin/bash\nif then\n")
    with pytest.raises(TuningError, match="bash -n"):
        install(root, [broken], Gate())
    assert (tmp_path / "usr/local/sbin/tool").read_text() == SCRIPT["content"]


def test_check_mode_leaves_the_mode_alone(tmp_path):
    root = str(tmp_path)
    install(root, [SCRIPT], Gate())
    assert install(root, [dict(SCRIPT, mode="0700")], Gate(check_mode=True))["changed"]
    assert oct((tmp_path / "usr/local/sbin/tool").stat().st_mode & 0o777) == "0o755"


def test_check_mode_validates_without_creating_any_file(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "mkstemp", lambda *a, **k: pytest.fail("temp file created"))
    monkeypatch.setattr(tempfile, "mkdtemp", lambda *a, **k: pytest.fail("temp dir created"))
    assert install(str(tmp_path), [SCRIPT], Gate(check_mode=True))["files"] == [SCRIPT["path"]]
    with pytest.raises(TuningError, match="bash -n"):
        install(str(tmp_path), [dict(SCRIPT, content="#!/bin/bash\nif then\n")], Gate(check_mode=True))
    assert not list(tmp_path.iterdir())


def test_validation_leaves_nothing_in_the_target_directory(tmp_path):
    install(str(tmp_path), [SCRIPT], Gate())
    assert sorted(p.name for p in (tmp_path / "usr/local/sbin").iterdir()) == ["tool"]


def test_module_installs_then_changes_nothing(tmp_path, capsys):
    tool, conf = tmp_path / "sbin" / "tool", tmp_path / "etc" / "runtime.json"
    files = [dict(SCRIPT, path=str(tool)), {"path": str(conf), "content": "{}\n", "diff": False}]
    rc, result = run_module("install_files", {"files": files, "_ansible_diff": True}, capsys)
    assert rc == 0 and result["changed"] and result["files"] == [str(tool), str(conf)]
    assert tool.read_text() == SCRIPT["content"] and oct(tool.stat().st_mode & 0o777) == "0o755"
    assert oct(conf.stat().st_mode & 0o777) == "0o644"
    # Content in the diff where asked, sizes only where not.
    assert [d["after"] for d in result["diff"]] == [SCRIPT["content"], "(3 bytes)\n"]
    rc, again = run_module("install_files", {"files": files}, capsys)
    assert rc == 0 and again["changed"] is False and again["files"] == [] and "diff" not in again


def test_module_check_mode_writes_nothing_and_a_failed_validation_fails_the_task(tmp_path, capsys):
    tool = tmp_path / "sbin" / "tool"
    rc, result = run_module("install_files", {"files": [dict(SCRIPT, path=str(tool))], "_ansible_check_mode": True},
                            capsys)
    assert rc == 0 and result["changed"] and result["files"] == [str(tool)] and not tool.parent.exists()
    run_module("install_files", {"files": [dict(SCRIPT, path=str(tool))]}, capsys)
    rc, result = run_module("install_files", {"files": [dict(SCRIPT, path=str(tool), content="#!/bin/bash\nif then\n")]},
                            capsys)
    assert rc == 1 and result["failed"] and "bash -n" in result["msg"]
    assert tool.read_text() == SCRIPT["content"]
