"""The plan's PCIe fabric gates: the same checks as pcie_fabric, in the plan's one read, as problems."""
from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node import pcie_fabric
from fakehost import SWITCH_GPUS, SWITCH_ROOT, SWITCH_UP, fabric_tree, snapshot, write
from moduleharness import run_module


def on_tree(monkeypatch, root):
    """The module reads /; point its fabric check at a fake tree instead."""
    check = pcie_fabric.check
    monkeypatch.setattr(pcie_fabric, "check", lambda _root, *args, **kwargs: check(root, *args, **kwargs))


def test_a_root_port_at_x4_stops_the_plan_naming_it(monkeypatch, tmp_path, capsys):
    root = fabric_tree(str(tmp_path), root_width=4, up_trained=4)
    write(root, "/sys/bus/pci/devices/%s/aer_dev_correctable" % SWITCH_GPUS[0], "TOTAL_ERR_COR 2\n")
    on_tree(monkeypatch, root)
    before = snapshot(root)
    rc, result = run_module("infertune_plan", {"knobs": [],
                                               "fabric": {"gates": ["width", "speed"]}}, capsys)
    assert rc == 0 and result["changed"] is False and snapshot(root) == before
    fabric = result["plan"]["fabric"]
    assert len(fabric["failures"]) == 1
    assert fabric["failures"][0].startswith("width: link %s -> %s trained x4" % (SWITCH_ROOT, SWITCH_UP))
    assert fabric["aer"] == {SWITCH_GPUS[0]: {"correctable": 2}}
    assert fabric["warnings"] == ["AER %s: correctable 2" % SWITCH_GPUS[0]]


def test_a_fabric_that_cannot_be_read_is_a_problem_not_a_crash(monkeypatch, tmp_path, capsys):
    on_tree(monkeypatch, fabric_tree(str(tmp_path)))
    rc, result = run_module("infertune_plan", {"knobs": [],
                                               "fabric": {"gates": ["width", "lanes"]}}, capsys)
    assert rc == 0 and result["plan"]["fabric"]["failures"] == ["gates: unknown lanes; known: width, speed, bar1, p2p"]


def test_no_fabric_option_no_fabric_read(capsys):
    rc, result = run_module("infertune_plan", {"knobs": []}, capsys)
    assert rc == 0 and "fabric" not in result["plan"]
