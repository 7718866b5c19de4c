"""Fixtures for the module_utils tests.

The checkout is linked in as ansible_collections/infertune/fleet under a temporary
directory on sys.path, so tests import the code by the name the modules use
(ansible_collections.infertune.fleet.plugins.module_utils...), as AnsiballZ packs it.
"""
import atexit
import os
import shutil
import sys
import tempfile

import pytest

from fakehost import REPO, cpu_tree, pci_tree, write

_COLLECTIONS = tempfile.mkdtemp(prefix="infertune-collections-")
# Gone with the test process (every run left one behind); the link inside is removed, not followed.
atexit.register(shutil.rmtree, _COLLECTIONS, ignore_errors=True)
os.makedirs(os.path.join(_COLLECTIONS, "ansible_collections", "infertune"))
os.symlink(REPO, os.path.join(_COLLECTIONS, "ansible_collections", "infertune", "fleet"))
sys.path.insert(0, _COLLECTIONS)
# And for the ansible-playbook runs of the tests, whatever the checkout's own link.
os.environ["ANSIBLE_COLLECTIONS_PATH"] = _COLLECTIONS
# The sglang stand-in the lab's hosts run (lab/standin/sglang_server.py), shared with the tests.
sys.path.insert(0, str(REPO / "lab" / "standin"))

from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node.gate import Gate  # noqa: E402


@pytest.fixture(scope="session", autouse=True)
def no_record_of_this_machine():
    """No test leaves a record of this machine's own state (a knob module run for real on it): the
    records of the hosts' original state belong under a test's tree."""
    state = "/var/lib/infertune/original"
    before = os.path.exists(state)
    yield
    assert before or not os.path.exists(state), "a test wrote %s on this machine" % state


@pytest.fixture
def amd128(tmp_path):
    """Two-socket EPYC, 128 CPUs, amd-pstate-epp in active mode, powersave governor."""
    root = cpu_tree(str(tmp_path), 128, sockets=2)
    write(root, "/sys/devices/system/cpu/amd_pstate/status", "active\n")
    return root


@pytest.fixture
def cpu4(tmp_path):
    """Four CPUs on acpi-cpufreq (no EPP, amd_pstate not loaded); cpu2 lacks C1, so its ids shift."""
    def states(n):
        if n == 2:
            return [("POLL", 0), ("C2", 400), ("C3", 800)]
        return [("POLL", 0), ("C1", 1), ("C2", 400), ("C3", 800)]
    return cpu_tree(str(tmp_path), 4, driver="acpi-cpufreq", governor="ondemand", epp=None, idle_states=states)


@pytest.fixture
def pci_root(tmp_path):
    root = pci_tree(str(tmp_path))
    write(root, "/sys/kernel/security/lockdown", "[none] integrity confidentiality\n")
    return root


@pytest.fixture
def gate():
    return Gate()


@pytest.fixture
def check_gate():
    return Gate(check_mode=True)
