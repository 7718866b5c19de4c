"""The sysfs kind: any attribute under /sys by a glob (a PCI device filter optional), set live, read
back, predicted under check mode, verified by its own reading; its variable's rule."""
import glob

import pytest
from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node import knobs
from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node.gate import Gate, TuningError
from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node.sysfs_attributes import (
    KIND, apply_settings, judge, observe, sysfs_settings)
from fakehost import AUDIO, GPU, pci_tree, read, snapshot, write
from verifycheck import load, outcome

THP = "/sys/kernel/mm/transparent_hugepage/enabled"
CONTROL = "/sys/bus/pci/devices/*/power/control"
GPUS_ONLY = {"vendor": "0x10de", "classes": ["0x0300", "0x0302"]}


@pytest.fixture
def root(tmp_path):
    root = pci_tree(str(tmp_path))
    write(root, THP, "always [madvise] never\n")
    for bdf in (GPU, AUDIO):
        write(root, "/sys/bus/pci/devices/%s/power/control" % bdf, "auto\n")
    return root


def test_a_choice_attribute_is_set_by_its_word_then_idempotent(root):
    settings = [{"path": THP, "value": "never"}]
    result = apply_settings(root, settings, Gate())
    assert result["changed"] and result["before"] == {THP: "madvise"} and result["after"] == {THP: "never"}
    assert read(root, THP) == "never"
    # As the kernel shows it after the write: the list, the selection in brackets.
    write(root, THP, "always madvise [never]\n")
    again = apply_settings(root, settings, Gate())
    assert not again["changed"] and again["after"] == {THP: "never"}


def test_a_device_filter_keeps_the_gpus_and_leaves_their_audio_function(root):
    result = apply_settings(root, [{"path": CONTROL, "value": "on", "devices": GPUS_ONLY}], Gate())
    assert list(result["after"]) == ["/sys/bus/pci/devices/%s/power/control" % GPU]
    assert read(root, "/sys/bus/pci/devices/%s/power/control" % GPU) == "on"
    assert read(root, "/sys/bus/pci/devices/%s/power/control" % AUDIO) == "auto"


def test_check_mode_predicts_and_writes_nothing(root):
    before = snapshot(root)
    result = apply_settings(root, [{"path": THP, "value": "never"}], Gate(check_mode=True))
    assert result["changed"] and result["after"] == {THP: "never"} and snapshot(root) == before


def test_a_glob_that_matches_nothing_fails_before_any_write_unless_not_required(root):
    before = snapshot(root)
    settings = [{"path": THP, "value": "never"}, {"path": "/sys/kernel/mm/ksm/run", "value": "0"}]
    with pytest.raises(TuningError, match="/sys/kernel/mm/ksm/run matches no attribute on this host"):
        apply_settings(root, settings, Gate())
    assert snapshot(root) == before
    settings[1]["required"] = "false"
    assert apply_settings(root, settings, Gate())["after"] == {THP: "never"}


@pytest.mark.parametrize("setting, said", [
    ({"path": "/etc/shadow", "value": "x"}, "is not a glob under /sys"),
    ({"path": "/sys/../etc/shadow", "value": "x"}, "is not a glob under /sys"),
    ({"path": THP, "value": "never\nalways"}, "is not words of"),
    ({"path": THP}, "a mapping with path and value"),
])
def test_a_setting_outside_sys_or_with_another_value_is_refused(root, setting, said):
    with pytest.raises(TuningError, match=said):
        apply_settings(root, [setting], Gate())


def test_a_value_the_kernel_does_not_take_fails(root, monkeypatch):
    gate = Gate()
    monkeypatch.setattr(gate, "write_sysfs", lambda path, value: None)  # the kernel keeps its value
    with pytest.raises(TuningError, match="reads madvise after writing never"):
        apply_settings(root, [{"path": THP, "value": "never"}], gate)


def test_a_setting_drains_unless_it_says_not(root):
    entry = {"name": "sysfs", "module": "sysfs", "stage": "runtime", "drain": True,
             "args": {"settings": [{"path": THP, "value": "never", "drain": False}]}}
    needs = knobs.summarize([entry], knobs.predict([entry], root), "never")
    assert needs["drain"] is False and needs["live"] == ["sysfs"]
    entry["args"]["settings"][0]["drain"] = True
    assert knobs.summarize([entry], knobs.predict([entry], root), "never")["drain_reasons"] == ["sysfs"]


def observed(root, args):
    """What observe's command prints on the host whose tree is root (its globs read there)."""
    def lines(patterns):
        out = []
        for pattern in patterns:
            for path in sorted(glob.glob(root + pattern)):
                with open(path) as handle:
                    out.append("%s\t%s\n" % (path[len(root):], handle.read().strip()))
        return "".join(out)
    assert observe(args).count("echo @@") == 1
    return (lines(s["path"] for s in args["settings"]) + "@@\n"
            + lines(["/sys/bus/pci/devices/*/vendor", "/sys/bus/pci/devices/*/class"]))


def test_the_judge_reads_what_observe_prints(root):
    args = {"settings": [{"path": THP, "value": "never"}, {"path": CONTROL, "value": "on", "devices": GPUS_ONLY}]}
    assert judge(args, observed(root, args)) == [
        THP + " madvise, expected never", "/sys/bus/pci/devices/%s/power/control auto, expected on" % GPU]
    apply_settings(root, args["settings"], Gate())
    assert judge(args, observed(root, args)) == []
    missing = {"settings": [{"path": "/sys/kernel/mm/ksm/run", "value": "0"}]}
    assert judge(missing, observed(root, missing)) == ["/sys/kernel/mm/ksm/run: no such attribute"]


def test_the_verification_runs_the_kinds_own_reading():
    check = load("test_kinds").test_sysfs
    args = {"settings": [{"path": THP, "value": "never"}]}
    want = {"knobs": {"sysfs": {"module": "sysfs", "args": args}}}
    assert outcome(check, "h1", lambda command: THP + "\tnever\n@@\n", want) == "pass"
    assert outcome(check, "h1", lambda command: THP + "\talways [madvise] never\n@@\n", want) == (
        "h1: sysfs: expected what its catalog entries set, found sysfs: %s madvise, expected never" % THP)
    assert "not applicable" in outcome(check, "h1", lambda command: "", {"knobs": {}})


def problems(value):
    found = []
    sysfs_settings().check(value, lambda text, where="", got=None: found.append(where + " " + text))
    return found


def test_the_variables_rule_names_the_entry_and_the_key():
    assert problems([{"path": THP, "value": "never"}, {"path": CONTROL, "value": "on", "devices": GPUS_ONLY}]) == []
    assert problems([{"path": "/proc/sys/vm/x", "value": "1"}]) == [
        "[0].path path must be a glob under /sys [A-Za-z0-9_.:,+@*?[]/-], without .."]
    assert problems([{"path": THP, "value": "a;b"}]) == [
        "[0].value value must be [A-Za-z0-9_.,:/+=@-] words separated by single spaces"]
    assert problems([{"path": THP, "value": "1", "devices": {"vendor": "10de"}}])[0].startswith("[0].devices.vendor")
    assert problems([{"path": THP, "value": "1", "mode": "x"}])[0].startswith("[0] must be a mapping")
    assert KIND.makers["sysfs_settings"] is sysfs_settings
