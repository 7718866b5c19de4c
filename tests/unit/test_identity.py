"""Never the control node unless asked: loopback, the controller's own address, the same machine-id."""
import json

import pytest

from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node import identity
from fakehost import write
from infertune import control_node

# Trimmed from a real /proc/net/fib_trie: the Local table repeats the Main entries.
FIB_TRIE = """Main:
  +-- 0.0.0.0/0 3 0 5
     +-- 10.77.213.0/24 2 0 2
        +-- 10.77.213.0/31 1 0 0
           |-- 10.77.213.0
              /24 link UNICAST
           |-- 10.77.213.11
              /32 host LOCAL
        |-- 10.77.213.255
           /32 link BROADCAST
     +-- 127.0.0.0/8 2 0 2
        +-- 127.0.0.0/31 1 0 0
           |-- 127.0.0.0
              /8 host LOCAL
           |-- 127.0.0.1
              /32 host LOCAL
Local:
           |-- 10.77.213.11
              /32 host LOCAL
"""
IF_INET6 = ("fe8000000000000000fc00fffe000001 04 40 20 80     eth0\n"
            "00000000000000000000000000000001 01 80 10 80       lo\n")
OWN = {"machine_id": "3d1219c7c4c5404aaa1f6d2a48adfda4", "addresses": ["10.77.213.1", "127.0.0.1", "::1"]}


def test_addresses_and_machine_id_from_proc(tmp_path):
    write(tmp_path, "/proc/net/fib_trie", FIB_TRIE)
    write(tmp_path, "/proc/net/if_inet6", IF_INET6)
    write(tmp_path, "/etc/machine-id", OWN["machine_id"] + "\n")
    assert identity.addresses(str(tmp_path)) == ["10.77.213.11", "127.0.0.1", "::1", "fe80::fc:ff:fe00:1"]
    assert identity.machine_id(str(tmp_path)) == OWN["machine_id"]


def test_empty_machine_id_is_none(tmp_path):
    write(tmp_path, "/etc/machine-id", "\n")
    assert identity.machine_id(str(tmp_path)) is None


@pytest.mark.parametrize("address, expected", [
    ("127.0.0.1", "its address 127.0.0.1 (127.0.0.1) is loopback"),
    ("::1", "its address ::1 (::1) is loopback"),
    ("10.77.213.1", "its address 10.77.213.1 (10.77.213.1) belongs to the control node"),
])
def test_loopback_or_own_address_is_refused(address, expected):
    assert control_node.reason(address, "another-id", own=OWN) == expected


def test_same_machine_id_is_refused():
    assert control_node.reason("10.77.213.11", OWN["machine_id"], own=OWN) == (
        "its /etc/machine-id %s is the control node's" % OWN["machine_id"])


def test_local_connection_is_refused():
    assert control_node.reason(None, connection="local", own=OWN).startswith("it is reached with connection local")


def test_another_machine_is_not_the_control_node():
    assert control_node.reason("10.77.213.11", "0f5e", own=OWN) is None


def test_control_node_reads_its_own_identity_like_a_host():
    own = control_node.own_identity()
    assert "127.0.0.1" in own["addresses"]
    assert control_node.reason("localhost") is not None


def test_cli_exits_1_with_the_reason(capsys):
    assert control_node.main(["--address", "127.0.0.1"]) == 1
    assert json.loads(capsys.readouterr().out)["reason"].endswith("is loopback")


