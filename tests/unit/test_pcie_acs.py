import os

import pytest
from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node.gate import Gate, TuningError
from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node.pcie import setpci_prefix
from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node.pcie_acs import apply_acs
from fakehost import (BARE_ROOT, NVME, NVME_ROOT, RP_ACS, SW_ACS, SWITCH_DOWN, SWITCH_GPUS, SWITCH_ROOT, SWITCH_UP,
                      fabric_tree, snapshot, write)

CLASSES = ["0x0300", "0x0302"]
CLEARED = {SWITCH_ROOT: "0x0011", SWITCH_DOWN[0]: "0x0011", SWITCH_DOWN[1]: "0x0011"}


def config(root, bdf):
    with open("%s/sys/bus/pci/devices/%s/config" % (root, bdf), "rb") as handle:
        return handle.read()


@pytest.fixture
def fabric(tmp_path):
    return fabric_tree(str(tmp_path))


def test_clears_only_the_redirect_bits_on_every_port_above_a_gpu(fabric):
    untouched = {b: config(fabric, b) for b in (SWITCH_UP, BARE_ROOT, NVME_ROOT, NVME)}
    before = {b: config(fabric, b) for b in CLEARED}
    result = apply_acs(fabric, "0x10de", CLASSES, False, Gate())
    assert result == {"changed": True, "before": {b: "0x001d" for b in CLEARED}, "after": CLEARED, "ports": 5,
                      "without_acs": [BARE_ROOT],
                      "msg": "ACS redirect off on 3 port(s) above 3 GPU(s); no ACS capability (nothing to clear) on "
                             + BARE_ROOT}
    for bdf, offset in ((SWITCH_ROOT, RP_ACS), (SWITCH_DOWN[0], SW_ACS), (SWITCH_DOWN[1], SW_ACS)):
        after = config(fabric, bdf)
        assert [i for i in range(4096) if before[bdf][i] != after[i]] == [offset + 6]
    # The NVMe drive's root port, the upstream port and the port without ACS stay byte-identical.
    assert {b: config(fabric, b) for b in untouched} == untouched


def test_second_apply_is_idempotent(fabric):
    apply_acs(fabric, "0x10de", CLASSES, False, Gate())
    gate = Gate()
    result = apply_acs(fabric, "0x10de", CLASSES, False, gate)
    assert not result["changed"] and gate.actions == [] and result["after"] == CLEARED


def test_check_mode_writes_nothing(fabric, check_gate):
    before = snapshot(fabric)
    result = apply_acs(fabric, "0x10de", CLASSES, False, check_gate)
    assert result["changed"] and result["after"] == CLEARED
    assert len(check_gate.actions) == 3 and all("ECAP_ACS+6.w=0000:000c" in a for a in check_gate.actions)
    assert snapshot(fabric) == before


def _bind_vfio(root, bdf):
    write(root, "/sys/bus/pci/drivers/vfio-pci/bind", "")
    os.symlink(os.path.join(root, "sys/bus/pci/drivers/vfio-pci"), os.path.join(root, "sys/bus/pci/devices", bdf, "driver"))


def test_refused_when_a_device_below_a_changed_port_is_passed_to_a_vm(fabric):
    audio = SWITCH_GPUS[1][:-1] + "1"
    _bind_vfio(fabric, audio)
    before = snapshot(fabric)
    with pytest.raises(TuningError, match=r"%s \(below %s, %s\) bound to vfio-pci.*isolation between the devices "
                       "behind them.*force" % (audio, SWITCH_DOWN[1], SWITCH_ROOT)) as err:
        apply_acs(fabric, "0x10de", CLASSES, False, Gate())
    assert SWITCH_ROOT in str(err.value) and NVME not in str(err.value) and snapshot(fabric) == before
    assert apply_acs(fabric, "0x10de", CLASSES, True, Gate())["after"] == CLEARED


def test_a_vm_device_below_no_changed_port_does_not_block(fabric):
    # The NVMe drive's root port leads to no GPU and keeps its redirect: its VM stays isolated.
    _bind_vfio(fabric, NVME)
    assert apply_acs(fabric, "0x10de", CLASSES, False, Gate())["after"] == CLEARED


def test_downstream_port_without_acs_is_named_and_the_upstream_port_is_not(tmp_path):
    root = fabric_tree(str(tmp_path), down_acs=(True, False))
    result = apply_acs(root, "0x10de", CLASSES, False, Gate())
    assert result["without_acs"] == [SWITCH_DOWN[1], BARE_ROOT]
    assert result["msg"] == "ACS redirect off on 2 port(s) above 3 GPU(s); no ACS capability (nothing to clear) " \
                            "on %s, %s" % (SWITCH_DOWN[1], BARE_ROOT)


def test_refused_write_under_lockdown_names_the_port(fabric):
    write(fabric, "/sys/kernel/security/lockdown", "none [integrity] confidentiality\n")
    refusing = setpci_prefix(fabric) + ["-D"]
    with pytest.raises(TuningError, match="%s: PCI config write refused: kernel lockdown.*ACS Control" % SWITCH_ROOT):
        apply_acs(fabric, "0x10de", CLASSES, False, Gate(), setpci=refusing)


def test_flat_tree_without_bridges_changes_nothing(pci_root):
    result = apply_acs(pci_root, "0x10de", CLASSES, False, Gate())
    assert result["before"] == {} and not result["changed"]
    # Said as what it is, not as "0 port(s) above 0 GPU(s)".
    assert result["msg"] == "not applicable: no root or switch port above any GPU (the GPUs sit on a root bus)"
    assert apply_acs(pci_root, "0x1234", CLASSES, False, Gate())["msg"].endswith("(no GPU found)")
