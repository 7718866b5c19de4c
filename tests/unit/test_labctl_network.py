"""The lab's subnet: a /24 that no route and no firewall rule of this machine already uses."""
import ipaddress
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "lab"))
from infra import network  # noqa: E402


def nets(*cidrs):
    return [ipaddress.ip_network(c) for c in cidrs]


def test_the_preferred_subnet_when_it_is_free():
    assert network.choose(nets("192.0.2.0/24"), [], prefer="10.77.213") == "10.77.213"


def test_a_stale_bridge_of_a_killed_lab_moves_the_lab_to_the_next_subnet():
    # What CI met: another checkout's lab left its bridge (and route) for 10.77.213.0/24 behind.
    assert network.choose(nets("10.77.213.0/24"), [], prefer="10.77.213") == "10.77.214"


def test_a_wider_route_covers_every_subnet_inside_it():
    routed = nets("10.77.0.0/17")
    assert network.choose(routed, [], prefer="10.77.213") == "10.77.213"
    assert network.choose(nets("10.77.128.0/17"), [], prefer="10.77.213") == "10.77.1"


def test_firewall_rules_left_for_a_subnet_make_it_taken():
    rules = ["iptables-save: -A NETAVARK_FORWARD -s 10.77.213.0/24 -j ACCEPT"]
    assert network.choose([], rules, prefer="10.77.213") == "10.77.214"


def test_the_recorded_choice_is_kept_when_still_free():
    assert network.choose([], [], prefer="10.77.220") == "10.77.220"


def test_no_free_subnet_is_an_error_not_a_collision():
    with pytest.raises(RuntimeError, match="no free /24"):
        network.choose(nets("10.77.0.0/16"), [], prefer="10.77.213")


def test_stray_rules_are_those_of_the_recorded_subnet_only(tmp_path, monkeypatch):
    monkeypatch.setattr(network, "STATE", tmp_path / "network.json")
    (tmp_path / "network.json").write_text('{"prefix": "10.77.214"}\n')
    monkeypatch.setattr(network, "firewall_lines", lambda: [
        "iptables-save: -A NETAVARK_FORWARD -s 10.77.213.0/24 -j ACCEPT",
        "iptables-save: -A NETAVARK_FORWARD -s 10.77.214.0/24 -j ACCEPT"])
    assert network.stray_firewall_rules() == ["iptables-save: -A NETAVARK_FORWARD -s 10.77.214.0/24 -j ACCEPT"]


def test_each_checkout_gets_its_own_bridge_interface(monkeypatch, tmp_path):
    names = set()
    for checkout in ("a", "b"):
        monkeypatch.setattr(network.paths, "STATE", tmp_path / checkout / "lab" / ".state")
        names.add(network.bridge_name())
    assert len(names) == 2
    assert all(len(name) <= 15 for name in names)  # Linux interface names: IFNAMSIZ - 1
