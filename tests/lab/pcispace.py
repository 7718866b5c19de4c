"""PCI config space of a lab host as the lab tests read it: every function's vendor, class,
config bytes and the bridges above it, and the ACS capability in it."""
import json
import shlex

from helpers import on_host

REDIRECT = 0x000C  # ACS Control bit 2 P2P Request Redirect, bit 3 P2P Completion Redirect
# Every PCI function: vendor, class, full config space (hex) and the bridges above it.
SNAPSHOT = r"""
import glob, json, os, re
out = {}
for path in sorted(glob.glob("/sys/bus/pci/devices/*")):
    read = lambda name, mode="r": open(os.path.join(path, name), mode).read()
    parent, ports = os.path.dirname(os.path.realpath(path)), []
    while re.fullmatch(r"[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]", os.path.basename(parent)):
        ports.append(os.path.basename(parent))
        parent = os.path.dirname(parent)
    out[os.path.basename(path)] = {"vendor": read("vendor").strip(), "class": read("class").strip(),
                                   "config": read("config", "rb").hex(), "ports": ports}
print(json.dumps(out))
"""
PORT_X4 = "0000:10:01.1"  # root port above GPU 0's switch in the seed profile
NVME = "0000:01:00.0"


def pci(host):
    return {bdf: dict(f, config=bytes.fromhex(f["config"]))
            for bdf, f in json.loads(on_host(host, "python3 -c " + shlex.quote(SNAPSHOT))).items()}


def is_gpu(function):
    return function["vendor"] == "0x10de" and function["class"][:6] in ("0x0300", "0x0302")


def gpu_ports(functions):
    return {port for f in functions.values() if is_gpu(f) for port in f["ports"]}


def acs_offset(config):
    """Offset of the ACS extended capability (0x000D), or None."""
    offset = 0x100
    while offset:
        header = int.from_bytes(config[offset:offset + 4], "little")
        if header & 0xFFFF == 0x000D:
            return offset
        offset = (header >> 20) & 0xFFC
    return None


def acs_control(config):
    offset = acs_offset(config)
    return None if offset is None else int.from_bytes(config[offset + 6:offset + 8], "little")
