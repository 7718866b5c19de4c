"""The knob catalog against the registry, the verification suite and the boot-time oneshot."""
import re

import yaml
from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node.kinds import KINDS
from fakehost import REPO

CATALOG = yaml.safe_load((REPO / "roles/infertune/vars/main.yml").read_text())["infertune_knobs"]
VERIFY = "".join(path.read_text() for path in (REPO / "tests/verify").glob("test_*.py"))


def test_every_catalog_module_is_registered():
    for entry in CATALOG:
        assert entry["module"] in KINDS, entry["name"]


def test_every_verification_named_by_the_catalog_exists():
    # tests/verify/test_kinds.py gives each kind that verifies itself its test_<kind>.
    defined = set(re.findall(r"^def test_(\w+)\(", VERIFY, re.M)) | {k.name for k in KINDS.values() if k.judge}
    for entry in CATALOG:
        assert set(entry.get("verify", ())) <= defined, entry["name"]


def test_acs_is_re_applied_at_boot_and_can_be_switched_off():
    entry = next(e for e in CATALOG if e["name"] == "pcie_acs")
    assert (entry["role"], entry["stage"], entry["oneshot"]) == ("pcie", "runtime", True)
    assert "pcie_acs_clear_redirect" in entry["enabled"] and "pcie_acs_force" in entry["args"]["force"]
    # The oneshot replays its entries in catalog order: ACS after MaxReadReq, both after the CPU knobs.
    oneshot = [e["name"] for e in CATALOG if e.get("oneshot")]
    assert oneshot[-2:] == ["pcie_mrrs", "pcie_acs"]


def test_the_fabric_reaches_the_command_line_knob():
    entry = next(e for e in CATALOG if e["name"] == "kernel_cmdline")
    assert set(entry["args"]["fabric"]) == {"iommu", "link_pm_off"}
    assert "pcie_iommu_mode" in entry["args"]["fabric"]["iommu"]
