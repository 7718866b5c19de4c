"""labctl's host fixes leave room for the largest lab its address plan allows."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "lab"))
from infra import host_setup, hosts  # noqa: E402


def test_inotify_instances_hold_the_largest_lab_and_another_beside_it():
    # inotify instances are counted per user: root's, for every lab container on the machine.
    assert host_setup.INOTIFY_MIN >= 2 * hosts.MAX_HOSTS * host_setup.INOTIFY_PER_HOST


def test_the_address_plan_ends_inside_the_subnet():
    last = hosts.Host(hosts.MAX_HOSTS, hosts.DEFAULT_PROFILE)
    assert int(last.ip.rsplit(".", 1)[1]) == 254
    assert int(last.mac.rsplit(":", 1)[1], 16) == hosts.MAX_HOSTS
