"""The GPUs' health read on the host (plugins/module_utils/infertune_node/gpu_health.py): the field
names a real nvidia-smi accepts, its real answer parsed ([N/A] included), each signal classed from
the tables, the kernel log's Xids, an nvidia-smi that hangs, and the plan module's one query."""
import os
import signal
import sys

import pytest

from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node import gpu_gate, gpu_health, timed
from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node.gpu_query import SMI_FIELDS, smi_argv
from fakehost import REPO
from moduleharness import run_module

FIXTURES = REPO / "tests" / "fixtures" / "gpu"
H100_QUERY = (FIXTURES / "h100-health-query.csv").read_text()
H100_HELP = (FIXTURES / "h100-help-query-gpu.txt").read_text()
LIMITS = {"sram_uncorrectable_max": 0, "remap_uncorrectable_max": 512}
HEALTH_ARGV = smi_argv("nvidia-smi", [field for key, field in gpu_health.HEALTH_FIELDS])


def fake_root(tmp_path, kmsg="", boot_id="boot-1"):
    (tmp_path / "dev").mkdir(exist_ok=True)
    (tmp_path / "proc/sys/kernel/random").mkdir(parents=True, exist_ok=True)
    (tmp_path / "proc/sys/kernel/random/boot_id").write_text(boot_id + "\n")
    if kmsg is not None:
        (tmp_path / "dev/kmsg").write_text(kmsg)
    return str(tmp_path)


def answering(*outputs):
    """run(argv) answering each call with the next (rc, out, err), recording the argv."""
    calls = []

    def run(argv):
        calls.append(argv)
        return outputs[len(calls) - 1]
    run.calls = calls
    return run


def h100_with(**values):
    """The real H100 answer with some health fields replaced ({key: printed value})."""
    row = [v.strip() for v in H100_QUERY.strip().split(",")]
    keys = [k for k, f in SMI_FIELDS] + [k for k, f in gpu_health.HEALTH_FIELDS]
    return ", ".join(values.get(k, v) for k, v in zip(keys, row)) + "\n"


def test_every_field_the_read_asks_is_one_the_real_nvidia_smi_lists():
    listed = {line.strip().strip('"') for line in H100_HELP.splitlines() if line.startswith('"')}
    listed |= {name.strip().strip('"') for line in H100_HELP.splitlines() if line.startswith('"') and " or " in line
               for name in line.split(" or ")}
    asked = HEALTH_ARGV[1].split("=", 1)[1].split(",")
    assert [f for f in asked if f not in listed] == []


def test_the_real_h100_answer_parses_healthy_with_retired_pages_not_applicable(tmp_path):
    run = answering((0, H100_QUERY, ""))
    gpus, health = gpu_health.read(run, root=fake_root(tmp_path))
    assert run.calls == [HEALTH_ARGV]
    assert gpus[0]["name"] == "NVIDIA H100 80GB HBM3" and gpus[0]["compute_capability"] == "9.0"
    (gpu,) = health["gpus"]
    assert gpu["class"] == "ok" and gpu["signals"] == {} and gpu["serial"] == "1650000000001"
    # Hopper remaps rows instead of retiring pages; no NVML here, so no replay counter.
    assert gpu["not_applicable"] == ["pcie_replays", "retired_pages"]
    assert gpu["counters"] == {k: 0 for k in gpu_health.COUNTERS}
    assert gpu["flags"] == {"remap_pending": 0, "remap_failure": 0} and gpu["clock_events"] == []
    assert health["boot_id"] == "boot-1" and health["blocking"] == [] and health["unknown_fields"] == []


@pytest.mark.parametrize("values, signal, expected", [
    ({"remap_pending": "Yes"}, "remap", "reset"),
    ({"remap_failure": "Yes"}, "remap", "rma"),
    ({"remapped_uncorrectable": "513"}, "remap", "rma"),
    ({"remapped_uncorrectable": "512"}, "remap", "ok"),
    ({"ecc_sram_uncorrected": "1"}, "ecc", "rma"),
    ({"ecc_sram_threshold": "Yes"}, "ecc", "rma"),
    ({"ecc_uncorrected_volatile": "2"}, "ecc", "warn"),
    ({"ecc_mode": "Disabled"}, "ecc", "not_applicable"),
    ({"recovery_action": "GPU Reset"}, "recovery_action", "reset"),
    ({"recovery_action": "Node Reboot"}, "recovery_action", "reset"),
    ({"recovery_action": "Drain and Reset"}, "recovery_action", "reset"),
    ({"recovery_action": "Something New"}, "recovery_action", "warn"),
    ({"clock_events": "0x0000000000000048"}, "clock_events", "warn"),  # hw slowdown + thermal
    ({"clock_events": "0x0000000000000004"}, "clock_events", "ok"),  # the power cap is normal
    ({"retired_pending": "Yes"}, "retired_pages", "reset"),
    ({"remap_pending": "[GPU requires reset]"}, "remap", "reset"),
    ({"remap_pending": "[Unknown Error]"}, "remap", "warn"),
])
def test_each_signal_is_classed_from_the_table(values, signal, expected):
    raw = dict(zip([k for k, f in gpu_health.HEALTH_FIELDS],
                   [v.strip() for v in H100_QUERY.split(",")][len(SMI_FIELDS):]))
    raw.update(values)
    assert gpu_health.classify(raw, LIMITS)[signal][0] == expected


def test_a_card_without_row_remapping_answers_not_applicable_there(tmp_path):
    """The RTX PRO 6000 (GB202) is not on NVIDIA's row-remapping list: [N/A] is no finding."""
    na = {k: "[N/A]" for k in ("remap_pending", "remap_failure", "remapped_correctable", "remapped_uncorrectable",
                               "recovery_action")}
    gpus, health = gpu_health.read(answering((0, h100_with(**na), "")), root=fake_root(tmp_path))
    gpu = health["gpus"][0]
    assert gpu["class"] == "ok" and {"remap", "recovery_action"} <= set(gpu["not_applicable"])
    assert "remap_pending" not in gpu["flags"] and "remapped_uncorrectable" not in gpu["counters"]


def test_the_blocking_lines_name_gpu_bus_serial_uuid_and_signal(tmp_path):
    _, health = gpu_health.read(answering((0, h100_with(remap_pending="Yes"), "")), root=fake_root(tmp_path))
    assert health["blocking"] == [
        "GPU 0 (bus 00000000:00:06.0, serial 1650000000001, uuid GPU-00000000-0000-4000-8000-000000000001): remap: "
        "row remap pending (applied at the next GPU reset or reboot) (reset)"]


KMSG = ("6,800,3437245,-;NVRM: Persistence mode is deprecated\n"
        "4,801,9000000,-;NVRM: Xid (PCI:0000:00:06): 79, pid=1234, name=python3, GPU has fallen off the bus.\n"
        " SUBSYSTEM=pci\n"
        "4,802,9000001,-;NVRM: Xid (PCI:0000:00:06): 13, pid=1234, name=python3, Graphics Exception\n"
        "4,803,9000002,-;NVRM: Xid (PCI:0000:3b:00): 119, pid=99, Timeout after 6s of waiting for RPC response\n")


def test_xids_of_this_boot_are_read_from_the_kernel_log_and_mapped_to_their_gpu(tmp_path):
    _, health = gpu_health.read(answering((0, H100_QUERY, "")), root=fake_root(tmp_path, KMSG))
    gpu = health["gpus"][0]
    assert gpu["xids"] == {"79": 1, "13": 1} and gpu["signals"]["xid"] == ["reset", "Xid 13, 79"]
    # A bus no GPU answered for (fallen off it): said apart, and blocking too.
    assert health["other_xids"] == {"0000:3b:00": {"119": 1}}
    assert health["blocking"][-1] == "PCI 0000:3b:00 (no GPU answers there): xid: Xid 119 since this boot (reset)"


def test_the_kernel_log_is_read_in_records_as_dev_kmsg_gives_them(tmp_path, monkeypatch):
    """A record per read, then EAGAIN at the end, as the character device answers."""
    records = [line.encode() + b"\n" for line in KMSG.splitlines() if line.startswith("4,")]

    def read(fd, size):
        if records:
            return records.pop(0)
        raise BlockingIOError
    root = fake_root(tmp_path)
    monkeypatch.setattr(gpu_health.os, "read", read)
    found, why = gpu_health.kernel_xids(root)
    assert why == "" and found == {"0000:00:06": {"79": 1, "13": 1}, "0000:3b:00": {"119": 1}}


def test_an_unreadable_kernel_log_makes_the_xid_signal_not_applicable(tmp_path):
    _, health = gpu_health.read(answering((0, H100_QUERY, "")), root=fake_root(tmp_path, kmsg=None))
    assert health["kernel_log"].startswith("kernel log unreadable (")
    assert "xid" in health["gpus"][0]["not_applicable"]


def test_a_field_an_older_nvidia_smi_does_not_know_is_dropped_and_asked_again(tmp_path):
    unknown = 'Field "ecc.errors.uncorrected.aggregate.sram.thresholdExceeded" is not a valid field to query.\n\n'
    row = [v.strip() for v in H100_QUERY.strip().split(",")]
    keys = [k for k, f in SMI_FIELDS] + [k for k, f in gpu_health.HEALTH_FIELDS]
    without = ", ".join(v for k, v in zip(keys, row) if k != "ecc_sram_threshold") + "\n"
    run = answering((2, unknown, ""), (0, without, ""))
    _, health = gpu_health.read(run, root=fake_root(tmp_path))
    assert len(run.calls) == 2 and "thresholdExceeded" not in run.calls[1][1]
    assert health["unknown_fields"] == ["ecc.errors.uncorrected.aggregate.sram.thresholdExceeded"]
    assert health["gpus"][0]["class"] == "ok"


class FakeNvml:
    class NVMLError(Exception):
        pass

    def __init__(self, replays):
        self.replays = replays

    def nvmlInit(self):
        pass

    def nvmlShutdown(self):
        pass

    def nvmlDeviceGetCount(self):
        return len(self.replays)

    def nvmlDeviceGetHandleByIndex(self, index):
        return index

    def nvmlDeviceGetPciInfo(self, handle):
        return type("Pci", (), {"busId": list(self.replays)[handle].encode()})

    def nvmlDeviceGetPcieReplayCounter(self, handle):
        return list(self.replays.values())[handle]


def test_replay_counters_come_from_nvml_where_it_imports(tmp_path):
    _, health = gpu_health.read(answering((0, H100_QUERY, "")), root=fake_root(tmp_path),
                                nvml=FakeNvml({"00000000:00:06.0": 7}))
    assert health["gpus"][0]["counters"]["pcie_replays"] == 7 and health["replays"] == ""
    assert "pcie_replays" not in health["gpus"][0]["not_applicable"]


# An nvidia-smi stuck in the driver: it ignores SIGTERM, and a child in a session of its own keeps its
# pipes open after the process group is killed, as a D-state process keeps them.
# Its held child writes its pid to the file named by HANG_PID, when set.
HANG = ("import os, signal, sys, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.environ.get('HANG_PID'):\n"
        "        open(os.environ['HANG_PID'], 'w').write(str(os.getpid()))\n"
        "    time.sleep(60)\n"
        "    sys.exit(0)\n"
        "time.sleep(60)\n")


def test_an_nvidia_smi_that_hangs_is_left_behind_and_said(tmp_path):
    pid_file = tmp_path / "held"
    with pytest.raises(timed.Unresponsive, match="did not answer within 1 s"):
        timed.run([sys.executable, "-c", HANG], 1, env=dict(os.environ, HANG_PID=str(pid_file)))
    # The reader did not wait for what holds the pipes: it still runs.
    held = int(pid_file.read_text())
    os.kill(held, 0)
    os.kill(held, signal.SIGKILL)


def test_the_gate_says_driver_unresponsive_for_a_hang(tmp_path):
    def run(argv):
        raise timed.Unresponsive("nvidia-smi did not answer within 5 s")
    with pytest.raises(gpu_health.DriverUnresponsive, match="^driver unresponsive: nvidia-smi did not answer within 5 s"):
        gpu_gate.gate(run, source="nvidia_smi", health=LIMITS, root=fake_root(tmp_path))
    with pytest.raises(gpu_health.DriverUnresponsive, match="^driver unresponsive: "):
        gpu_gate.gate(run, source="nvidia_smi")


def fake_nvidia_smi(tmp_path, script):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    path = bindir / "nvidia-smi"
    path.write_text("#!%s\n%s" % (sys.executable, script))
    path.chmod(0o755)
    return bindir


def test_the_plan_reads_identity_and_health_in_one_nvidia_smi(monkeypatch, tmp_path, capsys):
    log = tmp_path / "calls"
    bindir = fake_nvidia_smi(tmp_path, "import sys\nopen(%r, 'a').write(' '.join(sys.argv[1:]) + '\\n')\n"
                                       "sys.stdout.write(%r)\n" % (str(log), H100_QUERY))
    monkeypatch.setenv("PATH", "%s:%s" % (bindir, os.environ["PATH"]))
    monkeypatch.setattr(gpu_health, "kernel_xids", lambda root="/": ({}, ""))
    monkeypatch.setattr(gpu_gate, "_pynvml", lambda: None)
    rc, result = run_module("infertune_plan", {"knobs": [], "gpu_gate": {"expected_count": 1, "timeout": 30},
                                               "health": LIMITS}, capsys)
    assert rc == 0 and result["plan"]["gpus"]["problems"] == []
    assert log.read_text().splitlines() == [" ".join(HEALTH_ARGV[1:])]
    assert result["plan"]["gpus"]["health"]["gpus"][0]["class"] == "ok"


def test_a_hanging_nvidia_smi_is_a_gate_problem_of_the_plan_not_a_hung_module(monkeypatch, tmp_path, capsys):
    bindir = fake_nvidia_smi(tmp_path, HANG)
    monkeypatch.setenv("PATH", "%s:%s" % (bindir, os.environ["PATH"]))
    monkeypatch.setattr(gpu_gate, "_pynvml", lambda: None)
    rc, result = run_module("infertune_plan", {"knobs": [], "gpu_gate": {"timeout": 1}, "health": LIMITS}, capsys)
    assert rc == 0
    assert result["plan"]["gpus"]["problems"] == ["driver unresponsive: nvidia-smi did not answer within 1 s"]
    assert result["plan"]["gpus"]["health"] == {"read": False, "error": "driver unresponsive: nvidia-smi did not answer within 1 s"}


def test_after_a_hang_the_fabric_gates_do_not_ask_nvidia_smi_again(monkeypatch, tmp_path, capsys):
    """The BAR1 gate takes the GPUs' memory from the gate's read; with the driver unresponsive it
    has none, and asking nvidia-smi itself would hang the module (it has no time limit of its own)."""
    from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node import pcie_fabric
    from fakehost import fabric_tree

    bindir = fake_nvidia_smi(tmp_path, HANG)
    monkeypatch.setenv("PATH", "%s:%s" % (bindir, os.environ["PATH"]))
    monkeypatch.setattr(gpu_gate, "_pynvml", lambda: None)
    root = fabric_tree(str(tmp_path / "tree"))
    check = pcie_fabric.check
    monkeypatch.setattr(pcie_fabric, "check", lambda _root, *args, **kwargs: check(root, *args, **kwargs))
    rc, result = run_module("infertune_plan", {"knobs": [], "gpu_gate": {"timeout": 1}, "health": LIMITS,
                                               "fabric": {"gates": ["bar1"]}}, capsys)
    assert rc == 0
    assert result["plan"]["fabric"]["failures"] == ["driver unresponsive: nvidia-smi did not answer within 1 s"]
