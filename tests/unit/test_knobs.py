"""The knob registry: one result contract, the plan's prediction and what a host needs."""
import pytest

from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node import knobs
from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node.gate import Gate, TuningError
from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node.systemd import apply_unit
from fakehost import BARE_ROOT, SWITCH_DOWN, SWITCH_ROOT, SWITCH_UP, cpu_tree, fabric_tree, pci_tree, read, snapshot, write

SYSCTL = {"settings": [{"name": "kernel.numa_balancing", "value": 0}], "path": "/etc/sysctl.d/60-infertune-numa.conf"}
CATALOG = [
    {"name": "sysctl", "module": "sysctl", "args": SYSCTL, "stage": "runtime", "drain": False},
    {"name": "cpufreq", "module": "cpufreq_policy", "args": {"governor": "performance", "epp": "performance"},
     "label": "governor / EPP", "stage": "runtime", "drain": False},
    {"name": "nvidia_options", "module": "modprobe_options", "label": "NVIDIA options",
     "args": {"options": {"nvidia_uvm": {"uvm_disable_hmm": 1}}, "path": "/etc/modprobe.d/infertune-nvidia.conf"}},
]


@pytest.fixture
def host(amd128):
    pci_tree(amd128)
    write(amd128, "/proc/sys/kernel/numa_balancing", "1\n")
    write(amd128, "/sys/module/nvidia_uvm/parameters/uvm_disable_hmm", "N\n")
    return amd128


def test_every_knob_returns_the_contract(host):
    contract, diff, actions = knobs.run("sysctl", SYSCTL, Gate(), host)
    assert set(contract) >= {"changed", "before", "after", "reboot_required", "runtime_pending", "msg"}
    assert (contract["before"], contract["after"], contract["runtime_pending"]) == (
        {"kernel.numa_balancing": "1"}, {"kernel.numa_balancing": "0"}, True)
    assert read(host, "/etc/sysctl.d/60-infertune-numa.conf").endswith("kernel.numa_balancing = 0")
    assert diff["after"].endswith("kernel.numa_balancing = 0\n") and actions
    again, _, _ = knobs.run("sysctl", SYSCTL, Gate(), host)
    assert not again["changed"] and not again["runtime_pending"]


def test_bad_catalog_entries_fail_with_a_message(host):
    with pytest.raises(TuningError, match="unknown knob module 'hugepages'"):
        knobs.run("hugepages", {}, Gate(), host)
    with pytest.raises(TuningError, match="arguments of sysctl must be a mapping"):
        knobs.run("sysctl", ["kernel.numa_balancing"], Gate(), host)
    with pytest.raises(TuningError, match="sysctl: missing argument path"):
        knobs.run("sysctl", {"settings": SYSCTL["settings"]}, Gate(), host)


def test_predict_changes_nothing_and_says_what_the_host_needs(host):
    before = snapshot(host)
    results = knobs.predict(CATALOG, host)
    assert snapshot(host) == before
    assert {n for n, r in results.items() if r["changed"]} == {"sysctl", "cpufreq", "nvidia_options"}
    needs = knobs.summarize(CATALOG, results, "when_needed")
    # A loaded module running other values waits for a reboot, which drains the host; the runtime
    # knobs apply under a serving host.
    assert needs == {"pending": ["sysctl", "cpufreq", "nvidia_options"], "failed": {},
                     "reboot": True, "reboot_reasons": ["NVIDIA options"], "drain": True, "drain_reasons": ["reboot"],
                     "live": ["sysctl", "cpufreq"]}
    never = knobs.summarize(CATALOG, results, "never")
    assert not never["reboot"] and not never["drain"] and never["live"] == ["sysctl", "cpufreq"]


@pytest.mark.parametrize("drain, drains", [(None, True), (True, True), ("true", True), (False, False), ("false", False)])
def test_a_runtime_change_drains_unless_the_catalog_says_it_applies_live(host, drain, drains):
    """No drain key: the conservative answer. A templated catalog gives strings."""
    entry = dict(CATALOG[1], **({} if drain is None else {"drain": drain}))
    if drain is None:
        del entry["drain"]
    needs = knobs.summarize([entry], knobs.predict([entry], host), "when_needed")
    assert needs["drain"] is drains and needs["drain_reasons"] == (["cpufreq"] if drains else [])
    assert needs["live"] == ([] if drains else ["cpufreq"])


def test_a_knob_that_cannot_apply_fails_in_the_prediction_alone(host):
    catalog = [dict(CATALOG[1], args={"governor": "userspace"}), CATALOG[0]]
    results = knobs.predict(catalog, host)
    assert results["cpufreq"]["failed"] and "governor='userspace' is not available" in results["cpufreq"]["msg"]
    assert results["sysctl"]["changed"]
    assert knobs.summarize(catalog, results, "when_needed")["failed"] == {"cpufreq": results["cpufreq"]["msg"]}


def test_only_a_runtime_change_or_a_restart_drains(host):
    boot_only = [CATALOG[2]]
    write(host, "/sys/module/nvidia_uvm/parameters/uvm_disable_hmm", "Y\n")
    needs = knobs.summarize(boot_only, knobs.predict(boot_only, host), "when_needed")
    assert needs["pending"] == ["nvidia_options"] and not needs["drain"] and not needs["reboot"]
    unit = [{"name": "sglang", "module": "deb_package", "args": {"name": "sglang"}, "drain": True}]
    write(host, "/var/lib/dpkg/status", "Package: other\nStatus: install ok installed\nVersion: 1\n")
    assert knobs.summarize(unit, knobs.predict(unit, host), "when_needed")["drain"]


def test_amd_pstate_goes_on_the_command_line_of_amd_hosts_only(host):
    write(host, "/etc/kernel/cmdline", "root=ZFS=rpool quiet\n")
    args = {"params": ["processor.max_cstate=1"], "dropin": "/etc/default/grub.d/60-infertune.cfg", "update": False,
            "vendor_params": {"AuthenticAMD": ["amd_pstate=active"], "GenuineIntel": ["intel_pstate=active"]}}
    contract, _, _ = knobs.run("kernel_cmdline", args, Gate(), host)
    assert contract["after"] == "root=ZFS=rpool quiet processor.max_cstate=1 amd_pstate=active"
    # Not running yet: the proof after a reboot reads the same flag.
    assert contract["reboot_required"]


@pytest.mark.parametrize("vendor, iommu, link_pm_off, after", [
    ("AuthenticAMD", "passthrough", True, "root=ZFS=rpool quiet processor.max_cstate=1 pcie_aspm=off pcie_port_pm=off"
                                          " iommu=pt"),
    ("GenuineIntel", "passthrough", False, "root=ZFS=rpool quiet processor.max_cstate=1 intel_iommu=on iommu=pt"),
    ("AuthenticAMD", "off", False, "root=ZFS=rpool amd_iommu=off quiet processor.max_cstate=1 iommu=off"),
    ("GenuineIntel", "leave", True, "root=ZFS=rpool amd_iommu=off quiet iommu.passthrough=0 processor.max_cstate=1"
                                    " pcie_aspm=off pcie_port_pm=off"),
])
def test_the_fabric_parameters_follow_the_cpu_vendor(tmp_path, vendor, iommu, link_pm_off, after):
    root = cpu_tree(str(tmp_path), 2, vendor=vendor)
    write(root, "/etc/kernel/cmdline", "root=ZFS=rpool amd_iommu=off quiet iommu.passthrough=0\n")
    args = {"params": ["processor.max_cstate=1"], "dropin": "/etc/default/grub.d/60-infertune.cfg", "update": False,
            "remove": ["amd_iommu"] if vendor == "GenuineIntel" and iommu != "leave" else [],
            "fabric": {"iommu": iommu, "link_pm_off": link_pm_off}}
    contract, _, _ = knobs.run("kernel_cmdline", args, Gate(), root)
    # The translated-mode parameters give way; an Intel host drops the AMD one only when asked to.
    assert contract["after"] == after
    assert knobs.run("kernel_cmdline", args, Gate(), root)[0]["changed"] is False


def test_a_bad_iommu_mode_fails_the_knob(host):
    args = {"params": [], "dropin": "/etc/default/grub.d/60-infertune.cfg", "update": False,
            "fabric": {"iommu": "pt"}}
    with pytest.raises(TuningError, match="iommu mode 'pt' is not one of passthrough, off, leave"):
        knobs.run("kernel_cmdline", args, Gate(), host)


def test_acs_redirect_is_a_runtime_knob(tmp_path):
    root = fabric_tree(str(tmp_path))
    args = {"vendor": "0x10de", "classes": ["0x0300", "0x0302"], "force": False}
    contract, _, actions = knobs.run("pcie_acs", args, Gate(), root, "runtime")
    assert contract["changed"] and contract["runtime_pending"] and len(actions) == 3
    assert (contract["before"][SWITCH_ROOT], contract["after"][SWITCH_ROOT]) == ("0x001d", "0x0011")
    again, _, actions = knobs.run("pcie_acs", args, Gate(), root, "runtime")
    assert not again["changed"] and not again["runtime_pending"] and actions == []
    entry = {"name": "pcie_acs", "module": "pcie_acs", "stage": "runtime", "drain": True}
    assert knobs.summarize([entry], {"pcie_acs": contract}, "when_needed")["drain_reasons"] == ["pcie_acs"]


def test_acs_knob_result_names_the_ports_without_acs(tmp_path):
    """The knob's contract (site.yml's record) names them; the switch's upstream port is no such port."""
    root = fabric_tree(str(tmp_path), down_acs=(True, False))
    args = {"vendor": "0x10de", "classes": ["0x0300", "0x0302"], "force": False}
    msg = knobs.run("pcie_acs", args, Gate(), root)[0]["msg"]
    assert msg.endswith("no ACS capability (nothing to clear) on %s, %s" % (SWITCH_DOWN[1], BARE_ROOT))
    assert SWITCH_UP not in msg


class Systemctl:
    """Answers is-enabled/is-active like systemctl and records every other call."""

    def __init__(self, enabled="enabled", active="active"):
        self.state, self.calls = {"is-enabled": enabled, "is-active": active}, []

    def __call__(self, argv):
        if argv[1] in self.state:
            return 0, self.state[argv[1]] + "\n", ""
        self.calls.append(argv[1:])
        return 0, "", ""


def test_an_edited_unit_file_is_reloaded_and_re_run(host):
    files = [{"path": "/etc/infertune/runtime.json", "content": "[]"}]
    systemctl = Systemctl()
    apply_unit("/", "infertune-tune.service", [dict(files[0], path=host + files[0]["path"])], True, True,
               Gate(runner=systemctl))
    assert systemctl.calls == [["daemon-reload"], ["restart", "infertune-tune.service"]]
    systemctl.calls.clear()
    result = apply_unit("/", "infertune-tune.service", [dict(files[0], path=host + files[0]["path"])], True, True,
                        Gate(runner=systemctl))
    assert not result["changed"] and systemctl.calls == []


def test_a_unit_asked_off_is_disabled_and_left_stopped(host):
    systemctl = Systemctl(enabled="enabled", active="inactive")
    result = apply_unit("/", "sglang.service", [], False, False, Gate(check_mode=True, runner=systemctl))
    assert result["changed"] and result["after"] == {"enabled": "disabled", "active": "inactive"}
    assert systemctl.calls == []  # check mode: asked, nothing done


@pytest.mark.parametrize("active", ["active", "activating"])
def test_a_unit_asked_stopped_is_stopped_running_or_waiting_to_restart(host, active):
    """sglang_service_started: false on a running unit (or one in Restart=on-failure's wait)."""
    systemctl = Systemctl(enabled="disabled", active=active)
    planned = apply_unit("/", "sglang.service", [], False, False, Gate(check_mode=True, runner=systemctl))
    assert planned["changed"] and systemctl.calls == []  # the plan sees it pending: the host is drained first
    result = apply_unit("/", "sglang.service", [], False, False, Gate(runner=systemctl))
    assert systemctl.calls == [["stop", "sglang.service"]]
    assert result["after"] == {"enabled": "disabled", "active": "inactive"}


def test_runtime_pending_follows_the_catalog_stage(tmp_path):
    """Which knobs are runtime is the catalog's stage, not a list in the registry: the same
    change is pending at runtime (a drain) only for an entry of stage runtime."""
    args = {"vendor": "0x10de", "classes": ["0x0300", "0x0302"], "force": False}
    entries = [{"name": stage, "module": "pcie_acs", "args": args, "stage": stage} for stage in ("runtime", "boot")]
    results = knobs.predict(entries, fabric_tree(str(tmp_path)))
    assert results["runtime"]["changed"] and results["runtime"]["runtime_pending"]
    assert results["boot"]["changed"] and not results["boot"]["runtime_pending"]
    assert knobs.summarize(entries[1:], {"boot": results["boot"]}, "never")["drain"] is False
