"""PCIe MaxReadReq on every GPU endpoint, and nowhere else on the GPUs (role pcie)."""
from outcome import mismatch, not_applicable


def is_target(function, want):
    """A GPU endpoint as the modules select it: vendor and class match, never an SR-IOV virtual function."""
    classes = {int(c, 16) for c in want["pcie_mrrs_classes"]}
    return (function["vendor"] and not function.get("vf")
            and int(function["vendor"], 16) == int(want["pcie_mrrs_vendor"], 16)
            and int(function["class"], 16) >> 8 in classes)


def test_pcie_mrrs(name, pci_functions, want):
    functions = list(pci_functions.values())
    if not functions:
        not_applicable(name, "MaxReadReq", "no PCI devices visible in /sys/bus/pci/devices")
    value = int(want["pcie_max_read_request"])
    targets = [f for f in functions if is_target(f, want)]
    expected = f"MaxReadReq {value} on every GPU endpoint (vendor {want['pcie_mrrs_vendor']}," \
               f" class {'/'.join(want['pcie_mrrs_classes'])})"
    if not targets:
        mismatch(name, "MaxReadReq", expected, "no such PCI function")
    off = [f"{f['bdf']}: {f['mrrs']}" for f in targets if f["mrrs"] != value]
    if off:
        mismatch(name, "MaxReadReq", expected, f"{len(off)} of {len(targets)} off: " + ", ".join(off))


def test_pcie_mrrs_untouched_elsewhere(name, pci_functions, want):
    """The GPUs' other functions (audio, USB) are never written: they must not carry the GPU value.

    Other vendors' devices are not judged: their drivers may raise MaxReadReq themselves; nor are
    SR-IOV virtual functions, whose Device Control fields are reserved."""
    value = int(want["pcie_max_read_request"])
    vendor = int(want["pcie_mrrs_vendor"], 16)
    others = [f for f in pci_functions.values() if f["vendor"] and int(f["vendor"], 16) == vendor and not is_target(f, want)
              and not f.get("vf") and isinstance(f["mrrs"], int)]
    if not others:
        not_applicable(name, "MaxReadReq elsewhere", f"no other PCI Express function of vendor {want['pcie_mrrs_vendor']}")
    raised = [f"{f['bdf']} (class {f['class']})" for f in others if f["mrrs"] == value]
    if raised:
        mismatch(name, "MaxReadReq elsewhere", f"the GPUs' other functions not raised to {value} (only endpoints are written)",
                 f"{value} on " + ", ".join(raised))
