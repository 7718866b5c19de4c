"""testinfra verification of tuned hosts, one test per knob, parametrized per host.

    pytest tests/verify --hosts='ansible://gpu_nodes' --ansible-inventory=inventory/<yours>
    pytest tests/verify --hosts=local://          # on the host itself, role defaults only

Expected values: the host's inventory variables (ansible backend) over the roles'
defaults, as the roles themselves see them.
"""
import re

import pytest

from expected import expected_values


@pytest.fixture(scope="module")
def want(host):
    """Expected knob values for this host."""
    inventory = host.ansible.get_variables() if host.backend.NAME == "ansible" else {}
    return expected_values(inventory)


@pytest.fixture(scope="module")
def name(host):
    """The name failure messages use: the inventory name, else the host's own."""
    if host.backend.NAME == "ansible":
        return host.backend.host
    return host.check_output("hostname")


@pytest.fixture(scope="module")
def sh(host):
    """Run one shell command on the host (one per knob, never one per CPU); return stdout."""
    def run(command):
        return host.run("sh -c %s", command).stdout
    return run


@pytest.fixture(scope="module")
def cpu_vendor(sh):
    match = re.search(r"^vendor_id\s*:\s*(\S+)", sh("grep -m1 ^vendor_id /proc/cpuinfo"), re.M)
    return match.group(1) if match else "unknown"
