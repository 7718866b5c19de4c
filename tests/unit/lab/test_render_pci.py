"""PCI tree checked with the real pciutils against the rendered sysfs files."""
import re

from labhw import pci_tool

GPUS = ["13", "14", "33", "34", "93", "94", "b3", "b4"]


def config(hw, bdf):
    return (hw / "sys/bus/pci/devices" / f"0000:{bdf}" / "config").read_bytes()


def test_lspci_shows_every_gpu_with_firmware_maxreadreq(render_host, seed):
    hw = render_host(seed)
    listing = pci_tool("lspci", hw, "-nn")
    assert len(re.findall(r"3D controller \[0302\]: .*\[10de:2bb5\]", listing)) == 8
    assert len(re.findall(r"Audio device \[0403\]: .*\[10de:22e8\]", listing)) == 8
    assert len(re.findall(r"PCI bridge \[0604\]", listing)) == 4 + 4 + 8 + 1  # root, up, down, NVMe root
    for bus in GPUS:
        out = pci_tool("lspci", hw, "-vvv", "-s", f"{bus}:00.0")
        assert "MaxReadReq 512 bytes" in out and "MaxPayload 256 bytes" in out
        assert "Express (v2) Endpoint" in out


def test_capability_list_puts_pcie_last(render_host, seed):
    cfg = config(render_host(seed), "13:00.0")
    chain, ptr = [], cfg[0x34]
    while ptr:
        chain.append(cfg[ptr])
        ptr = cfg[ptr + 1]
    assert chain == [0x01, 0x05, 0x10]
    assert cfg[0x06] & 0x10


def test_masked_setpci_changes_only_maxreadreq_bits(render_host, seed):
    hw = render_host(seed)
    before = config(hw, "13:00.0")
    assert pci_tool("setpci", hw, "-s", "13:00.0", "CAP_EXP+8.w").strip() == "293f"
    pci_tool("setpci", hw, "-s", "13:00.0", "CAP_EXP+8.w=5000:7000")
    after = config(hw, "13:00.0")
    changed = [i for i in range(len(before)) if before[i] != after[i]]
    assert changed == [0x78 + 9]
    assert pci_tool("setpci", hw, "-s", "13:00.0", "CAP_EXP+8.w").strip() == "593f"
    assert "MaxReadReq 4096 bytes" in pci_tool("lspci", hw, "-vvv", "-s", "13:00.0")
    assert config(hw, "33:00.0") == config(render_host(seed), "33:00.0")


def test_bridges_route_to_their_gpu(render_host, seed):
    tree = pci_tool("lspci", render_host(seed), "-t")
    assert "+-[0000:10]---01.1-[11-14]----00.0-[12-14]--+-00.0-[13]--+-00.0" in tree
    assert "-[0000:00]---01.1-[01]----00.0" in tree  # the NVMe drive behind its own root port


def test_lost_gpu_reads_all_ones(render_host, seed):
    hw = render_host(seed, faults={"gpu-lost": "2"})
    assert config(hw, "33:00.0") == b"\xff" * 4096
    assert config(hw, "13:00.0")[:2] == b"\xde\x10"
    assert "(rev ff)" in pci_tool("lspci", hw, "-s", "33:00.0")


def test_xeon_h100_has_no_audio_function(render_host, xeon):
    listing = pci_tool("lspci", render_host(xeon), "-nn")
    assert len(re.findall(r"\[10de:2330\]", listing)) == 4
    assert "Audio" not in listing
