"""Sent to the host as `python3 -c`: every PCI function's vendor, class, MaxReadReq, ACS
Control, the bridges above it, its first 256 config bytes (link registers), BAR1 size and
whether it is an SR-IOV virtual function as JSON, read from config space in one pass
(pciutils may be absent; stdlib only)."""
import glob
import json
import os
import re


def max_read_request(config):
    """MaxReadReq in bytes from Device Control (PCIe capability + 8), or a reason why not."""
    if len(config) < 64 or config[:4] == b"\xff\xff\xff\xff":
        return "config space unreadable (all 0xff: device lost?)"
    if not config[0x06] & 0x10:
        return "no capability list"
    offset, seen = config[0x34] & 0xFC, set()
    while offset and offset not in seen and offset + 10 <= len(config):
        seen.add(offset)
        if config[offset] == 0x10:
            return 128 << ((int.from_bytes(config[offset + 8:offset + 10], "little") >> 12) & 7)
        offset = config[offset + 1] & 0xFC
    return "no PCI Express capability"


def acs_control(config):
    """ACS Control (ACS extended capability 0x000D + 6), None without the capability."""
    offset, seen = 0x100, set()
    while 0x100 <= offset <= len(config) - 8 and offset not in seen:
        seen.add(offset)
        header = int.from_bytes(config[offset:offset + 4], "little")
        if header in (0, 0xFFFFFFFF):
            return None
        if header & 0xFFFF == 0x000D:
            return int.from_bytes(config[offset + 6:offset + 8], "little")
        offset = (header >> 20) & 0xFFC
    return None


def bar1_bytes(path):
    """NVIDIA's BAR1: the second assigned region of the sysfs `resource` file (register 1 or, after
    a 64-bit BAR0, register 2); 0 when unassigned or unreadable."""
    try:
        with open(os.path.join(path, "resource")) as handle:
            lines = handle.read().splitlines()
    except OSError:
        return 0
    sizes = [end - start + 1 for start, end in ((int(v, 16) for v in line.split()[:2]) for line in lines[:6])
             if end > start]
    return sizes[1] if len(sizes) > 1 else 0


def ports_above(path):
    """Bridges between a function and its host bridge, nearest first, from the sysfs nesting."""
    parent, ports = os.path.dirname(os.path.realpath(path)), []
    while re.fullmatch(r"[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]", os.path.basename(parent)):
        ports.append(os.path.basename(parent))
        parent = os.path.dirname(parent)
    return ports


def probe(devices="/sys/bus/pci/devices"):
    found = []
    for path in sorted(glob.glob(devices + "/*")):
        def read(name, mode="r"):
            with open(os.path.join(path, name), mode) as handle:
                return handle.read()
        # A virtual function (a `physfn` link) has Device Control fields reserved: never a target.
        vf = os.path.lexists(os.path.join(path, "physfn"))
        try:
            config = read("config", "rb")
            found.append({"bdf": os.path.basename(path), "vendor": read("vendor").strip(),
                          "class": read("class").strip(), "mrrs": max_read_request(config),
                          "acs": acs_control(config), "config_bytes": len(config), "ports": ports_above(path),
                          "head": config[:256].hex(), "bar1": bar1_bytes(path), "vf": vf})
        except OSError as exc:
            found.append({"bdf": os.path.basename(path), "vendor": "", "class": "", "mrrs": str(exc),
                          "acs": None, "config_bytes": 0, "ports": [], "head": "", "bar1": 0, "vf": vf})
    return found


if __name__ == "__main__":
    print(json.dumps(probe()))
