"""The sysctl knob: a list of kernel parameters, live and in one sysctl.d file, in one call."""
import pytest

from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node.gate import Gate, TuningError
from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node.sysctl import apply_sysctls
from fakehost import read, snapshot, write

PATH = "/etc/sysctl.d/60-infertune-numa.conf"
SETTINGS = [{"name": "kernel.numa_balancing", "value": "0"}, {"name": "vm.swappiness", "value": 10}]


@pytest.fixture
def root(tmp_path):
    write(str(tmp_path), "/proc/sys/kernel/numa_balancing", "1\n")
    write(str(tmp_path), "/proc/sys/vm/swappiness", "60\n")
    write(str(tmp_path), "/proc/sys/net/ipv4/ip_local_port_range", "32768\t60999\n")
    return str(tmp_path)


def test_every_entry_live_and_in_one_file_in_order_then_idempotent(root):
    result = apply_sysctls(root, SETTINGS, PATH, Gate())
    assert read(root, PATH).splitlines()[1:] == ["kernel.numa_balancing = 0", "vm.swappiness = 10"]
    assert (read(root, "/proc/sys/kernel/numa_balancing"), read(root, "/proc/sys/vm/swappiness")) == ("0", "10")
    assert result["before"] == {"kernel.numa_balancing": "1", "vm.swappiness": "60"}
    assert result["after"] == {"kernel.numa_balancing": "0", "vm.swappiness": "10"}
    assert result["changed"] and result["runtime_pending"]
    again = apply_sysctls(root, SETTINGS, PATH, Gate())
    assert not again["changed"] and not again["runtime_pending"]


def test_only_the_differing_keys_are_written(root):
    write(root, "/proc/sys/kernel/numa_balancing", "0\n")
    gate = Gate()
    apply_sysctls(root, SETTINGS, PATH, gate)
    assert [a for a in gate.actions if a.startswith("write ") and "/proc/" in a] == [
        "write %s/proc/sys/vm/swappiness = 10\n" % root]


def test_a_file_alone_changing_is_no_runtime_change(root):
    write(root, "/proc/sys/kernel/numa_balancing", "0\n")
    write(root, "/proc/sys/vm/swappiness", "10\n")
    planned = apply_sysctls(root, SETTINGS, PATH, Gate(check_mode=True))
    result = apply_sysctls(root, SETTINGS, PATH, Gate())
    assert result["changed"] and not result["runtime_pending"]
    # Every value runs already: the file is the change, said as what happens to it.
    assert planned["differs"] == result["differs"] == PATH + " created"
    write(root, PATH, "# edited by hand\n")
    assert apply_sysctls(root, SETTINGS, PATH, Gate())["differs"] == PATH + " rewritten"


def test_multi_field_values_compare_by_field(root):
    settings = [{"name": "net.ipv4.ip_local_port_range", "value": "32768 60999"}]
    apply_sysctls(root, settings, PATH, Gate())
    assert not apply_sysctls(root, settings, PATH, Gate())["changed"]
    assert read(root, "/proc/sys/net/ipv4/ip_local_port_range") == "32768\t60999"


def test_check_mode_predicts_and_changes_nothing(root):
    before = snapshot(root)
    result = apply_sysctls(root, SETTINGS, PATH, Gate(check_mode=True))
    assert snapshot(root) == before
    assert result["changed"] and result["after"] == {"kernel.numa_balancing": "0", "vm.swappiness": "10"}


def test_a_key_the_kernel_lacks_fails_before_any_write(root):
    before = snapshot(root)
    with pytest.raises(TuningError, match=r"not on this kernel: vm\.infertune_test \(no /proc/sys/vm/infertune_test\)"):
        apply_sysctls(root, SETTINGS + [{"name": "vm.infertune_test", "value": "1"}], PATH, Gate())
    assert snapshot(root) == before


@pytest.mark.parametrize("name", ["../etc/passwd", "vm", "vm..x", "vm/swappiness", "/vm.x"])
def test_a_name_that_is_no_sysctl_never_becomes_a_path(root, name):
    with pytest.raises(TuningError, match="not a sysctl name"):
        apply_sysctls(root, [{"name": name, "value": "1"}], PATH, Gate())


def test_a_value_the_kernel_does_not_keep_fails(root, monkeypatch):
    monkeypatch.setattr(Gate, "write_sysfs", lambda self, path, value: None)
    with pytest.raises(TuningError, match="vm.swappiness reads 60 after writing 10"):
        apply_sysctls(root, SETTINGS, PATH, Gate())
