"""Read-only gates on the PCIe fabric under the GPUs: link width and speed, BAR1, P2P status.

Link speed is judged by the fastest the link can reach (Link Capabilities 2 supported
speeds, capped by the Link Control 2 target speed), never by the current speed, which
drops while a GPU idles. Width is judged by Link Status against Link Capabilities.
AER counters are read and reported, never judged.
"""
import re

from . import gpu_query, pcie, sysfs
from .gate import TuningError, run

GATES = ("width", "speed", "bar1", "p2p")
ROOT_PORT, DOWNSTREAM = 0x4, 0x6
GT_S = {1: "2.5", 2: "5", 3: "8", 4: "16", 5: "32", 6: "64"}
AER = {"correctable": ("aer_dev_correctable", "TOTAL_ERR_COR"),
       "fatal": ("aer_dev_fatal", "TOTAL_ERR_FATAL"),
       "nonfatal": ("aer_dev_nonfatal", "TOTAL_ERR_NONFATAL")}
P2P_MODES = {"r": "read", "w": "write"}
# Kernel command line for the fabric: link power management off (a root port suspending while a GPU
# retrains its link gives "Surprise Link Down" lock-ups), and the IOMMU out of the DMA path.
LINK_PM_PARAMS = ["pcie_aspm=off", "pcie_port_pm=off"]
IOMMU_MODES = ("passthrough", "off", "leave")
VENDOR_IOMMU = {"AuthenticAMD": "amd_iommu", "GenuineIntel": "intel_iommu"}
P2P_STATUS = {"CNS": "chipset not supported", "GNS": "GPU not supported", "TNS": "topology not supported",
              "NS": "not supported", "U": "unknown"}


def cmdline_params(cpu_vendor, iommu_mode, link_pm_off=True):
    """(parameters, keys to remove) for the command line of a PCIe-only GPU host.

    passthrough: the IOMMU stays on (interrupt remapping, VFIO) but does not translate GPU DMA;
    Intel kernels may leave VT-d off by default, hence intel_iommu=on. off: no IOMMU at all.
    leave: the IOMMU as the kernel and firmware set it. link_pm_off adds pcie_aspm=off pcie_port_pm=off.
    """
    if iommu_mode not in IOMMU_MODES:
        raise TuningError("iommu mode %r is not one of %s" % (iommu_mode, ", ".join(IOMMU_MODES)))
    vendor = VENDOR_IOMMU.get(cpu_vendor)
    link_pm = list(LINK_PM_PARAMS) if link_pm_off else []
    if iommu_mode == "leave":
        return link_pm, []
    if iommu_mode == "off":
        return link_pm + (["%s=off" % vendor] if vendor else []) + ["iommu=off"], ["iommu.passthrough"]
    if vendor == "intel_iommu":
        return link_pm + ["intel_iommu=on", "iommu=pt"], ["iommu.passthrough"]
    # amd_iommu has no "on": drop an amd_iommu=off that would turn the IOMMU off instead.
    return link_pm + ["iommu=pt"], ["iommu.passthrough"] + ([vendor] if vendor else [])


def link_regs(root, bdf):
    """Port type, widths and generations of one function from its PCI Express capability."""
    return config_link_regs(pcie.read_config(root, bdf), bdf)


def config_link_regs(config, bdf):
    """link_regs from config space bytes (the first 256 are enough)."""
    off = pcie.pcie_cap_offset(config)
    if off is None or off + 0x32 > len(config):
        raise TuningError("%s has no readable PCI Express capability (need root)" % bdf)
    cap, status = pcie.dword(config, off + 0x0C), pcie.word(config, off + 0x12)
    vector = (pcie.dword(config, off + 0x2C) >> 1) & 0x7F  # Link Capabilities 2: supported speeds
    gen_max = vector.bit_length() or cap & 0xF
    target = pcie.word(config, off + 0x30) & 0xF  # Link Control 2: target link speed
    return {"type": pcie.port_type(config), "width_cap": (cap >> 4) & 0x3F,
            "width": (status >> 4) & 0x3F, "gen_max": gen_max, "gen_reach": min(gen_max, target or gen_max),
            "gen": status & 0xF}


def _gen(gen):
    return "Gen%d (%s GT/s)" % (gen, GT_S.get(gen, "?"))


def path_links(root, gpu):
    """[(upper port, device, upper regs, device regs)] for each physical link from the root port down to the GPU."""
    path = [gpu] + pcie.ports_above(root, gpu)
    return path_pairs(path, {bdf: link_regs(root, bdf) for bdf in path})


def path_pairs(path, regs):
    """path_links of PATH (the GPU, then the ports above it nearest first) with their REGS."""
    # A switch upstream port and its downstream ports share an internal bus, not a link.
    return [(up, dev, regs[up], regs[dev]) for dev, up in reversed(list(zip(path, path[1:])))
            if regs[up]["type"] in (ROOT_PORT, DOWNSTREAM)]


def link_failures(up, dev, ur, dr):
    failures = []
    if dr["width"] < dr["width_cap"]:
        where = "link %s -> %s trained x%d, %s supports x%d" % (up, dev, dr["width"], dev, dr["width_cap"])
        if ur["width_cap"] < dr["width_cap"]:
            failures.append("width: %s but %s is configured for x%d (Link Capabilities): set that port to x%d "
                            "in the BIOS (PCIe lane width / bifurcation)" % (where, up, ur["width_cap"], dr["width_cap"]))
        else:
            failures.append("width: %s and so does %s: reseat the card, riser or cable of that slot and check "
                            "the AER counters" % (where, up))
    reach, hw = min(ur["gen_reach"], dr["gen_reach"]), min(ur["gen_max"], dr["gen_max"])
    if reach < hw:
        capped = up if ur["gen_reach"] == reach else dev
        failures.append("speed: link %s -> %s can reach at most %s though both ends support %s: the Link Control 2 "
                        "target speed of %s is capped (BIOS PCIe link speed setting)" % (up, dev, _gen(reach), _gen(hw), capped))
    return failures


def bar1_bytes(root, bdf):
    """Size of NVIDIA's BAR1 (the framebuffer window), 0 when unassigned.

    NVIDIA counts regions, not BAR registers: BAR1 is the second assigned region of the sysfs
    resource file (lines "start end flags", one per BAR register). It sits at register 1 when
    BAR0 is 32-bit and at register 2 when BAR0 is 64-bit, as on the H200.
    """
    lines = (sysfs.read(root, "%s/%s/resource" % (pcie.PCI_DEVICES, bdf)) or "").splitlines()
    sizes = [end - start + 1 for start, end in ((int(v, 16) for v in line.split()[:2]) for line in lines[:6])
             if end > start]
    return sizes[1] if len(sizes) > 1 else 0


def aer_counters(root, bdf):
    """{correctable, fatal, nonfatal} totals from sysfs; empty when the kernel exposes no AER files."""
    counters = {}
    for name, (attr, total) in AER.items():
        match = re.search(r"^%s (\d+)$" % total, sysfs.read(root, "%s/%s/%s" % (pcie.PCI_DEVICES, bdf, attr)) or "", re.M)
        if match:
            counters[name] = int(match.group(1))
    return counters


def smi(argv, runner):
    rc, out, err = runner(argv)
    if rc != 0:
        raise TuningError("%s failed (rc=%d): %s" % (" ".join(argv), rc, (out + err).strip()))
    return out


def gpu_memory(nvidia_smi, runner):
    """{sysfs BDF: (index, memory MiB)} from nvidia-smi."""
    out = smi([nvidia_smi, "--query-gpu=index,pci.bus_id,memory.total", "--format=csv,noheader,nounits"], runner)
    rows = [line.split(", ") for line in out.splitlines() if line.strip()]
    return {gpu_query.sysfs_bdf(bus): (int(index), int(mib)) for index, bus, mib in rows}


def p2p_matrix(text):
    """{(i, j): status} from `nvidia-smi topo -p2p r|w`, diagonal left out."""
    matrix = {}
    for line in text.splitlines():
        words = line.split()
        if len(words) > 1 and re.match(r"GPU\d+$", words[0]) and not re.match(r"GPU\d+$", words[1]):
            i = int(words[0][3:])
            matrix.update({(i, j): s for j, s in enumerate(words[1:]) if j != i})
    return matrix


def p2p_failures(nvidia_smi, runner, names):
    failures, status = [], {}
    for mode, word in P2P_MODES.items():
        matrix = p2p_matrix(smi([nvidia_smi, "topo", "-p2p", mode], runner))
        status[word] = {"%d-%d" % pair: s for pair, s in sorted(matrix.items())}
        bad = {}
        for (i, j), s in sorted(matrix.items()):
            if s != "OK":
                bad.setdefault(s, []).append("%s->%s" % (names.get(i, "GPU%d" % i), names.get(j, "GPU%d" % j)))
        failures += ["p2p: %s %s (%s) between %s: clear ACS redirect on the ports above the GPUs (pcie_acs) and "
                     "boot with the IOMMU in passthrough or off" % (word, s, P2P_STATUS.get(s, s), ", ".join(pairs))
                     for s, pairs in bad.items()]
    return failures, status


def gate_memory(gpus):
    """{sysfs BDF: (index, memory MiB)} from the GPU gate's GPUs; None where one lacks a value."""
    memory = {gpu.get("pci_bdf"): (gpu.get("index"), gpu.get("memory_total_mib")) for gpu in gpus}
    if not memory or any(k is None or None in v for k, v in memory.items()):
        return None
    return memory


def check(root, vendor, classes, gates, nvidia_smi="nvidia-smi", runner=run, memory=None):
    """Facts of the fabric under the GPUs and the failures of the enforced GATES. memory: the
    GPUs' memory as gate_memory() gives it when the GPU gate read them already, else nvidia-smi."""
    unknown = set(gates) - set(GATES)
    if unknown:
        raise TuningError("gates: unknown %s; known: %s" % (", ".join(sorted(unknown)), ", ".join(GATES)))
    gpus = pcie.find_devices(root, vendor, classes)
    failures, links, aer, seen = [], [], {}, set()
    for gpu in gpus:
        for up, dev, ur, dr in path_links(root, gpu):
            if (up, dev) in seen:  # GPUs behind one switch share its uplink
                continue
            seen.add((up, dev))
            links.append({"upper": up, "device": dev, "width": dr["width"], "width_cap": dr["width_cap"],
                          "upper_width_cap": ur["width_cap"], "gen": dr["gen"],
                          "gen_reach": min(ur["gen_reach"], dr["gen_reach"])})
            failures += [f for f in link_failures(up, dev, ur, dr) if f.split(":")[0] in gates]
        for bdf in [gpu] + pcie.ports_above(root, gpu):
            aer[bdf] = aer_counters(root, bdf)
    bar1 = {bdf: bar1_bytes(root, bdf) >> 20 for bdf in gpus}
    result = {"changed": False, "gpus": len(gpus), "links": links, "bar1_mib": bar1,
              "aer": {bdf: c for bdf, c in aer.items() if c}, "not_applicable": {}}
    if gpus and ("bar1" in gates or "p2p" in gates):
        memory = memory or gpu_memory(nvidia_smi, runner)
        result["memory_mib"] = {bdf: mib for bdf, (index, mib) in memory.items()}
        if "bar1" in gates:
            failures += ["bar1: %s BAR1 is %d MiB, smaller than its %d MiB of memory: enable Resizable BAR and "
                         "Above 4G Decoding in the BIOS" % (bdf, bar1[bdf], memory[bdf][1])
                         for bdf in gpus if bdf in memory and bar1[bdf] < memory[bdf][1]]
        if "p2p" in gates:
            names = {index: "GPU%d (%s)" % (index, bdf) for bdf, (index, mib) in memory.items()}
            p2p, result["p2p"] = p2p_failures(nvidia_smi, runner, names)
            failures += p2p
    result["failures"] = failures
    result["not_applicable"] = _not_applicable(gates, gpus, links, result.get("p2p"))
    # Errors a link corrected are a warning (a marginal slot or riser), never a failure.
    result["warnings"] = ["AER %s: %s" % (bdf, ", ".join("%s %d" % (k, n) for k, n in sorted(c.items()) if n))
                          for bdf, c in sorted(result["aer"].items()) if any(c.values())]
    result["msg"] = "; ".join(failures) or _passed(len(gpus), gates, result["not_applicable"])
    return result


def _not_applicable(gates, gpus, links, p2p):
    """{gate: why} for the enforced gates that had nothing to check (a GPU on a root bus, as in a VM)."""
    why = {}
    if not gpus:
        return {gate: "no GPU found" for gate in gates}
    for gate in set(gates) & {"width", "speed"}:
        if not links:
            why[gate] = "no GPU behind a PCIe port"
    if "p2p" in gates and not any(p2p.values()):
        why["p2p"] = "fewer than two GPUs"
    return why


def _passed(count, gates, not_applicable):
    """'PCIe fabric of N GPU(s): bar1 pass; width, speed not applicable (no GPU behind a PCIe port)'."""
    parts = []
    checked = [gate for gate in gates if gate not in not_applicable]
    if checked:
        parts.append("%s pass" % ", ".join(checked))
    for reason in sorted(set(not_applicable.values())):
        parts.append("%s not applicable (%s)" % (", ".join(g for g in gates if not_applicable.get(g) == reason),
                                                 reason))
    return "PCIe fabric of %d GPU(s): %s" % (count, "; ".join(parts))
