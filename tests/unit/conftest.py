"""Fixtures for the module_utils tests.

module_utils/ is added to ansible.module_utils.__path__ so tests import the code
exactly as the AnsiballZ-packed modules do.
"""
import sys

import ansible.module_utils
import pytest

from fakehost import REPO, cpu_tree, pci_tree, write

ansible.module_utils.__path__.append(str(REPO / "module_utils"))
# The sglang stand-in the lab's hosts run (lab/standin/sglang_server.py), shared with the tests.
sys.path.insert(0, str(REPO / "lab" / "standin"))

from ansible.module_utils.infertune_node.gate import Gate  # noqa: E402


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
