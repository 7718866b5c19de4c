"""Revert of the PCIe kinds: MaxReadReq per device and the ACS redirect bits per port, back to what
original() recorded through the same masked setpci writes as the apply's (real setpci on a fake
config space); without a record, left and said."""
import pytest

from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node import pcie, pcie_acs
from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node.gate import Gate, TuningError
from fakehost import AUDIO, BRIDGE, GPU, SWITCH_DOWN, SWITCH_ROOT, SWITCH_UP, fabric_tree, snapshot

CLASSES = ["0x0300", "0x0302"]
ARGS = {"vendor": "0x10de", "classes": CLASSES}


def config(root, bdf):
    with open("%s/sys/bus/pci/devices/%s/config" % (root, bdf), "rb") as handle:
        return handle.read()


@pytest.fixture
def fabric(tmp_path):
    return fabric_tree(str(tmp_path))


def test_mrrs_goes_back_to_the_recorded_value_with_the_same_masked_write(pci_root):
    before = {b: config(pci_root, b) for b in (GPU, BRIDGE, AUDIO)}
    saved = pcie.original(pci_root, ARGS)
    assert saved == {GPU: 512}
    pcie.apply_mrrs(pci_root, 4096, "0x10de", CLASSES, Gate())
    gate = Gate()
    result = pcie.KIND.revert(pci_root, dict(ARGS, value=4096), saved, gate)
    assert result == {"changed": True, "before": {GPU: 4096}, "after": {GPU: 512}, "devices": 1,
                      "runtime_pending": True, "msg": "MaxReadReq as before infertune on 1 device(s)"}
    assert gate.actions[0].endswith("-s %s CAP_EXP+8.w=2000:7000" % GPU)
    # Byte for byte as before the apply: Device Control's other bits never moved.
    assert {b: config(pci_root, b) for b in (GPU, BRIDGE, AUDIO)} == before
    assert not pcie.KIND.revert(pci_root, dict(ARGS, value=4096), saved, Gate())["changed"]


def test_mrrs_check_mode_runs_no_setpci(pci_root):
    saved = pcie.original(pci_root, ARGS)
    pcie.apply_mrrs(pci_root, 4096, "0x10de", CLASSES, Gate())
    before = snapshot(pci_root)
    result = pcie.revert_mrrs(pci_root, "0x10de", CLASSES, saved, Gate(check_mode=True))
    assert result["changed"] and result["after"] == {GPU: 512} and snapshot(pci_root) == before


def test_mrrs_without_a_record_is_left_and_a_device_gone_is_said(pci_root):
    pcie.apply_mrrs(pci_root, 4096, "0x10de", CLASSES, Gate())
    result = pcie.revert_mrrs(pci_root, "0x10de", CLASSES, None, Gate())
    assert not result["changed"] and result["after"] == {GPU: 4096} and "no record" in result["msg"]
    result = pcie.revert_mrrs(pci_root, "0x10de", CLASSES, {GPU: 4096, "0000:c1:00.0": 512}, Gate())
    assert not result["changed"] and "0000:c1:00.0 recorded but gone" in result["msg"]


def test_mrrs_a_refused_write_fails_naming_the_device(pci_root):
    saved = pcie.original(pci_root, ARGS)
    pcie.apply_mrrs(pci_root, 4096, "0x10de", CLASSES, Gate())
    with pytest.raises(TuningError, match="%s: writing MaxReadReq failed: read back 4096 bytes after writing 512" % GPU):
        pcie.revert_mrrs(pci_root, "0x10de", CLASSES, saved, Gate(), setpci=pcie.setpci_prefix(pci_root) + ["-D"])


def test_acs_redirect_goes_back_on_every_recorded_port_and_nothing_else(fabric):
    before = {b: config(fabric, b) for b in (SWITCH_ROOT, SWITCH_UP) + SWITCH_DOWN}
    saved = pcie_acs.original(fabric, ARGS)
    assert saved == {SWITCH_ROOT: 0x1D, SWITCH_DOWN[0]: 0x1D, SWITCH_DOWN[1]: 0x1D}
    pcie_acs.apply_acs(fabric, "0x10de", CLASSES, False, Gate())
    gate = Gate()
    result = pcie_acs.KIND.revert(fabric, dict(ARGS, force=False), saved, gate)
    assert result["changed"] and result["after"] == {b: "0x001d" for b in saved}
    assert all(action.endswith("ECAP_ACS+6.w=000c:000c") for action in gate.actions) and len(gate.actions) == 3
    assert {b: config(fabric, b) for b in before} == before
    assert not pcie_acs.KIND.revert(fabric, dict(ARGS, force=False), saved, Gate())["changed"]


def test_acs_only_the_redirect_bits_go_back(fabric):
    """Recorded with redirect off and other bits than now: the redirect bits alone follow the record."""
    gate = Gate()
    result = pcie_acs.revert_acs(fabric, "0x10de", CLASSES, {SWITCH_ROOT: 0x0001}, gate)
    assert result["changed"] and result["after"] == {SWITCH_ROOT: "0x0011"}
    assert gate.actions == [" ".join(pcie.setpci_prefix(fabric) + ["-s", SWITCH_ROOT, "ECAP_ACS+6.w=0000:000c"])]
    assert not pcie_acs.revert_acs(fabric, "0x10de", CLASSES, {SWITCH_ROOT: 0xFFF3}, Gate())["changed"]


def test_acs_check_mode_and_no_record(fabric):
    saved = pcie_acs.original(fabric, ARGS)
    pcie_acs.apply_acs(fabric, "0x10de", CLASSES, False, Gate())
    before = snapshot(fabric)
    assert pcie_acs.revert_acs(fabric, "0x10de", CLASSES, saved, Gate(check_mode=True))["changed"]
    assert snapshot(fabric) == before
    result = pcie_acs.revert_acs(fabric, "0x10de", CLASSES, None, Gate())
    assert not result["changed"] and result["after"][SWITCH_ROOT] == "0x0011" and "no record" in result["msg"]


def test_acs_a_refused_write_fails_naming_the_port(fabric):
    saved = pcie_acs.original(fabric, ARGS)
    pcie_acs.apply_acs(fabric, "0x10de", CLASSES, False, Gate())
    with pytest.raises(TuningError, match="read back 0x0011 after restoring the redirect bits of 0x001d"):
        pcie_acs.revert_acs(fabric, "0x10de", CLASSES, saved, Gate(), setpci=pcie.setpci_prefix(fabric) + ["-D"])
