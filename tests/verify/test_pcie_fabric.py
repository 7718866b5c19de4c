"""The PCIe fabric under the GPUs (role pcie): ACS redirect off on every port above a GPU,
P2P reads and writes OK between all GPUs, and the gates the plan ran (links at capability,
BAR1 at least the GPU's memory) still hold."""
import pytest

from expected import truthy
from infertune_node.gate import TuningError
from infertune_node.gpu_query import sysfs_bdf
from infertune_node.pcie_fabric import (P2P_STATUS, config_link_regs, link_failures, p2p_matrix,
                                        path_pairs)
from outcome import mismatch, not_applicable
from probes import probe
from readings import sections
from test_pcie_mrrs import is_target

REDIRECT = 0x000C  # ACS Control bit 2 P2P Request Redirect, bit 3 P2P Completion Redirect


def test_pcie_acs(name, pci_functions, want):
    if not truthy(want["pcie_acs_clear_redirect"]):
        not_applicable(name, "ACS redirect", "pcie_acs_clear_redirect is false")
    ports = sorted({port for f in pci_functions.values() if is_target(f, want) for port in f["ports"]})
    if not ports:
        not_applicable(name, "ACS redirect", "no GPU behind a PCI bridge (no port to judge)")
    unreadable = [p for p in ports if pci_functions.get(p, {}).get("config_bytes", 0) < 4096]
    if unreadable:
        mismatch(name, "ACS redirect", "ACS Control readable on every port above the GPUs",
                 "extended config space unreadable (need root) on " + ", ".join(unreadable))
    judged = [p for p in ports if pci_functions[p]["acs"] is not None]
    on = [f"{p} ({pci_functions[p]['acs']:#06x})" for p in judged if pci_functions[p]["acs"] & REDIRECT]
    if on:
        mismatch(name, "ACS redirect", f"P2P request and completion redirect off on the {len(judged)} port(s) above"
                 " the GPUs that have ACS", f"redirect on at {len(on)}: " + ", ".join(on))


P2P = "nvidia-smi topo -p2p r 2>&1; echo \"rc=$?\"; echo @@; nvidia-smi topo -p2p w 2>&1; echo \"rc=$?\""
probe("p2p")(lambda want: P2P)


@pytest.fixture(scope="module")
def p2p(sh):
    """`nvidia-smi topo -p2p r` and `-p2p w`, in one command."""
    return sections(sh(P2P), 2)


def test_pcie_p2p(name, p2p, want):
    if not truthy(want["pcie_acs_clear_redirect"]):
        not_applicable(name, "P2P matrix", "pcie_acs_clear_redirect is false")
    bad = []
    for mode, text in zip(("read", "write"), p2p):
        body, sep, rc = text.rstrip().rpartition("rc=")
        if rc.strip() == "127":
            not_applicable(name, "P2P matrix", "nvidia-smi is not installed")
        if rc.strip() != "0":
            mismatch(name, "P2P matrix", f"nvidia-smi topo -p2p {mode[0]} OK between all GPUs",
                     f"rc={rc.strip()}: {body.strip()[-200:]}")
        matrix = p2p_matrix(body)
        if not matrix:
            not_applicable(name, "P2P matrix", "fewer than two GPUs")
        pairs = {}
        for (i, j), status in sorted(matrix.items()):
            if status != "OK":
                pairs.setdefault(status, []).append(f"GPU{i}->GPU{j}")
        bad += [f"{mode} {status} ({P2P_STATUS.get(status, status)}) between {', '.join(p)}"
                for status, p in pairs.items()]
    if bad:
        mismatch(name, "P2P matrix", "P2P read and write OK between all GPUs", "; ".join(bad))


def gates(want):
    return set(want["pcie_fabric_gates"])


def test_pcie_links(name, pci_functions, want):
    judged = gates(want) & {"width", "speed"}
    if not judged:
        not_applicable(name, "PCIe links", "pcie_fabric_gates has neither width nor speed")
    failures, seen = [], set()
    for gpu in sorted(b for b, f in pci_functions.items() if is_target(f, want)):
        path = [gpu] + pci_functions[gpu]["ports"]
        try:
            regs = {b: config_link_regs(bytes.fromhex(pci_functions[b]["head"]), b) for b in path}
        except (KeyError, TuningError) as exc:
            mismatch(name, "PCIe links", "every link on the GPU paths readable", str(exc))
        for up, dev, ur, dr in path_pairs(path, regs):
            if (up, dev) not in seen:
                seen.add((up, dev))
                failures += [f for f in link_failures(up, dev, ur, dr) if f.split(":")[0] in judged]
    if not seen:
        not_applicable(name, "PCIe links", "no GPU behind a PCIe port")
    if failures:
        mismatch(name, "PCIe links", f"{len(seen)} link(s) on the GPU paths at their {' and '.join(sorted(judged))}",
                 "; ".join(failures))


def test_pcie_bar1(name, pci_functions, gpu_state, want):
    if "bar1" not in gates(want):
        not_applicable(name, "BAR1", "bar1 is not in pcie_fabric_gates")
    state, rows, other = gpu_state
    sizes = {sysfs_bdf(bus): int(mib) for index, bus, capability, mode, mib in rows if mib.isdigit()}
    if not sizes:
        not_applicable(name, "BAR1", "nvidia-smi reports no GPU memory: " + "; ".join(other)[-200:])
    small = [f"{bdf}: {pci_functions[bdf]['bar1'] >> 20} MiB for {sizes[bdf]} MiB"
             for bdf in sorted(sizes) if bdf in pci_functions and pci_functions[bdf]["bar1"] >> 20 < sizes[bdf]]
    if small:
        mismatch(name, "BAR1", "BAR1 at least the GPU's memory on every GPU (Resizable BAR, Above 4G Decoding)",
                 ", ".join(small))
