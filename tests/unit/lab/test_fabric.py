"""The modelled PCIe fabric: switches, ACS, the link-degraded fault, and nvidia-smi's P2P and BAR1 view,
exercised with real pciutils and the infertune modules' own code."""
import os
import re
import subprocess
import sys

import pytest
from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node.gate import Gate, TuningError
from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node.pcie_acs import apply_acs
from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node.pcie_fabric import check, cmdline_params
from labhw import BOOT, REPO, pci_tool
from verifycheck import load, outcome, resolved

from hwmodel import iommu  # noqa: E402

VERIFY = os.path.join(REPO, "tests", "verify")
sys.path.insert(0, VERIFY)
import pci_probe  # noqa: E402
from readings import GPU_QUERY, gpu_reading  # noqa: E402

TOOL = os.path.join(BOOT, "nvidia-smi")
CLASSES = ["0x0300", "0x0302"]
PT = "BOOT_IMAGE=/boot/vmlinuz-6.1.0-28-amd64 ro quiet iommu=pt"


def smi(hw, *args):
    proc = subprocess.run([TOOL, *args], capture_output=True, text=True, env={**os.environ, "LAB_HW_DIR": str(hw)})
    return proc.returncode, proc.stdout


def p2p_cells(hw, mode="r"):
    rc, out = smi(hw, "topo", "-p2p", mode)
    assert rc == 0 and "Legend:" in out
    return {cell for line in out.splitlines() if line.startswith(" GPU") for cell in line.split()[1:]} - {"X"}


def test_acs_sits_where_the_vendors_put_it_with_redirect_on(render_host, seed):
    hw = render_host(seed)
    for bdf, offset in (("10:01.1", "2a0"), ("12:01.0", "170"), ("00:01.1", "2a0")):
        out = pci_tool("lspci", hw, "-vvv", "-s", bdf)
        assert f"Capabilities: [{offset} v1] Access Control Services" in out
        assert "ACSCtl:\tSrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+" in out
    assert "Access Control Services" not in pci_tool("lspci", hw, "-vvv", "-s", "11:00.0")  # upstream port
    assert "Access Control Services" not in pci_tool("lspci", hw, "-vvv", "-s", "13:00.0")  # GPU


def test_devices_nest_under_their_bridges(render_host, seed):
    hw = render_host(seed)
    assert os.path.realpath(hw / "sys/bus/pci/devices/0000:14:00.1") == str(
        hw / "sys/devices/pci0000:10/0000:10:01.1/0000:11:00.0/0000:12:01.0/0000:14:00.1")
    assert os.path.realpath(hw / "sys/bus/pci/devices/0000:01:00.0").endswith("pci0000:00/0000:00:01.1/0000:01:00.0")


def test_link_degraded_trains_the_switch_uplink_at_x4(render_host, seed):
    hw = render_host(seed, faults={"link-degraded": "2"})
    assert re.search(r"LnkCap:\tPort #0, Speed 32GT/s, Width x4,", pci_tool("lspci", hw, "-vvv", "-s", "30:01.1"))
    assert "LnkSta:\tSpeed 32GT/s, Width x4" in pci_tool("lspci", hw, "-vvv", "-s", "31:00.0")
    # nvidia-smi still sees every GPU at x16: only the fabric gate names the port.
    assert smi(hw, "--query-gpu=pcie.link.width.current", "--format=csv,noheader", "-i", "2")[1] == "16\n"
    failures = check(str(hw), "0x10de", CLASSES, ["width", "speed"])["failures"]
    assert len(failures) == 1 and "0000:30:01.1 is configured for x4" in failures[0]
    assert check(str(render_host(seed)), "0x10de", CLASSES, ["width", "speed"])["failures"] == []


def test_p2p_flips_to_ok_when_acs_is_cleared_under_iommu_passthrough(render_host, seed):
    hw = render_host(seed, cmdline=PT)
    assert p2p_cells(hw) == {"NS"}
    nvme_root = (hw / "sys/bus/pci/devices/0000:00:01.1/config").read_bytes()
    result = apply_acs(str(hw), "0x10de", CLASSES, False, Gate())
    # Every root and downstream port has ACS; the switches' upstream ports never do and are not named.
    assert len(result["before"]) == 4 + 8 and result["without_acs"] == []
    assert p2p_cells(hw, "r") == p2p_cells(hw, "w") == {"OK"}
    assert (hw / "sys/bus/pci/devices/0000:00:01.1/config").read_bytes() == nvme_root
    gates = check(str(hw), "0x10de", CLASSES, ["p2p", "bar1"], nvidia_smi=TOOL,
                  runner=lambda argv: _run(hw, argv))
    assert gates["failures"] == [] and set(gates["p2p"]["write"].values()) == {"OK"}


def _run(hw, argv):
    proc = subprocess.run(argv, capture_output=True, text=True, env={**os.environ, "LAB_HW_DIR": str(hw)})
    return proc.returncode, proc.stdout, proc.stderr


@pytest.mark.parametrize("args, status", [("", "CNS"), ("amd_iommu=off", "OK"), ("iommu=off", "OK")])
def test_translating_iommu_blocks_p2p_even_with_acs_off(render_host, seed, args, status):
    hw = render_host(seed, cmdline="BOOT_IMAGE=/boot/vmlinuz-6.1.0-28-amd64 ro " + args)
    apply_acs(str(hw), "0x10de", CLASSES, False, Gate())
    assert p2p_cells(hw) == {status}


@pytest.mark.parametrize("cmdline, vendor, mode", [
    ("ro", "AuthenticAMD", "translated"),
    ("iommu=pt", "AuthenticAMD", "passthrough"),
    ("iommu.passthrough=1", "GenuineIntel", "passthrough"),
    ("amd_iommu=off", "AuthenticAMD", "off"),
    ("amd_iommu=off", "GenuineIntel", "translated"),
    ("intel_iommu=off iommu=pt", "GenuineIntel", "off"),
    ("iommu=pt iommu=nopt", "AuthenticAMD", "translated"),
])
def test_iommu_mode_from_the_command_line(cmdline, vendor, mode):
    assert iommu.mode(cmdline, vendor, "translated") == mode


def test_bar1_in_query_output(render_host, xeon):
    rc, out = smi(render_host(xeon), "-q", "-d", "MEMORY", "-i", "0")
    assert rc == 0
    assert re.search(r"FB Memory Usage\n\s+Total\s+: 81559 MiB", out)
    assert re.search(r"BAR1 Memory Usage\n\s+Total\s+: 131072 MiB", out)


def test_topo_with_a_lost_gpu(render_host, seed):
    rc, out = smi(render_host(seed, faults={"gpu-lost": "1"}), "topo", "-p2p", "r")
    assert rc == 15 and "GPU is lost" in out


@pytest.mark.parametrize("vendor", ["AuthenticAMD", "GenuineIntel"])
@pytest.mark.parametrize("mode", ["passthrough", "off"])
def test_recommended_command_line_gives_the_lab_the_mode_asked_for(vendor, mode):
    # What the roles will put on the command line reads back, in the lab, as the mode asked for.
    params, _remove = cmdline_params(vendor, mode)
    assert iommu.mode("BOOT_IMAGE=x ro " + " ".join(params), vendor, "translated") == mode


def test_vfio_bound_device_below_a_gpu_port_makes_acs_refuse_until_forced(render_host, seed):
    hw = render_host(seed, faults={"vfio-bound": ""})
    link = hw / "sys/bus/pci/devices/0000:01:00.0/driver"
    assert os.readlink(link) == "../../../../bus/pci/drivers/vfio-pci"
    assert not (hw / "sys/bus/pci/devices/0000:13:00.0/driver").exists()
    # The NVMe drive's root port leads to no GPU: its isolation stays, the change goes ahead.
    assert apply_acs(str(hw), "0x10de", CLASSES, False, Gate())["changed"]
    gpu_audio = render_host(seed, faults={"vfio-bound": "0000:14:00.1"})
    assert os.path.basename(os.readlink(gpu_audio / "sys/bus/pci/devices/0000:14:00.1/driver")) == "vfio-pci"
    before = (gpu_audio / "sys/bus/pci/devices/0000:10:01.1/config").read_bytes()
    with pytest.raises(TuningError, match=r"0000:14:00.1 \(below 0000:12:01.0, 0000:10:01.1\) bound to vfio-pci"):
        apply_acs(str(gpu_audio), "0x10de", CLASSES, False, Gate())
    assert (gpu_audio / "sys/bus/pci/devices/0000:10:01.1/config").read_bytes() == before
    assert apply_acs(str(gpu_audio), "0x10de", CLASSES, True, Gate())["changed"]
    with pytest.raises(ValueError, match="no PCI function 0000:99:00.0"):
        render_host(seed, faults={"vfio-bound": "0000:99:00.0"})


def test_the_verification_judges_the_modelled_fabric(render_host, seed):
    """tests/verify's fabric checks on a rendered seed host, as the lab's verify suite runs them."""
    checks = load("test_pcie_fabric")
    hw = render_host(seed, cmdline=PT)
    want = resolved({})
    # The GPU checks' query, as the lab's nvidia-smi answers it.
    gpus = gpu_reading("@@\n" + smi(hw, f"--query-gpu={GPU_QUERY}", "--format=csv,noheader,nounits")[1])
    p2p = lambda: [smi(hw, "topo", "-p2p", m)[1] + "rc=0\n" for m in "rw"]  # noqa: E731
    functions = {f["bdf"]: f for f in pci_probe.probe(str(hw / "sys/bus/pci/devices"))}
    assert "redirect on at 12:" in outcome(checks.test_pcie_acs, "lab", functions, want)
    assert "write NS (not supported)" in outcome(checks.test_pcie_p2p, "lab", p2p(), want)
    assert outcome(checks.test_pcie_links, "lab", functions, want) == "pass"
    assert len(gpus[1]) == 8
    assert outcome(checks.test_pcie_bar1, "lab", functions, gpus, want) == "pass"
    apply_acs(str(hw), "0x10de", CLASSES, False, Gate())
    functions = {f["bdf"]: f for f in pci_probe.probe(str(hw / "sys/bus/pci/devices"))}
    assert outcome(checks.test_pcie_acs, "lab", functions, want) == "pass"
    assert outcome(checks.test_pcie_p2p, "lab", p2p(), want) == "pass"
    narrow = {f["bdf"]: f for f in pci_probe.probe(str(render_host(seed, faults={"link-degraded": ""})
                                                       / "sys/bus/pci/devices"))}
    assert "0000:10:01.1 is configured for x4" in outcome(checks.test_pcie_links, "lab", narrow, want)
