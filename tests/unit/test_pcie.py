import os

import pytest
from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node.gate import Gate, TuningError
from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node.pcie import apply_mrrs, setpci_prefix
from fakehost import AUDIO, BRIDGE, GPU, config_space, pci_device, pci_tree, snapshot, write

CLASSES = ["0x0300", "0x0302"]


def config(root, bdf):
    with open("%s/sys/bus/pci/devices/%s/config" % (root, bdf), "rb") as handle:
        return handle.read()


def test_masked_write_changes_only_mrrs_bits(pci_root):
    gpu_before, others = config(pci_root, GPU), {b: config(pci_root, b) for b in (BRIDGE, AUDIO)}
    result = apply_mrrs(pci_root, 4096, "0x10de", CLASSES, Gate())
    assert result == {"changed": True, "before": {GPU: 512}, "after": {GPU: 4096}, "devices": 1,
                      "msg": "MaxReadReq 4096 bytes on 1 device(s)"}
    gpu_after = config(pci_root, GPU)
    assert int.from_bytes(gpu_after[0x68:0x6A], "little") == 0x593F  # FLR, payload, error bits kept
    assert [i for i in range(256) if gpu_before[i] != gpu_after[i]] == [0x69]
    assert {b: config(pci_root, b) for b in (BRIDGE, AUDIO)} == others


def test_second_apply_is_idempotent(pci_root):
    apply_mrrs(pci_root, 4096, "0x10de", CLASSES, Gate())
    gate = Gate()
    result = apply_mrrs(pci_root, 4096, "0x10de", CLASSES, gate)
    assert not result["changed"] and gate.actions == []


def test_check_mode_runs_no_setpci(pci_root, check_gate):
    before = snapshot(pci_root)
    result = apply_mrrs(pci_root, 4096, "0x10de", CLASSES, check_gate)
    assert result["changed"] and result["after"] == {GPU: 4096}
    assert snapshot(pci_root) == before


def test_refused_write_under_lockdown_says_so(pci_root):
    write(pci_root, "/sys/kernel/security/lockdown", "none [integrity] confidentiality\n")
    # setpci -D (demo mode) writes nothing, as when sysfs refuses the write and setpci only warns.
    refusing = setpci_prefix(pci_root) + ["-D"]
    with pytest.raises(TuningError, match="kernel lockdown is 'integrity'") as err:
        apply_mrrs(pci_root, 4096, "0x10de", CLASSES, Gate(), setpci=refusing)
    assert GPU in str(err.value)


def test_refused_write_without_lockdown_reports_the_read_back(pci_root):
    refusing = setpci_prefix(pci_root) + ["-D"]
    with pytest.raises(TuningError, match="read back 512 bytes after writing 4096"):
        apply_mrrs(pci_root, 4096, "0x10de", CLASSES, Gate(), setpci=refusing)


def test_gpu_fallen_off_the_bus_is_named(tmp_path):
    root = pci_tree(str(tmp_path), gpu_config=b"\xff" * 256)
    with pytest.raises(TuningError, match=GPU + ".*all 0xff"):
        apply_mrrs(root, 4096, "0x10de", CLASSES, Gate())


def test_device_without_pcie_capability_is_named(tmp_path):
    root = pci_tree(str(tmp_path), gpu_config=config_space(0x10DE, 0x2BB5, 0x030000, caps=False))
    with pytest.raises(TuningError, match=GPU + " has no PCI Express capability"):
        apply_mrrs(root, 4096, "0x10de", CLASSES, Gate())


def test_audio_class_selects_only_the_audio_function(pci_root):
    result = apply_mrrs(pci_root, 1024, "0x10de", ["0x0403"], Gate())
    assert result["before"] == {AUDIO: 512} and result["after"] == {AUDIO: 1024}


def test_invalid_value_fails(pci_root):
    with pytest.raises(TuningError, match="value=3000"):
        apply_mrrs(pci_root, 3000, "0x10de", CLASSES, Gate())


def test_production_root_uses_plain_setpci():
    assert setpci_prefix("/") == ["setpci"]


def test_sriov_virtual_functions_are_never_selected(pci_root):
    # A VF of the GPU: same vendor and class, a physfn link to its physical function.
    vf = "0000:41:00.4"
    pci_device(pci_root, vf, 0x10DE, 0x2BB5, 0x030200, config_space(0x10DE, 0x2BB5, 0x030200, 0, 0x2000))
    os.symlink("../" + GPU, os.path.join(pci_root, "sys/bus/pci/devices", vf, "physfn"))
    vf_before = config(pci_root, vf)
    result = apply_mrrs(pci_root, 4096, "0x10de", CLASSES, Gate())
    assert result["before"] == {GPU: 512} and result["devices"] == 1
    assert config(pci_root, vf) == vf_before
