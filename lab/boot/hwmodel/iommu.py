"""What the IOMMU does with device DMA this boot, from the command line (x86 kernel rules)."""
from . import cmdline as kcmdline

OFF, PASSTHROUGH, TRANSLATED = "off", "passthrough", "translated"
VENDOR_PARAM = {"AuthenticAMD": "amd_iommu", "GenuineIntel": "intel_iommu"}


def mode(cmdline, cpu_vendor, default):
    """off, passthrough or translated; DEFAULT is the profile's (a distribution kernel translates)."""
    vendor_value = kcmdline.param(cmdline, VENDOR_PARAM.get(cpu_vendor, "")) or ""
    iommu = kcmdline.param(cmdline, "iommu")
    if iommu == "off" or "off" in vendor_value.split(","):
        return OFF
    passthrough = kcmdline.param(cmdline, "iommu.passthrough")
    if iommu == "pt" or (iommu != "nopt" and passthrough in ("1", "y", "Y", "on")):
        return PASSTHROUGH
    if iommu == "nopt" or passthrough in ("0", "n", "N", "off") or "on" in vendor_value.split(","):
        return TRANSLATED
    return default
