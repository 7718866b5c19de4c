import tempfile

from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node.files import install
from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node.gate import Gate, TuningError
import pytest

from fakehost import snapshot

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
