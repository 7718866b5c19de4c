from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node.gate import Gate
from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node.modprobe import apply_options
from fakehost import snapshot, write

PATH = "/etc/modprobe.d/infertune.conf"
OPTIONS = {"nvidia_uvm": {"uvm_disable_hmm": 1}, "nvidia": {"NVreg_EnableGpuFirmware": 1,
                                                            "NVreg_DynamicPowerManagement": 0}}


def test_writes_sorted_lines_then_idempotent(tmp_path):
    root = str(tmp_path)
    result = apply_options(root, OPTIONS, PATH, Gate())
    lines = (tmp_path / PATH.lstrip("/")).read_text().splitlines()
    assert lines[0].startswith("# managed by infertune")
    assert [line for line in lines if not line.startswith("#")] == [
        "options nvidia NVreg_DynamicPowerManagement=0 NVreg_EnableGpuFirmware=1",
        "options nvidia_uvm uvm_disable_hmm=1"]
    assert result["changed"] and not result["modprobe_options_reload_required"]
    assert result["live"]["nvidia_uvm"] == {"loaded": False, "differs": {}, "unknown": []}
    assert not apply_options(root, OPTIONS, PATH, Gate())["changed"]


def test_loaded_module_with_other_value_needs_reload(tmp_path):
    root = str(tmp_path)
    write(root, "/sys/module/nvidia_uvm/parameters/uvm_disable_hmm", "N\n")
    result = apply_options(root, {"nvidia_uvm": {"uvm_disable_hmm": True}}, PATH, Gate())
    assert result["modprobe_options_reload_required"]
    assert result["live"]["nvidia_uvm"]["differs"] == {"uvm_disable_hmm": {"wanted": "1", "live": "N"}}


def test_loaded_module_with_same_value_in_y_form_needs_nothing(tmp_path):
    root = str(tmp_path)
    write(root, "/sys/module/nvidia_uvm/parameters/uvm_disable_hmm", "Y\n")
    result = apply_options(root, {"nvidia_uvm": {"uvm_disable_hmm": 1}}, PATH, Gate())
    assert not result["modprobe_options_reload_required"]


def test_check_mode_changes_nothing(tmp_path):
    root = str(tmp_path)
    before = snapshot(root)
    result = apply_options(root, OPTIONS, PATH, Gate(check_mode=True))
    assert result["changed"] and "uvm_disable_hmm=1" in result["after"] and snapshot(root) == before


def test_a_parameter_the_loaded_module_lacks_is_said_and_never_waited_for(tmp_path):
    # The kernel ignores it at every load: a reboot for it would come back on every run.
    root = str(tmp_path)
    write(root, "/sys/module/nvidia/parameters/NVreg_EnableGpuFirmware", "18\n")
    options = {"nvidia": {"NVreg_EnableGpuFirmware": "18", "NVreg_InfertuneTest": "1"}}
    result = apply_options(root, options, PATH, Gate())
    assert not result["modprobe_options_reload_required"]
    assert result["live"]["nvidia"] == {"loaded": True, "differs": {}, "unknown": ["NVreg_InfertuneTest"]}
    assert result["msg"].endswith("not shown by the loaded module (unknown to it?): nvidia.NVreg_InfertuneTest")


def test_a_made_up_parameter_the_module_has_waits_for_its_reload(tmp_path):
    root = str(tmp_path)
    write(root, "/sys/module/nvidia/parameters/NVreg_InfertuneTest", "0\n")
    result = apply_options(root, {"nvidia": {"NVreg_InfertuneTest": "1"}}, PATH, Gate())
    assert result["modprobe_options_reload_required"] and "options nvidia NVreg_InfertuneTest=1\n" in result["after"]
    write(root, "/sys/module/nvidia/parameters/NVreg_InfertuneTest", "1\n")
    again = apply_options(root, {"nvidia": {"NVreg_InfertuneTest": "1"}}, PATH, Gate())
    assert not again["changed"] and not again["modprobe_options_reload_required"]
