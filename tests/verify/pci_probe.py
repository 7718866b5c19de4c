"""Sent to the host as `python3 -c`: every PCI function's vendor, class and MaxReadReq
as JSON, read from config space in one pass (pciutils may be absent; stdlib only)."""
import glob
import json
import os


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


def probe(devices="/sys/bus/pci/devices"):
    found = []
    for path in sorted(glob.glob(devices + "/*")):
        def read(name, mode="r"):
            with open(os.path.join(path, name), mode) as handle:
                return handle.read()
        try:
            found.append({"bdf": os.path.basename(path), "vendor": read("vendor").strip(),
                          "class": read("class").strip(), "mrrs": max_read_request(read("config", "rb"))})
        except OSError as exc:
            found.append({"bdf": os.path.basename(path), "vendor": "", "class": "", "mrrs": str(exc)})
    return found


if __name__ == "__main__":
    print(json.dumps(probe()))
