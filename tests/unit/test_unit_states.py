"""unit_states: every unit's boot-time enablement and running state in one systemctl call,
as is-enabled and is-active would say them (the plan compares them with what the knob wants)."""
from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node.systemd import unit_states

SHOW = ("LoadState=loaded\nActiveState=inactive\nUnitFileState=disabled\n\n"
        "LoadState=not-found\nActiveState=inactive\nUnitFileState=\n\n"
        "LoadState=loaded\nActiveState=active\nUnitFileState=enabled\n")


class Systemctl:
    def __init__(self, show=(0, SHOW)):
        self.show, self.calls = show, []

    def __call__(self, argv):
        self.calls.append(argv)
        if argv[1] == "show":
            return self.show[0], self.show[1], ""
        return (0, "static", "") if argv[1] == "is-enabled" else (3, "inactive", "")


def test_one_call_for_every_unit_in_the_order_asked():
    systemctl = Systemctl()
    states = unit_states(["sglang.service", "nope.service", "nvidia-persistenced.service"], systemctl)
    assert states == {"sglang.service": {"enabled": "disabled", "active": "inactive"},
                      "nope.service": {"enabled": "not-found", "active": "inactive"},
                      "nvidia-persistenced.service": {"enabled": "enabled", "active": "active"}}
    assert len(systemctl.calls) == 1 and systemctl.calls[0][-4:] == ["--", "sglang.service", "nope.service",
                                                                       "nvidia-persistenced.service"]


def test_a_systemctl_that_answers_otherwise_is_asked_per_unit():
    systemctl = Systemctl(show=(1, ""))
    assert unit_states(["a.service", "b.service"], systemctl) == {
        "a.service": {"enabled": "static", "active": "inactive"}, "b.service": {"enabled": "static", "active": "inactive"}}
    assert [c[1] for c in systemctl.calls] == ["show", "is-enabled", "is-active", "is-enabled", "is-active"]


def test_no_unit_no_call():
    systemctl = Systemctl()
    assert unit_states([], systemctl) == {} and systemctl.calls == []
