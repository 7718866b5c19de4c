import pytest
from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node.gate import TuningError
from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node.gpu_query import sysfs_bdf
from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node.pcie_fabric import (
    aer_counters, bar1_bytes, check, cmdline_params, gate_memory, p2p_matrix)
from fakehost import (BARE_GPU, H200_RESOURCE, SWITCH_DOWN, SWITCH_GPUS, SWITCH_ROOT, SWITCH_UP, fabric_tree,
                      nested_device, pcie_config, write)

CLASSES = ["0x0300", "0x0302"]
LINKS = ["width", "speed"]
BUS_IDS = {0: "00000000:13:00.0", 1: "00000000:14:00.0", 2: "00000000:21:00.0"}


def smi(memory_mib=97887, p2p="OK"):
    """A runner answering the nvidia-smi calls of the gates for the three GPUs of fabric_tree."""
    def runner(argv):
        if argv[1].startswith("--query-gpu"):
            return 0, "".join("%d, %s, %d\n" % (i, b, memory_mib) for i, b in BUS_IDS.items()), ""
        rows = [" \tGPU0\tGPU1\tGPU2\t"] + [" GPU%d\t" % i + "".join(
            ("X" if i == j else (p2p if 2 in (i, j) else "OK")) + "\t" for j in range(3)) for i in range(3)]
        return 0, "\n".join(rows) + "\n\nLegend:\n\n  X    = Self\n  OK   = Status Ok\n", ""
    return runner


def test_healthy_fabric_passes_every_gate(tmp_path):
    result = check(fabric_tree(str(tmp_path)), "0x10de", CLASSES, ["width", "speed", "bar1", "p2p"], runner=smi())
    assert result["failures"] == [] and result["gpus"] == 3
    assert result["bar1_mib"] == {g: 131072 for g in SWITCH_GPUS + (BARE_GPU,)}
    # Root port -> upstream port and downstream port -> GPU; the switch's internal bus is no link.
    assert [(link["upper"], link["device"]) for link in result["links"][:2]] == [
        (SWITCH_ROOT, SWITCH_UP), (SWITCH_DOWN[0], SWITCH_GPUS[0])]
    assert result["p2p"]["read"]["0-2"] == "OK"


def test_root_port_configured_x4_is_named_with_the_bios_fix(tmp_path):
    root = fabric_tree(str(tmp_path), root_width=4, up_trained=4)
    failures = check(root, "0x10de", CLASSES, LINKS)["failures"]
    assert len(failures) == 1
    assert failures[0].startswith("width: link %s -> %s trained x4, %s supports x16 but %s is configured for x4"
                                  % (SWITCH_ROOT, SWITCH_UP, SWITCH_UP, SWITCH_ROOT))
    assert "BIOS" in failures[0]


def test_gpu_trained_narrow_names_its_slot(tmp_path):
    failures = check(fabric_tree(str(tmp_path), gpu_trained=8), "0x10de", CLASSES, LINKS)["failures"]
    assert failures == ["width: link %s -> %s trained x8, %s supports x16 and so does %s: reseat the card, riser "
                        "or cable of that slot and check the AER counters"
                        % (SWITCH_DOWN[1], SWITCH_GPUS[1], SWITCH_GPUS[1], SWITCH_DOWN[1])]


def test_idle_gpu_at_a_low_current_speed_passes(tmp_path):
    result = check(fabric_tree(str(tmp_path), gpu_gen=1), "0x10de", CLASSES, LINKS)
    assert result["failures"] == [] and result["links"][1]["gen"] == 1 and result["links"][1]["gen_reach"] == 5


def test_speed_capped_by_target_link_speed_is_named(tmp_path):
    failures = check(fabric_tree(str(tmp_path), root_target=3), "0x10de", CLASSES, LINKS)["failures"]
    assert failures == ["speed: link %s -> %s can reach at most Gen3 (8 GT/s) though both ends support "
                             "Gen5 (32 GT/s): the Link Control 2 target speed of %s is capped (BIOS PCIe link "
                             "speed setting)" % (SWITCH_ROOT, SWITCH_UP, SWITCH_ROOT)]


def test_small_bar1_fails_naming_each_gpu(tmp_path):
    failures = check(fabric_tree(str(tmp_path), bar1=256 << 20), "0x10de", CLASSES, ["bar1"], runner=smi())["failures"]
    assert failures[0] == ("bar1: %s BAR1 is 256 MiB, smaller than its 97887 MiB of memory: enable Resizable BAR "
                           "and Above 4G Decoding in the BIOS" % SWITCH_GPUS[0])
    assert len(failures) == 3


def test_the_gates_gpu_memory_spares_a_second_query(tmp_path):
    asked = []

    def runner(argv):
        asked.append(argv)
        return 1, "", "not asked for"
    gpus = [{"index": i, "pci_bdf": sysfs_bdf(b), "memory_total_mib": 97887} for i, b in BUS_IDS.items()]
    result = check(fabric_tree(str(tmp_path), bar1=256 << 20), "0x10de", CLASSES, ["bar1"], runner=runner,
                   memory=gate_memory(gpus))
    assert asked == [] and len(result["failures"]) == 3 and "97887 MiB of memory" in result["failures"][0]


def test_gate_memory_gives_nothing_when_a_gpu_lacks_a_value():
    assert gate_memory([]) is None
    assert gate_memory([{"index": 0, "pci_bdf": "0000:13:00.0", "memory_total_mib": None}]) is None
    assert gate_memory([{"index": 0, "pci_bdf": "0000:13:00.0", "memory_total_mib": 8}]) == {"0000:13:00.0": (0, 8)}


def test_bar1_is_the_second_region_whatever_register_it_starts_at(tmp_path):
    root = fabric_tree(str(tmp_path))
    write(root, "/sys/bus/pci/devices/%s/resource" % SWITCH_GPUS[0], H200_RESOURCE)
    assert bar1_bytes(root, SWITCH_GPUS[0]) >> 20 == 262144
    assert bar1_bytes(root, SWITCH_GPUS[1]) == 128 << 30  # 32-bit BAR0: BAR1 at register 1
    write(root, "/sys/bus/pci/devices/%s/resource" % SWITCH_GPUS[1], H200_RESOURCE.split("\n", 1)[0] + "\n")
    assert bar1_bytes(root, SWITCH_GPUS[1]) == 0


def test_p2p_not_ok_names_the_gpu_pairs(tmp_path):
    failures = check(fabric_tree(str(tmp_path)), "0x10de", CLASSES, ["p2p"], runner=smi(p2p="NS"))["failures"]
    assert failures[0].startswith("p2p: read NS (not supported) between GPU0 (%s)->GPU2 (%s), GPU1 (%s)->GPU2"
                                  % (SWITCH_GPUS[0], BARE_GPU, SWITCH_GPUS[1]))
    assert failures[1].startswith("p2p: write NS")


def test_nvidia_smi_failure_is_reported(tmp_path):
    with pytest.raises(TuningError, match="couldn't communicate"):
        check(fabric_tree(str(tmp_path)), "0x10de", CLASSES, ["bar1"],
              runner=lambda argv: (9, "NVIDIA-SMI has failed because it couldn't communicate with the driver", ""))


def test_unknown_gate_is_refused(tmp_path):
    with pytest.raises(TuningError, match="unknown bandwidth"):
        check(str(tmp_path), "0x10de", CLASSES, ["bandwidth"])


def test_aer_counters_are_read_not_judged(tmp_path):
    root = fabric_tree(str(tmp_path))
    write(root, "/sys/bus/pci/devices/%s/aer_dev_correctable" % SWITCH_GPUS[0], "RxErr 3\nBadTLP 0\nTOTAL_ERR_COR 3\n")
    write(root, "/sys/bus/pci/devices/%s/aer_dev_fatal" % SWITCH_GPUS[0], "Undefined 0\nTOTAL_ERR_FATAL 0\n")
    assert aer_counters(root, SWITCH_GPUS[0]) == {"correctable": 3, "fatal": 0}
    result = check(root, "0x10de", CLASSES, LINKS)
    assert result["failures"] == [] and result["aer"] == {SWITCH_GPUS[0]: {"correctable": 3, "fatal": 0}}
    assert result["warnings"] == ["AER %s: correctable 3" % SWITCH_GPUS[0]]


def h200_like(root):
    """One GPU straight on its root bus, no port above it, as the lent H200's VM shows it."""
    nested_device(root, "pci0000:00", "0000:00:06.0", 0x10DE, 0x2335, 0x030200,
                  pcie_config(0x10DE, 0x2335, 0x030200, 0), H200_RESOURCE)
    return root


def one_gpu_smi(argv):
    if argv[1].startswith("--query-gpu"):
        return 0, "0, 00000000:00:06.0, 143771\n", ""
    return 0, " \tGPU0\t\n GPU0\tX\t\n\nLegend:\n\n  X    = Self\n", ""


def test_gates_with_nothing_to_check_are_not_applicable_not_passed(tmp_path):
    result = check(h200_like(str(tmp_path)), "0x10de", CLASSES, ["width", "speed", "bar1", "p2p"], runner=one_gpu_smi)
    assert result["failures"] == [] and result["links"] == []
    assert result["not_applicable"] == {"width": "no GPU behind a PCIe port", "speed": "no GPU behind a PCIe port",
                                        "p2p": "fewer than two GPUs"}
    assert result["msg"] == ("PCIe fabric of 1 GPU(s): bar1 pass; p2p not applicable (fewer than two GPUs); "
                             "width, speed not applicable (no GPU behind a PCIe port)")
    healthy = check(fabric_tree(str(tmp_path / "b")), "0x10de", CLASSES, LINKS)
    assert healthy["msg"] == "PCIe fabric of 3 GPU(s): width, speed pass" and healthy["not_applicable"] == {}


def test_p2p_matrix_parses_the_real_layout():
    text = " \tGPU0\tGPU1\t\n GPU0\tX\tCNS\t\n GPU1\tOK\tX\t\n\nLegend:\n\n  X    = Self\n"
    assert p2p_matrix(text) == {(0, 1): "CNS", (1, 0): "OK"}


@pytest.mark.parametrize("vendor, mode, params, remove", [
    ("AuthenticAMD", "passthrough", ["iommu=pt"], ["iommu.passthrough", "amd_iommu"]),
    ("GenuineIntel", "passthrough", ["intel_iommu=on", "iommu=pt"], ["iommu.passthrough"]),
    ("AuthenticAMD", "off", ["amd_iommu=off", "iommu=off"], ["iommu.passthrough"]),
    ("GenuineIntel", "off", ["intel_iommu=off", "iommu=off"], ["iommu.passthrough"]),
    ("AuthenticAMD", "leave", [], []),
])
def test_command_line_for_the_fabric(vendor, mode, params, remove):
    assert cmdline_params(vendor, mode) == (["pcie_aspm=off", "pcie_port_pm=off"] + params, remove)


def test_link_power_management_can_stay_as_it_is():
    assert cmdline_params("GenuineIntel", "passthrough", link_pm_off=False) == (
        ["intel_iommu=on", "iommu=pt"], ["iommu.passthrough"])
    assert cmdline_params("AuthenticAMD", "leave", link_pm_off=False) == ([], [])


def test_unknown_iommu_mode_is_refused():
    with pytest.raises(TuningError, match="'pt' is not one of passthrough, off, leave"):
        cmdline_params("AuthenticAMD", "pt")
