"""Persistence mode on Ubuntu: the driver's nvidia-persistenced.service is static (no [Install]),
pulled in by udev with --no-persistence-mode and StopWhenUnneeded; the knob runs it through a
drop-in without that flag and starts it at boot through a link in multi-user.target.wants."""
import pytest
import yaml

from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node import knobs, systemd
from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node.gate import Gate
from fakehost import REPO

CATALOG = yaml.safe_load((REPO / "roles/infertune/vars/main.yml").read_text())["infertune_knobs"]
ENTRY = next(e for e in CATALOG if e["name"] == "nvidia_persistence")
UNIT = "nvidia-persistenced.service"
# As Canonical's nvidia-compute-utils-<branch>-server ships it.
UBUNTU = """[Unit]
Description=NVIDIA Persistence Daemon
Wants=syslog.target
StopWhenUnneeded=true
Before=systemd-backlight@backlight:nvidia_0.service

[Service]
Type=forking
ExecStart=/usr/bin/nvidia-persistenced --user nvidia-persistenced --no-persistence-mode --verbose
ExecStopPost=/bin/rm -rf /var/run/nvidia-persistenced
"""
# As Debian's nvidia-persistenced package ships it.
DEBIAN = """[Unit]
Description=NVIDIA Persistence Daemon
Wants=syslog.target

[Service]
Type=forking
ExecStart=/usr/bin/nvidia-persistenced --verbose
ExecStopPost=/bin/rm -rf /var/run/nvidia-persistenced

[Install]
WantedBy=multi-user.target
"""
DROPIN = """# managed by infertune: nvidia-persistenced.service as its package ships it, but kept running and without --no-persistence-mode
[Unit]
StopWhenUnneeded=no
[Service]
ExecStart=
ExecStart=/usr/bin/nvidia-persistenced --user nvidia-persistenced --verbose
"""


class Systemctl:
    """is-enabled/is-active/show(FragmentPath) answered as systemctl would; other calls recorded."""

    def __init__(self, fragment, enabled="static", active="active"):
        self.answers = {"is-enabled": enabled, "is-active": active, "show": str(fragment)}
        self.calls = []

    def __call__(self, argv):
        if argv[1] in self.answers:
            return 0, self.answers[argv[1]] + "\n", ""
        self.calls.append(argv[1:])
        return 0, "", ""


@pytest.fixture
def etc(tmp_path, monkeypatch):
    """/etc/systemd/system of the fake host."""
    monkeypatch.setattr(systemd, "SYSTEM_DIR", str(tmp_path / "etc"))
    return tmp_path / "etc"


def vendor(tmp_path, text):
    path = tmp_path / "usr/lib/systemd/system" / UNIT
    path.parent.mkdir(parents=True)
    path.write_text(text)
    return path


def test_check_mode_predicts_the_drop_in_the_link_and_a_restart_and_writes_nothing(tmp_path, etc):
    # udev started it at boot (active), in --no-persistence-mode.
    systemctl = Systemctl(vendor(tmp_path, UBUNTU))
    contract, diff, actions = knobs.run("systemd_unit", ENTRY["args"], Gate(check_mode=True, runner=systemctl))
    assert contract["changed"] and contract["after"] == {"enabled": "enabled", "active": "active"}
    assert contract["before"] == {"enabled": "static", "active": "active"}
    dropin = f"{etc}/{UNIT}.d/infertune.conf"
    assert actions == [f"write {dropin}", "systemctl daemon-reload",
                       f"systemctl add-wants multi-user.target {UNIT}", f"systemctl restart {UNIT}"]
    assert diff[0]["after"] == DROPIN and systemctl.calls == [] and not etc.exists()


def test_applied_it_writes_the_drop_in_links_and_restarts_then_stays_put(tmp_path, etc):
    fragment = vendor(tmp_path, UBUNTU)
    systemctl = Systemctl(fragment)
    knobs.run("systemd_unit", ENTRY["args"], Gate(runner=systemctl))
    assert (etc / f"{UNIT}.d/infertune.conf").read_text() == DROPIN
    assert systemctl.calls == [["daemon-reload"], ["add-wants", "multi-user.target", UNIT], ["restart", UNIT]]
    # systemctl add-wants made the link; is-enabled now says enabled.
    (etc / "multi-user.target.wants").mkdir()
    (etc / "multi-user.target.wants" / UNIT).symlink_to(fragment)
    again = Systemctl(fragment, enabled="enabled")
    contract, _, actions = knobs.run("systemd_unit", ENTRY["args"], Gate(runner=again))
    assert not contract["changed"] and actions == [] and again.calls == []


def test_a_systemd_that_still_says_static_is_not_linked_again(tmp_path, etc):
    fragment = vendor(tmp_path, UBUNTU)
    (etc / f"{UNIT}.d").mkdir(parents=True)
    (etc / f"{UNIT}.d/infertune.conf").write_text(DROPIN)
    (etc / "multi-user.target.wants").mkdir()
    (etc / "multi-user.target.wants" / UNIT).symlink_to(fragment)
    systemctl = Systemctl(fragment, enabled="static")
    contract, _, actions = knobs.run("systemd_unit", ENTRY["args"], Gate(runner=systemctl))
    assert not contract["changed"] and actions == []


def test_continued_exec_start_lines_are_read_whole(tmp_path, etc):
    text = UBUNTU.replace("--no-persistence-mode --verbose", "\\\n    --no-persistence-mode --verbose")
    content = systemd.vendor_dropin("/", UNIT, ["--no-persistence-mode"], Gate(runner=Systemctl(vendor(tmp_path, text))))
    assert content == DROPIN


def test_debians_unit_gets_no_drop_in_and_a_plain_enable(tmp_path, etc):
    systemctl = Systemctl(vendor(tmp_path, DEBIAN), enabled="disabled", active="inactive")
    contract, _, actions = knobs.run("systemd_unit", ENTRY["args"], Gate(runner=systemctl))
    assert systemctl.calls == [["enable", UNIT], ["restart", UNIT]] and contract["changed"]
    assert not etc.exists()


def test_a_drop_in_the_package_no_longer_needs_is_removed(tmp_path, etc):
    # The package now ships a unit that runs persistence mode: our stale ExecStart must go.
    (etc / f"{UNIT}.d").mkdir(parents=True)
    dropin = etc / f"{UNIT}.d/infertune.conf"
    dropin.write_text(DROPIN)
    systemctl = Systemctl(vendor(tmp_path, DEBIAN), enabled="enabled", active="active")
    contract, _, actions = knobs.run("systemd_unit", ENTRY["args"], Gate(check_mode=True, runner=systemctl))
    assert contract["changed"] and actions == [f"rm -f -- {dropin}", "systemctl daemon-reload",
                                               f"systemctl restart {UNIT}"]
    knobs.run("systemd_unit", ENTRY["args"], Gate(runner=systemctl))
    assert systemctl.calls == [["-f", "--", str(dropin)], ["daemon-reload"], ["restart", UNIT]]
