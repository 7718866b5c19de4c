"""Revert of the systemd_unit kind: a unit of infertune's own (the boot-time oneshot) stopped, disabled,
its files, the directories they made and what its program wrote removed; a packaged unit (the driver's
nvidia-persistenced) without infertune's drop-in and .wants link, back to its recorded enablement and
state. systemctl answers as on a host (is-enabled, is-active), every other call recorded."""
import os

import pytest

from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node import systemd
from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node.gate import Gate, TuningError
from fakehost import snapshot, write

UNIT = "nvidia-persistenced.service"


class Systemctl:
    def __init__(self, enabled="enabled", active="active"):
        self.state, self.calls = {"is-enabled": enabled, "is-active": active}, []

    def __call__(self, argv):
        if argv[1] in self.state:
            return (0 if self.state[argv[1]] in ("enabled", "active") else 3), self.state[argv[1]] + "\n", ""
        self.calls.append(argv[1:])
        return 0, "", ""


@pytest.fixture
def oneshot(tmp_path):
    """The oneshot's files under tmp_path: a unit, a config and a library in directories it made."""
    lib = tmp_path / "usr/local/lib/infertune/infertune_node"
    paths = [str(tmp_path / "etc/systemd/system/infertune-tune.service"), str(tmp_path / "etc/infertune/runtime.json"),
             str(lib / "knobs.py")]
    (tmp_path / "etc/systemd/system").mkdir(parents=True)
    (tmp_path / "usr/local/lib").mkdir(parents=True)
    args = {"unit": "infertune-tune.service", "files": [{"path": p, "content": "x\n"} for p in paths],
            "wanted_by": None, "drop_exec_args": None}
    saved = systemd.original("/", args, Systemctl(enabled="not-found", active="inactive"))
    for path in paths:
        write("/", path, "x\n")
    write("/", str(lib / "__pycache__/knobs.cpython-311.pyc"), b"\0")  # left by the tool's first run
    write("/", str(tmp_path / "run/infertune/apply.json"), "{}\n")
    return tmp_path, args, saved


def test_the_oneshot_is_stopped_disabled_and_every_file_and_directory_of_its_own_removed(oneshot):
    tmp, args, saved = oneshot
    assert saved["dirs"] == {str(tmp / "etc/infertune"): True, str(tmp / "usr/local/lib/infertune"): True,
                             str(tmp / "usr/local/lib/infertune/infertune_node"): True}
    systemctl = Systemctl()
    result = systemd.KIND.revert("/", dict(args, remove=[str(tmp / "run/infertune")]), saved, Gate(runner=systemctl))
    assert systemctl.calls == [["stop", "infertune-tune.service"], ["disable", "infertune-tune.service"],
                               ["daemon-reload"]]
    assert result["changed"] and result["after"] == {"enabled": "not-found", "active": "inactive"}
    assert sorted(os.listdir(tmp / "etc")) == ["systemd"] and os.listdir(tmp / "etc/systemd/system") == []
    assert os.listdir(tmp / "usr/local/lib") == [] and os.listdir(tmp / "run") == []
    gone = Systemctl(enabled="not-found", active="inactive")
    again = systemd.KIND.revert("/", dict(args, remove=[str(tmp / "run/infertune")]), saved, Gate(runner=gone))
    assert not again["changed"] and gone.calls == []


def test_the_oneshot_under_check_mode_changes_nothing(oneshot):
    tmp, args, saved = oneshot
    before, systemctl = snapshot(str(tmp)), Systemctl()
    gate = Gate(check_mode=True, runner=systemctl)
    result = systemd.KIND.revert("/", dict(args, remove=[]), saved, gate)
    assert result["changed"] and systemctl.calls == [] and snapshot(str(tmp)) == before
    assert "remove %s" % (tmp / "usr/local/lib/infertune") in gate.actions


def test_the_oneshot_without_a_record_loses_its_files_and_keeps_the_directories(oneshot):
    tmp, args, _ = oneshot
    systemd.KIND.revert("/", dict(args, remove=[]), None, Gate(runner=Systemctl()))
    assert os.listdir(tmp / "etc/infertune") == [] and os.path.isdir(tmp / "usr/local/lib/infertune/infertune_node")


def test_a_path_to_remove_must_be_absolute_and_below_a_top_level_directory():
    for path in ("run/infertune", "/run", "/run/../etc", "/run/infertune/"):
        with pytest.raises(TuningError, match="is not an absolute path below a top-level directory"):
            systemd.revert_unit("/", "x.service", [], None, None, [path], None, Gate(runner=Systemctl()))


@pytest.fixture
def packaged(tmp_path, monkeypatch):
    """The driver's unit: infertune enabled and started it, linked it into multi-user.target.wants and
    gave it a drop-in (Ubuntu's static unit)."""
    monkeypatch.setattr(systemd, "SYSTEM_DIR", str(tmp_path / "etc/systemd/system"))
    (tmp_path / "etc/systemd/system/multi-user.target.wants").mkdir(parents=True)
    args = {"unit": UNIT, "files": [], "wanted_by": "multi-user.target", "drop_exec_args": ["--no-persistence-mode"]}
    return tmp_path, args


def test_a_packaged_unit_goes_back_to_disabled_and_stopped_as_recorded(packaged):
    tmp, args = packaged
    saved = systemd.original("/", args, Systemctl(enabled="disabled", active="inactive"))
    assert saved["wants"] == {str(tmp / "etc/systemd/system/multi-user.target.wants") + "/" + UNIT: False}
    os.symlink("/usr/lib/systemd/system/" + UNIT, tmp / "etc/systemd/system/multi-user.target.wants" / UNIT)
    systemctl = Systemctl()
    result = systemd.KIND.revert("/", dict(args, remove=[]), saved, Gate(runner=systemctl))
    assert systemctl.calls == [["daemon-reload"], ["disable", UNIT], ["stop", UNIT]]
    assert result["after"] == {"enabled": "disabled", "active": "inactive"}
    assert os.listdir(tmp / "etc/systemd/system/multi-user.target.wants") == []


def test_a_static_unit_loses_its_dropin_and_link_and_runs_as_shipped_again(packaged):
    tmp, args = packaged
    saved = systemd.original("/", args, Systemctl(enabled="static", active="active"))
    assert list(saved["dirs"]) == [str(tmp / "etc/systemd/system") + "/%s.d" % UNIT]
    write("/", str(tmp / "etc/systemd/system") + "/%s.d/infertune.conf" % UNIT, "[Service]\n")
    os.symlink("/usr/lib/systemd/system/" + UNIT, tmp / "etc/systemd/system/multi-user.target.wants" / UNIT)
    systemctl = Systemctl(enabled="static", active="active")
    result = systemd.KIND.revert("/", dict(args, remove=[]), saved, Gate(runner=systemctl))
    assert systemctl.calls == [["daemon-reload"], ["restart", UNIT]] and result["changed"]
    assert sorted(os.listdir(tmp / "etc/systemd/system")) == ["multi-user.target.wants"]
    assert os.listdir(tmp / "etc/systemd/system/multi-user.target.wants") == []


def test_a_packaged_unit_without_a_record_keeps_its_state_and_says_so(packaged):
    tmp, args = packaged
    systemctl = Systemctl()
    result = systemd.KIND.revert("/", dict(args, remove=[]), None, Gate(runner=systemctl))
    assert not result["changed"] and systemctl.calls == []
    assert result["msg"] == (UNIT + ": no file of infertune's; its enablement and state left (enabled, active):"
                             " no record of them before infertune")
