"""testinfra verification of tuned hosts, one test per knob, parametrized per host.

    INFERTUNE_VERIFY_EXPECTED=reports/verify/expected.json \
        pytest tests/verify --hosts='ansible://gpu_nodes' --ansible-inventory=inventory/<yours>
    INFERTUNE_VERIFY_EXPECTED=expected.json pytest tests/verify --hosts=local://   # on the host

Expected values: what Ansible resolved for each host (INFERTUNE_VERIFY_EXPECTED, written by
`python -m infertune.verify` from playbooks/verify.yml or site.yml, -e included), by inventory
name; on the local backend the entry of the host's hostname, or the file's only entry.
"""
import functools
import json
import os
import re
import shlex
import sys
from pathlib import Path

import pytest
import testinfra

# The host-side readers the checks share with the modules (Ansible-free, relative imports):
# the collection's plugins/module_utils, beside this directory wherever it is installed.
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "plugins" / "module_utils"))

from expected import truthy
from fleet import Fleet
from infertune_node import grubcfg
from probes import SH, planned, probe
from readings import GPU_QUERY, HEALTH_QUERY, KMSG_READ, gpu_reading, sections


def pytest_configure(config):
    """Under `python -m infertune.verify`, the hosts' connection variables come from the run
    that called it (INFERTUNE_VERIFY_INVENTORY): testinfra's ansible backend then reads them
    there instead of starting ansible-inventory, about a second of every verification."""
    path = os.environ.get("INFERTUNE_VERIFY_INVENTORY")
    if path:
        from testinfra.utils.ansible_runner import AnsibleRunner

        with open(path) as handle:
            AnsibleRunner.get_runner(config.option.ansible_inventory).inventory = json.load(handle)


NO_VALUES = ("no expected values: run playbooks/verify.yml (it hands pytest what Ansible resolved for each"
             " host), or set INFERTUNE_VERIFY_EXPECTED to the reports/verify/expected.json a run wrote")


@pytest.fixture(scope="session")
def resolved():
    path = os.environ.get("INFERTUNE_VERIFY_EXPECTED")
    if not path:
        pytest.fail(NO_VALUES, pytrace=False)
    with open(path) as handle:
        return json.load(handle)


@pytest.fixture(scope="module")
def want(host, name, resolved):
    """The values this host was tuned to, as Ansible resolved them in the run."""
    return values_for(name, host.backend.NAME, resolved)


def values_for(name, backend, resolved):
    """NAME's entry; on the local backend the file's only entry will do (a run with --limit HOST
    names the host as the inventory does, which need not be its hostname)."""
    if name in resolved:
        return resolved[name]
    if backend == "local" and len(resolved) == 1:
        return next(iter(resolved.values()))
    pytest.fail(f"{name}: no expected values for this host in INFERTUNE_VERIFY_EXPECTED (it has: "
                f"{', '.join(sorted(resolved)) or 'none'})", pytrace=False)


@functools.cache
def host_name(host):
    """The name failure messages use: the inventory name, else the host's own (asked once)."""
    if host.backend.NAME == "ansible":
        return host.backend.host
    return host.check_output("hostname")


@pytest.fixture(scope="module")
def name(host):
    return host_name(host)


@pytest.fixture(scope="session")
def fleet(request):
    """Every host of the session, as the testinfra plugin builds them, to run commands on at once;
    each already asked, in one round, for what the session's tests will read there (probes.py)."""
    option = request.config.option
    specs = option.hosts.split(",") if option.hosts else [None]
    fleet = Fleet(testinfra.get_hosts(specs, connection=option.connection, ssh_config=option.ssh_config,
                                      ssh_identity_file=option.ssh_identity_file, sudo=option.sudo,
                                      sudo_user=option.sudo_user, ansible_inventory=option.ansible_inventory,
                                      force_ansible=option.force_ansible), name=host_name)
    fleet.prefetch(plans(fleet.hosts, request))
    return fleet


def plans(hosts, request):
    """{host: [(command, args)]}: the probes of the fixtures and tests this session selected, for
    each host's expected values. A host without them is left out (its tests fail on `want`)."""
    users = {user for item in request.session.items for user in (item.originalname, *item.fixturenames)}
    try:
        resolved = request.getfixturevalue("resolved")
    except pytest.fail.Exception:
        return {}
    found = {}
    for host in hosts:
        try:
            found[host] = planned(users, values_for(host_name(host), host.backend.NAME, resolved))
        except pytest.fail.Exception:
            continue
    return found


@pytest.fixture(scope="module")
def run(host, fleet):
    """host.run for this host, in one parallel round with the other hosts (tests/verify/fleet.py)."""
    return lambda command, *args: fleet.run(host, command, *args)


@pytest.fixture(scope="module")
def sh(run):
    """Run one shell command on the host (one per knob, never one per CPU); return stdout."""
    return lambda command: run(SH, command).stdout


# The running kernel, its command line, the CPU vendor, and what the boot loader gives the next boot:
# systemd-boot's /etc/kernel/cmdline, else GRUB's generated menu and its environment block.
BASICS = ("cat /proc/sys/kernel/osrelease; echo @@; cat /proc/cmdline; echo @@; grep -m1 ^vendor_id /proc/cpuinfo;"
          " echo @@; cat /etc/kernel/cmdline 2>/dev/null; echo @@; cat /boot/grub/grub.cfg 2>/dev/null; echo @@;"
          " cat /boot/grub/grubenv 2>/dev/null")
probe("basics")(lambda want: BASICS)


@pytest.fixture(scope="module")
def basics(sh):
    """The running kernel, its command line, the CPU vendor and the boot loader's configured
    command line (boot_line), in one command."""
    release, cmdline, cpuinfo, kernel_cmdline, grub_cfg, grubenv = sections(sh(BASICS), 6)
    match = re.search(r"^vendor_id\s*:\s*(\S+)", cpuinfo, re.M)
    return {"release": release.strip(), "cmdline": cmdline.split(),
            "cpu_vendor": match.group(1) if match else "unknown",
            "boot_line": boot_line(kernel_cmdline, grub_cfg, grubenv)}


def boot_line(kernel_cmdline, grub_cfg, grubenv):
    """(source, tokens, optional tokens) of the command line the boot loader gives the next boot, or
    None when neither systemd-boot's file nor a GRUB default entry is there: /etc/kernel/cmdline
    whole, or the default GRUB entry's linux line, where a GRUB variable ($vt_handoff) may expand to
    its values or to nothing."""
    if kernel_cmdline.strip():
        return "/etc/kernel/cmdline", kernel_cmdline.split(), []
    env = dict(line.split("=", 1) for line in grubenv.splitlines() if "=" in line and not line.startswith("#"))
    entry = grubcfg.default_entry(grub_cfg, env) if grub_cfg.strip() else None
    if entry is None or entry.get("args") is None:
        return None
    words = entry["args"].split()
    optional = [t for w in words if w.startswith("$") for v in grubcfg.assignments(grub_cfg, w.strip("${}"))
                for t in v.split()]
    return "/boot/grub/grub.cfg", [w for w in words if not w.startswith("$")], optional


@pytest.fixture(scope="module")
def cpu_vendor(basics):
    return basics["cpu_vendor"]


# One round for every GPU check (count, compute capability, persistence mode, BAR1 against memory,
# health): persistenced's unit, then every GPU, then the kernel log's Xids. nvidia-smi is slow to
# start on a real 8-GPU host: asked once, with the health fields where the health check runs.
GPUS = ("systemctl show nvidia-persistenced.service -p LoadState -p UnitFileState -p ActiveState -p ExecStart"
        " 2>&1; echo @@;"
        f" nvidia-smi --query-gpu={GPU_QUERY} --format=csv,noheader,nounits 2>&1; echo \"@@rc=$?\"")
GPUS_HEALTH = (GPUS.replace(f"--query-gpu={GPU_QUERY} ", f"--query-gpu={GPU_QUERY},{HEALTH_QUERY} ")
               + f"; echo @@; python3 -c {shlex.quote(KMSG_READ)}")


def gpus_command(want):
    """GPUS, or GPUS_HEALTH where the host's GPU health is checked (gpu_gate_health)."""
    return GPUS_HEALTH if truthy(want.get("gpu_gate_health", False)) else GPUS


probe("gpu_output")(gpus_command)


@pytest.fixture(scope="module")
def gpu_output(sh, want):
    """What gpus_command printed, once per host for every GPU check."""
    return sh(gpus_command(want))


@pytest.fixture(scope="module")
def gpu_state(gpu_output):
    """(persistenced's unit properties, [(index, bus id, compute capability, persistence mode,
    memory MiB)], [lines nvidia-smi printed otherwise]): readings.gpu_reading of GPUS."""
    return gpu_reading(gpu_output)


PCI_PROBE = (Path(__file__).parent / "pci_probe.py").read_text()
probe("pci_functions", shell=False)(lambda want: ("python3 -c %s", PCI_PROBE))


@pytest.fixture(scope="module")
def pci_functions(run, name):
    """{bdf: function} of the host's PCI config space (pci_probe.py), for the MaxReadReq and the
    fabric checks: one read per host for the session (the fleet runner keeps the answer)."""
    result = run("python3 -c %s", PCI_PROBE)
    if result.rc != 0:
        pytest.fail(f"{name}: PCIe: could not read PCI config space: {result.stderr.strip()[-300:]}", pytrace=False)
    return {function["bdf"]: function for function in json.loads(result.stdout)}
