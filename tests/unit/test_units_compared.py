"""The plan's comparison of unit knobs with what the host has (infertune_units_compared in
roles/infertune/vars): a unit whose files and state are as asked is in place and gets no second
read; one asked to be stopped that runs, or waits to restart, is not."""
import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

from fakehost import REPO
from roletemplates import trusted

EXPRESSION = yaml.safe_load((REPO / "roles" / "infertune" / "vars" / "main.yml").read_text())["infertune_units_compared"]


def compared(active, started, enabled=True, unit_enabled="enabled"):
    knob = {"name": "sglang", "module": "systemd_unit",
            "args": {"unit": "sglang.service", "files": [], "enabled": enabled, "started": started}}
    variables = {"infertune_selected_knobs": [knob],
                 "infertune_plan": {"fingerprint": {"files": {}, "units": {
                     "sglang.service": {"enabled": unit_enabled, "active": active}}}}}
    templar = Templar(loader=DataLoader(), variables=trusted(variables))
    return templar.template(trust_as_template(EXPRESSION))["sglang"]


@pytest.mark.parametrize("active, started, in_place", [
    ("active", True, True),
    ("inactive", True, False),
    ("activating", True, False),
    ("inactive", False, True),
    ("failed", False, True),
    ("active", False, False),      # asked stopped, still serving: the plan must see it
    ("activating", False, False),  # waiting to restart after a crash
    ("active", "false", False),    # as -e gives it
])
def test_a_unit_is_in_place_only_in_the_state_asked(active, started, in_place):
    assert compared(active, started) is in_place


def test_the_enablement_counts_too():
    assert compared("active", True, enabled=False) is False
    assert compared("active", True, enabled=False, unit_enabled="disabled") is True
