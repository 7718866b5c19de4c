"""Pieces of tests/verify for the PCIe fabric, on fake trees: the config-space probe, the fabric
tests called directly, and the command line the verification expects."""
import inspect
import json
import os
from types import SimpleNamespace

from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node.gate import Gate
from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node.pcie import apply_mrrs
from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node.pcie_acs import apply_acs
from verifycheck import load, outcome, resolved
from fakehost import (BARE_GPU, BARE_ROOT, H200_RESOURCE, NVME, NVME_ROOT, REPO, SWITCH_DOWN, SWITCH_GPUS,
                      SWITCH_ROOT, SWITCH_UP, fabric_tree, pci_device)

# The suite's own modules (verifycheck puts tests/verify on the path).
import pci_probe
from expected import truthy
from test_kernel import wanted_params


def test_probe_reads_acs_control_and_the_ports_above(tmp_path):
    root = fabric_tree(str(tmp_path))
    found = {f["bdf"]: f for f in pci_probe.probe(root + "/sys/bus/pci/devices")}
    assert found[SWITCH_GPUS[1]]["ports"] == [SWITCH_DOWN[1], SWITCH_UP, SWITCH_ROOT]
    assert found[BARE_GPU]["ports"] == [BARE_ROOT] and found[NVME]["ports"] == [NVME_ROOT]
    assert {b: found[b]["acs"] for b in (SWITCH_ROOT, SWITCH_UP, SWITCH_DOWN[0], BARE_ROOT)} == {
        SWITCH_ROOT: 0x1D, SWITCH_UP: None, SWITCH_DOWN[0]: 0x1D, BARE_ROOT: None}
    assert found[SWITCH_ROOT]["config_bytes"] == 4096


def test_probe_reads_bar1_as_nvidia_numbers_it(tmp_path):
    root = fabric_tree(str(tmp_path))
    (tmp_path / ("sys/bus/pci/devices/%s/resource" % SWITCH_GPUS[0])).write_text(H200_RESOURCE)
    found = probed(root)
    assert found[SWITCH_GPUS[0]]["bar1"] >> 20 == 262144 and found[SWITCH_GPUS[1]]["bar1"] == 128 << 30


def test_probe_finds_acs_wherever_the_vendor_put_it():
    config = bytearray(4096)
    config[0x100:0x104] = (0x0001 | 1 << 16 | 0x200 << 20).to_bytes(4, "little")  # AER, next at 0x200
    config[0x200:0x204] = (0x000D | 1 << 16).to_bytes(4, "little")
    config[0x206:0x208] = (0x0011).to_bytes(2, "little")
    assert pci_probe.acs_control(bytes(config)) == 0x11
    assert pci_probe.acs_control(bytes(256)) is None


def test_the_verification_expects_the_fabric_parameters():
    want = resolved({})
    assert wanted_params(want, "AuthenticAMD") == (
        ["processor.max_cstate=1", "amd_pstate=active", "pcie_aspm=off", "pcie_port_pm=off", "iommu=pt"],
        ["iommu.passthrough", "amd_iommu"])
    intel = resolved({"pcie_iommu_mode": "off", "pcie_link_pm_off": "false", "kernel_cmdline_remove": ["quiet"]})
    assert wanted_params(intel, "GenuineIntel") == (["processor.max_cstate=1", "intel_iommu=off", "iommu=off"],
                                                   ["quiet", "iommu.passthrough"])
    assert truthy("yes") and not truthy("false") and not truthy(False)


def probed(root):
    return {f["bdf"]: f for f in pci_probe.probe(root + "/sys/bus/pci/devices")}


def test_acs_verification_names_the_ports_still_redirecting(tmp_path):
    check = load("test_pcie_fabric").test_pcie_acs
    root = fabric_tree(str(tmp_path))
    found = outcome(check, "h1", probed(root), resolved({}))
    assert found.startswith("h1: ACS redirect: expected P2P request and completion redirect off on the 3 port(s)")
    assert "redirect on at 3: 0000:10:01.1 (0x001d)" in found
    apply_acs(root, "0x10de", ["0x0300", "0x0302"], False, Gate())
    assert outcome(check, "h1", probed(root), resolved({})) == "pass"
    assert "not applicable" in outcome(check, "h1", probed(root), resolved({"pcie_acs_clear_redirect": "no"}))


def test_link_verification_names_the_narrow_port_and_bar1_the_small_window(tmp_path):
    module = load("test_pcie_fabric")
    narrow = probed(fabric_tree(str(tmp_path / "a"), root_width=4, up_trained=4))
    found = outcome(module.test_pcie_links, "h1", narrow, resolved({}))
    assert "PCIe links: expected 4 link(s) on the GPU paths at their speed and width" in found
    assert "0000:10:01.1 is configured for x4" in found
    assert "not applicable" in outcome(module.test_pcie_links, "h1", narrow,
                                       resolved({"pcie_fabric_gates": ["bar1"]}))
    small = probed(fabric_tree(str(tmp_path / "b"), bar1=256 << 20))
    gpus = ({}, [(str(i), "00000000:" + gpu[5:], "12.0", "Enabled", "97887")
                 for i, gpu in enumerate(SWITCH_GPUS + (BARE_GPU,))], [])
    found = outcome(module.test_pcie_bar1, "h1", small, gpus, resolved({}))
    assert found.startswith("h1: BAR1: expected BAR1 at least the GPU's memory")
    assert "%s: 256 MiB for 97887 MiB" % SWITCH_GPUS[0] in found
    assert outcome(module.test_pcie_bar1, "h1", narrow, gpus, resolved({})) == "pass"
    hidden = ({}, [(row[:4] + ("[N/A]",)) for row in gpus[1]], [])
    assert "not applicable" in outcome(module.test_pcie_bar1, "h1", small, hidden, resolved({}))


def test_p2p_verification_reads_both_matrices():
    check = load("test_pcie_fabric").test_pcie_p2p
    ok = " \tGPU0\tGPU1\t\n GPU0\tX\tOK\t\n GPU1\tOK\tX\t\n\nLegend:\n\n  X    = Self\nrc=0\n"
    cns = ok.replace("X\tOK", "X\tCNS")
    assert outcome(check, "h1", [ok, ok], resolved({})) == "pass"
    assert outcome(check, "h1", [ok, cns], resolved({})) == (
        "h1: P2P matrix: expected P2P read and write OK between all GPUs, found write CNS (chipset not supported)"
        " between GPU0->GPU1")
    assert "not applicable" in outcome(check, "h1", ["sh: nvidia-smi: not found\nrc=127\n"] * 2, resolved({}))


def test_mrrs_verification_skips_sriov_virtual_functions(tmp_path):
    """A GPU's VF (a physfn link) is no target, as the modules select none: its config space
    reading all 0xff is no MaxReadReq mismatch."""
    module = load("test_pcie_mrrs")
    root = fabric_tree(str(tmp_path))
    apply_mrrs(root, 4096, "0x10de", ["0x0300", "0x0302"], Gate())
    vf = SWITCH_GPUS[0][:-1] + "4"
    pci_device(root, vf, 0x10DE, 0x2BB5, 0x030200, b"\xff" * 4096)
    os.symlink("../" + SWITCH_GPUS[0], os.path.join(root, "sys/bus/pci/devices", vf, "physfn"))
    functions = probed(root)
    assert outcome(module.test_pcie_mrrs, "h1", functions, resolved({})) == "pass"
    assert [bdf for bdf, f in functions.items() if f["vf"]] == [vf]


def test_the_pcie_checks_share_one_probe_answer_per_host(tmp_path):
    """pci_probe.py runs once per host: conftest's pci_functions reads it, every PCIe check takes that."""
    root = fabric_tree(str(tmp_path))
    commands = []

    def run(command, *args):
        commands.append((command, args))
        return SimpleNamespace(rc=0, stdout=json.dumps(pci_probe.probe(root + "/sys/bus/pci/devices")), stderr="")

    read = load("conftest").pci_functions._get_wrapped_function()
    assert read(run, "h1") == probed(root)
    assert commands == [("python3 -c %s", ((REPO / "tests/verify/pci_probe.py").read_text(),))]
    failing = outcome(read, lambda command, *args: SimpleNamespace(rc=1, stdout="", stderr="Permission denied"), "h1")
    assert failing == "h1: PCIe: could not read PCI config space: Permission denied"
    checks = [load("test_pcie_mrrs").test_pcie_mrrs, load("test_pcie_mrrs").test_pcie_mrrs_untouched_elsewhere] + [
        getattr(load("test_pcie_fabric"), f"test_pcie_{check}") for check in ("acs", "links", "bar1")]
    assert all("pci_functions" in inspect.signature(check).parameters for check in checks)
