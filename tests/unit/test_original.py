"""The record of a host's own state before infertune (infertune_node/original.py): kept by the first
apply that changes something, raw and per element, never under check mode, never overwritten, read by
revert and removed once the knob is back, its directory with the last record."""
import json
import os
import stat

import pytest

from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node import knobs, original, sysfs
from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node.gate import Gate, TuningError
from fakehost import read, snapshot, write

RECORD = "/var/lib/infertune/original/cpufreq.json"
GOVERNOR = "/sys/devices/system/cpu/cpu%d/cpufreq/scaling_governor"
POLICY = {"governor": "performance", "epp": "performance"}


def record(root, name="cpufreq"):
    return json.loads(read(root, "/var/lib/infertune/original/%s.json" % name))


def test_the_first_apply_that_changes_something_records_each_cpu_as_it_was(amd128):
    knobs.run("cpufreq_policy", POLICY, Gate(), amd128, "runtime", "cpufreq")
    saved = record(amd128)
    assert saved["knob"] == "cpufreq" and saved["kind"] == "cpufreq_policy"
    assert len(saved["state"]) == 128
    assert saved["state"]["cpu127"] == {"driver": "amd-pstate-epp", "governor": "powersave", "epp": "balance_performance"}
    # Root's alone: the record may hold what a host had in its own files.
    assert stat.S_IMODE(os.stat(os.path.join(amd128, RECORD.lstrip("/"))).st_mode) == 0o600


def test_check_mode_and_an_apply_without_change_record_nothing(amd128):
    knobs.run("cpufreq_policy", POLICY, Gate(check_mode=True), amd128, "runtime", "cpufreq")
    assert not os.path.exists(os.path.join(amd128, "var/lib/infertune"))
    for n in range(128):
        write(amd128, GOVERNOR % n, "performance\n")
        write(amd128, "/sys/devices/system/cpu/cpu%d/cpufreq/energy_performance_preference" % n, "performance\n")
    contract, _, actions = knobs.run("cpufreq_policy", POLICY, Gate(), amd128, "runtime", "cpufreq")
    assert not contract["changed"] and actions == []
    assert not os.path.exists(os.path.join(amd128, "var/lib/infertune"))


def test_a_later_apply_never_overwrites_what_was_recorded(amd128):
    knobs.run("cpufreq_policy", POLICY, Gate(), amd128, "runtime", "cpufreq")
    first = record(amd128)
    write(amd128, GOVERNOR % 3, "powersave\n")  # drifted; the next run puts it back
    contract, _, actions = knobs.run("cpufreq_policy", POLICY, Gate(), amd128, "runtime", "cpufreq")
    assert contract["changed"] and not any(RECORD in action for action in actions)
    assert record(amd128) == first


def test_an_element_reached_later_is_added_as_it_was_then(tmp_path):
    root = str(tmp_path)
    write(root, "/proc/sys/vm/swappiness", "60\n")
    write(root, "/proc/sys/kernel/numa_balancing", "1\n")
    path = "/etc/sysctl.d/60-infertune.conf"
    knobs.run("sysctl", {"settings": [{"name": "kernel.numa_balancing", "value": "0"}], "path": path}, Gate(), root,
              "runtime", "sysctl")
    knobs.run("sysctl", {"settings": [{"name": "kernel.numa_balancing", "value": "0"},
                                      {"name": "vm.swappiness", "value": "10"}], "path": path}, Gate(), root,
              "runtime", "sysctl")
    assert record(root, "sysctl")["state"] == {"files": {path: None},
                                               "live": {"kernel.numa_balancing": "1", "vm.swappiness": "60"}}


def test_an_apply_that_fails_part_way_records_what_it_had_written_over(amd128):
    class Refusing(Gate):
        def write_sysfs(self, path, value):
            super().write_sysfs(path, value)
            if len(self.actions) == 5:
                raise TuningError("the kernel refused %s" % path)
    with pytest.raises(TuningError, match="refused"):
        knobs.run("cpufreq_policy", POLICY, Refusing(), amd128, "runtime", "cpufreq")
    assert read(amd128, GOVERNOR % 0) == "performance"
    assert record(amd128)["state"]["cpu0"]["governor"] == "powersave"


def test_revert_reads_the_record_and_removes_it_with_its_directories(amd128):
    knobs.run("cpufreq_policy", POLICY, Gate(), amd128, "runtime", "cpufreq")
    contract, _, _ = knobs.run("cpufreq_policy", POLICY, Gate(), amd128, "runtime", "cpufreq", "revert")
    assert contract["changed"] and contract["runtime_pending"]
    assert contract["after"] == {"governor": {"powersave": 128}, "epp": {"balance_performance": 128}}
    assert read(amd128, GOVERNOR % 64) == "powersave"
    assert not os.path.exists(os.path.join(amd128, "var/lib/infertune"))
    # Nothing left to put back: a second revert changes nothing.
    again, _, actions = knobs.run("cpufreq_policy", POLICY, Gate(), amd128, "runtime", "cpufreq", "revert")
    assert not again["changed"] and actions == []


def test_revert_under_check_mode_predicts_and_changes_nothing(amd128):
    knobs.run("cpufreq_policy", POLICY, Gate(), amd128, "runtime", "cpufreq")
    before = snapshot(amd128)
    contract, _, actions = knobs.run("cpufreq_policy", POLICY, Gate(check_mode=True), amd128, "runtime", "cpufreq",
                                     "revert")
    assert contract["changed"] and contract["after"]["governor"] == {"powersave": 128}
    assert "remove %s/var/lib/infertune/original" % amd128 in actions
    assert snapshot(amd128) == before


def test_a_record_whose_values_are_back_is_removed_without_disturbing_the_host(amd128):
    knobs.run("cpufreq_policy", POLICY, Gate(), amd128, "runtime", "cpufreq")
    for n in range(128):
        write(amd128, GOVERNOR % n, "powersave\n")
        write(amd128, "/sys/devices/system/cpu/cpu%d/cpufreq/energy_performance_preference" % n,
              "balance_performance\n")
    contract, _, _ = knobs.run("cpufreq_policy", POLICY, Gate(), amd128, "runtime", "cpufreq", "revert")
    assert contract["changed"] and not contract["runtime_pending"]
    assert contract["differs"] == "record of the original state removed"


def test_the_directory_stays_while_another_record_or_the_holds_are_in_it(amd128):
    write(amd128, "/var/lib/infertune/kernel-holds", "linux-image-amd64\n")
    write(amd128, "/var/lib/infertune/original/sysctl.json", json.dumps({"state": {}}))
    knobs.run("cpufreq_policy", POLICY, Gate(), amd128, "runtime", "cpufreq")
    knobs.run("cpufreq_policy", POLICY, Gate(), amd128, "runtime", "cpufreq", "revert")
    assert sorted(os.listdir(os.path.join(amd128, "var/lib/infertune/original"))) == ["sysctl.json"]
    original.forget(amd128, "sysctl", Gate())
    assert os.listdir(os.path.join(amd128, "var/lib/infertune")) == ["kernel-holds"]


def test_merge_keeps_every_recorded_value():
    assert original.merge({"a": 1, "b": {"x": 1}}, {"a": 2, "b": {"x": 2, "y": 3}, "c": 4}) == {
        "a": 1, "b": {"x": 1, "y": 3}, "c": 4}
    assert original.merge([1], [2]) == [1]


def test_a_name_that_could_make_a_path_is_refused(amd128):
    with pytest.raises(TuningError, match="cannot name its record"):
        knobs.run("cpufreq_policy", POLICY, Gate(), amd128, "runtime", "../etc/passwd")


def test_an_unreadable_record_fails_naming_it(amd128):
    write(amd128, RECORD, "{not json")
    with pytest.raises(TuningError, match="cannot read the record of cpufreq"):
        knobs.run("cpufreq_policy", POLICY, Gate(), amd128, "runtime", "cpufreq", "revert")


def test_an_unknown_verb_is_refused(amd128):
    with pytest.raises(TuningError, match="unknown verb 'purge'"):
        knobs.run("cpufreq_policy", POLICY, Gate(), amd128, "runtime", "cpufreq", "purge")


def test_a_file_is_recorded_as_written_and_an_absent_one_as_none(tmp_path):
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "kept.conf").write_text("options nvidia x=1  \n\n")
    assert sysfs.content(str(tmp_path), "/etc/kept.conf") == "options nvidia x=1  \n\n"
    assert sysfs.content(str(tmp_path), "/etc/absent.conf") is None
    # A file that is there but cannot be read is no absent file: it fails rather than being
    # recorded as None (which revert would turn into removing it).
    (tmp_path / "etc" / "unreadable.conf").mkdir()
    with pytest.raises(OSError):
        sysfs.content(str(tmp_path), "/etc/unreadable.conf")
