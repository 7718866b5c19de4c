"""infertune.validation and the infertune_validate action plugin: hostile input is refused
before any change, naming the variable and the rule, never with a traceback."""
import json
import math
import os
import subprocess
import sys
import textwrap

import pytest
import yaml

import controller_play
from fakehost import REPO
from infertune import rules, specs, validation

SECRET = "s3cr3t-token-value"


def rendered_defaults():
    """Every role default, templated ones replaced by what they render to on a control node."""
    values = specs.role_defaults()
    rendered = {
        "report_dir": str(REPO / "reports"),
        "benchmark_report_dir": str(REPO / "reports"),
        "benchmark_results_dir": str(REPO / "reports" / "benchmark"),
        "report_enforce": True,
    }
    for name, value in values.items():
        if isinstance(value, str) and "{{" in value:
            assert name in rendered, "templated default %s needs a rendered value in this test" % name
            values[name] = rendered[name]
    return values


def test_good_defaults_pass():
    assert validation.validate(rendered_defaults()) == []


def test_every_declared_variable_has_a_default_that_passes():
    values = {name: option.spec["default"] for name, option in specs.declared().items()
              if "default" in option.spec and not (isinstance(option.spec["default"], str) and "{{" in option.spec["default"])}
    assert validation.validate(values) == []


def test_example_and_lab_inventories_pass():
    for path in sorted((REPO / "inventory").glob("*/group_vars/*.yml")):
        values = yaml.safe_load(path.read_text()) or {}
        assert validation.report(values) == [], path


# (variable, value, a fragment of the rule). Each must produce problems that all name the variable.
HOSTILE = [
    ("kernel_cmdline_params", ["quiet\nroot=/dev/sda"], "newline"),
    ("kernel_cmdline_params", [""], "empty entry"),
    ("kernel_cmdline_params", ["  "], "empty entry"),
    ("kernel_cmdline_params", ["foo=$(reboot)"], "key=value"),
    ("kernel_cmdline_params", ["foo='a b'"], "key=value"),
    ("kernel_cmdline_params", ["--", "init=/bin/sh"], "key=value"),
    ("kernel_cmdline_params", "processor.max_cstate=1", "must be a list"),
    ("kernel_cmdline_params", [["nested"]], "must be a string"),
    ("kernel_cmdline_params", ["amd_pstate=passive"], "cpu_power_amd_pstate_mode"),
    ("kernel_cmdline_params", [None], "must not be null"),
    ("kernel_cmdline_remove", ["root"], "must not remove root"),
    ("kernel_cmdline_remove", ["ro"], "must not remove ro"),
    ("kernel_cmdline_remove", ["rw", "boot", "init"], "must not remove"),
    ("kernel_cmdline_remove", ["quiet=1"], "no =value"),
    ("kernel_cmdline_grub_dropin", "/etc/default/grub.d/60-infertune.conf", ".cfg"),
    ("kernel_cmdline_grub_dropin", "/etc/grub.d/60-infertune.cfg", "/etc/default/grub.d"),
    ("nvidia_module_options", {"nvidia_uvm": "uvm_disable_hmm=1"}, "mapping of parameter"),
    ("nvidia_module_options", {"nvidia_uvm": ["uvm_disable_hmm"]}, "mapping of parameter"),
    ("nvidia_module_options", ["nvidia_uvm"], "must be a mapping"),
    ("nvidia_module_options", "nvidia_uvm uvm_disable_hmm=1", "must be a mapping"),
    ("nvidia_module_options", {"nvidia uvm": {"uvm_disable_hmm": 1}}, "module name"),
    ("nvidia_module_options", {"nvidia_uvm": {"uvm disable": 1}}, "parameter name"),
    ("nvidia_module_options", {"nvidia_uvm": {"uvm_disable_hmm": "1 # x"}}, "without whitespace or #"),
    ("nvidia_module_options", {"nvidia_uvm": {"uvm_disable_hmm": "1\noptions evil x=1"}}, "newline"),
    ("nvidia_module_options", {"nvidia_uvm": {"a\nb": 1}}, "keys must not contain"),
    ("nvidia_module_options", {"nvidia_uvm": {"uvm_disable_hmm": None}}, "string, number or boolean"),
    ("nvidia_module_options", {"nvidia_uvm": {"uvm_disable_hmm": 10 ** 400}}, "64-bit"),
    ("nvidia_module_options", {"nvidia_uvm": {"uvm_disable_hmm": float("nan")}}, "finite"),
    ("nvidia_options_file", "/etc/modprobe.d/infertune-nvidia", ".conf"),
    ("nvidia_options_file", "etc/modprobe.d/x.conf", "absolute path"),
    ("sysctl_file", "/etc/sysctl.d/../x.conf", "'..'"),
    ("sysctl_settings", "vm.swappiness=10", "must be a list"),
    ("sysctl_settings", ["vm.swappiness=10"], "must be a mapping"),
    ("sysctl_settings", [{"name": "vm.swappiness"}], "keys name and value"),
    ("sysctl_settings", [{"name": "vm.swappiness", "value": "10", "state": "present"}], "no other"),
    ("sysctl_settings", [{"name": "vm/swappiness", "value": "10"}], "dotted sysctl name"),
    ("sysctl_settings", [{"name": "../../etc/passwd", "value": "x"}], "dotted sysctl name"),
    ("sysctl_settings", [{"name": "swappiness", "value": "10"}], "dotted sysctl name"),
    ("sysctl_settings", [{"name": "Vm.swappiness", "value": "10"}], "dotted sysctl name"),
    ("sysctl_settings", [{"name": 10, "value": "10"}], "dotted sysctl name"),
    ("sysctl_settings", [{"name": "vm.swappiness", "value": "10"}, {"name": "vm.swappiness", "value": "1"}],
     "must appear once"),
    ("sysctl_settings", [{"name": "vm.swappiness", "value": "1;reboot"}], "words separated by single spaces"),
    ("sysctl_settings", [{"name": "vm.swappiness", "value": "$(reboot)"}], "words separated by single spaces"),
    ("sysctl_settings", [{"name": "vm.swappiness", "value": "1  2"}], "words separated by single spaces"),
    ("sysctl_settings", [{"name": "vm.swappiness", "value": " 10"}], "words separated by single spaces"),
    ("sysctl_settings", [{"name": "vm.swappiness", "value": ""}], "words separated by single spaces"),
    ("sysctl_settings", [{"name": "vm.swappiness", "value": "10\nkernel.panic = 1"}], "newline"),
    ("sysctl_settings", [{"name": "vm.swappiness", "value": True}], "string or an integer"),
    ("sysctl_settings", [{"name": "vm.swappiness", "value": None}], "string or an integer"),
    ("sysctl_settings", [{"name": "kernel.numa_balancing", "value": "7"}], "integer 0-3 for kernel.numa_balancing"),
    ("sysctl_settings", [{"name": "kernel.numa_balancing", "value": "off"}], "integer 0-3"),
    ("sysctl_settings", [{"name": "vm.swappiness", "value": 201}], "integer 0-200 for vm.swappiness"),
    ("sglang_environment", {"BAD-NAME": "x"}, "environment name"),
    ("sglang_environment", {"1ABC": "x"}, "environment name"),
    ("sglang_environment", {"A": {"nested": 1}}, "string, number or boolean"),
    ("sglang_environment", {"INFERTUNE_SGLANG_API_KEY": "x"}, "reserved"),
    ("sglang_environment", {"A\nB": "x"}, "keys must not contain"),
    ("sglang_environment", "A=1", "must be a mapping"),
    ("sglang_secret_environment", {"HF_TOKEN": SECRET + "\n"}, "newline"),
    ("sglang_secret_environment", {"bad name": SECRET}, "environment name"),
    ("sglang_api_key", SECRET + "\r", "carriage return"),
    ("sglang_api_key", ["a", SECRET], "must be a string"),
    ("sglang_served_model_name", "GLM %n", "%"),
    ("sglang_served_model_name", "GLM\\", "%"),
    ("sglang_served_model_name", "", "empty"),
    ("sglang_host", "0.0.0.0; rm -rf /", "IP address or a host name"),
    ("sglang_host", "1.2.3", "IP address or a host name"),
    ("sglang_host", "-bad.example.com", "IP address or a host name"),
    ("sglang_host", 8080, "IP address or a host name"),
    ("sglang_port", 0, "1-65535"),
    ("sglang_port", 70000, "1-65535"),
    ("sglang_port", "abc", "integer"),
    ("sglang_port", 3.5, "integer"),
    ("sglang_tp", 0, "1-1024"),
    ("sglang_tp", True, "integer"),
    ("sglang_ep", -1, "1-1024"),
    ("gpu_gate_expected_count", -1, "1-1024"),
    ("gpu_gate_expected_count", 10 ** 5000, "integer"),
    ("gpu_gate_expected_count", "9" * 5000, "integer"),
    ("gpu_gate_compute_capability", "12", "major.minor"),
    ("gpu_gate_min_driver", "570; reboot", "dotted numbers"),
    ("gpu_gate_source", "cuda", "one of"),
    ("sglang_mem_fraction_static", 1, "0 < x < 1"),
    ("sglang_mem_fraction_static", 1.5, "0 < x < 1"),
    ("sglang_mem_fraction_static", -0.1, "0 < x < 1"),
    ("sglang_mem_fraction_static", float("inf"), "finite"),
    ("sglang_mem_fraction_static", "lots", "number"),
    ("sglang_max_running_requests", -5, "0-1000000"),
    ("sglang_health_timeout", 0, "10-604800"),
    ("sglang_drain_timeout", -1, "0-86400"),
    # Hooks run without a shell: the program must be named by its absolute path.
    ("sglang_before_drain_command", "/usr/local/bin/lb-out gpu-01", "must be a list"),
    ("sglang_before_drain_command", ["lb-out", "gpu-01"], "absolute path"),
    ("sglang_after_serve_command", ["../bin/lb-in"], "absolute path"),
    ("sglang_after_serve_command", ["/usr/bin/lb-in", "a\nb"], "control character"),
    ("sglang_before_drain_url", "file:///etc/passwd", "http:// or https://"),
    ("sglang_before_drain_url", "javascript:alert(1)", "http:// or https://"),
    ("sglang_after_serve_url", "https://", "http:// or https://"),
    ("sglang_after_serve_url", "http://lb:99999/x", "http:// or https://"),
    ("sglang_after_serve_url", "http://lb/a b", "whitespace"),
    ("sglang_before_drain_url", "https://admin:%s@lb.example.com/out" % SECRET, "credentials"),
    ("kernel_reboot_timeout", 0, "10-86400"),
    ("kernel_reboot_timeout", None, "must not be null"),
    ("kernel_reboot_strategy", "sometimes", "one of"),
    ("kernel_package", "linux-image; rm -rf /", "Debian package name"),
    ("kernel_release", "6.14 -rc1", "kernel release"),
    ("cpu_power_cstate_max_latency", -1, "0-10000000"),
    ("cpu_power_governor", "turbo", "one of"),
    ("cpu_power_epp", ["performance"], "must be a string"),
    ("pcie_max_read_request", 3000, "one of"),
    ("pcie_mrrs_vendor", "10de", "0x and 4 digits"),
    ("pcie_mrrs_vendor", "0x10de0", "0x and 4 digits"),
    ("pcie_mrrs_classes", ["0x03000"], "0x and 4 digits"),
    ("pcie_mrrs_classes", [], "must not be empty"),
    ("pcie_iommu_mode", "pt", "one of passthrough, off, leave"),
    ("pcie_iommu_mode", False, "must be a string"),          # an unquoted YAML off
    ("pcie_fabric_gates", ["width", "p2p"], "one of width, speed, bar1"),
    ("pcie_acs_force", "maybe", "must be a boolean"),
    ("sglang_nccl_environment", {"NCCL-P2P": "SYS"}, "environment name"),
    ("sglang_extra_args", ["--api-key", "abc"], "--api-key"),
    ("sglang_extra_args", ["--api-key=abc"], "--api-key"),
    ("sglang_extra_args", ["--api_key=abc"], "--api-key"),
    ("sglang_extra_args", ["--admin-api-key", "abc"], "--admin-api-key"),
    ("sglang_extra_args", ["--config=/tmp/x.yaml"], "--config"),
    ("sglang_extra_args", ["--config", "/tmp/x.yaml"], "--config"),
    ("sglang_extra_args", ["--enable-metrics", {"a": 1}], "must be a string"),
    ("sglang_extra_args", ["--x\u202e"], "U+202E"),
    ("sglang_extra_args", "--enable-metrics", "must be a list"),
    ("sglang_model_path", "my model", "hub id"),
    ("sglang_model_path", "../models/x", "hub id"),
    ("sglang_model_path", "/models/../etc", "'..'"),
    ("sglang_model_path", "org/name/extra", "hub id"),
    ("sglang_venv", "opt/sglang", "absolute path"),
    ("sglang_quantization", "", "empty"),
    ("benchmark_batch_sizes", [0], "1-4096"),
    ("benchmark_batch_sizes", [], "must not be empty"),
    ("benchmark_batch_sizes", ["eight"], "integer"),
    ("benchmark_trials", 0, "1-1000"),
    ("benchmark_warmup", -1, "0-1000"),
    ("benchmark_max_new_tokens", 1, "2-1000000"),
    ("benchmark_request_timeout", 0, "1-86400"),
    ("benchmark_backends", [], "must not be empty"),
    ("benchmark_backends", ["flashinfer cutlass"], "a name"),
    ("benchmark_start_server", "maybe", "must be a boolean"),
    ("sglang_service_started", "y", "must be a boolean"),
    ("benchmark_interconnect_timeout", 0, "1-86400"),
    ("benchmark_p2p_test_path", "p2p; rm -rf /", "a bare name or an absolute path"),
    ("benchmark_all_reduce_path", "../all_reduce_perf", "a bare name or an absolute path"),
    ("benchmark_all_reduce_args", ["-g", "$(id)"], "an argument"),
    ("rollout_canary_count", 0, "1-100000"),
    ("rollout_canary_count", -1, "1-100000"),
    ("rollout_canary_count", "abc", "integer"),
    ("rollout_batches", [], "must not be empty"),
    ("rollout_batches", ["0%"], "0 < N <= 100"),
    ("rollout_batches", ["150%"], "0 < N <= 100"),
    ("rollout_batches", [0], "count >= 1"),
    ("rollout_batches", ["12.5%"], "count >= 1"),
    ("rollout_batches", ["100%"], "rollout_allow_single_batch"),
    ("rollout_batches", ["10%", "100%"], "rollout_allow_single_batch"),
    ("rollout_batches", "25%", "must be a list"),
    ("rollout_max_failures", -1, "count >= 0"),
    ("rollout_max_failures", "101%", "0 <= N <= 100"),
    ("rollout_max_failures", "abc", "count >= 0"),
    ("rollout_allow_single_batch", "perhaps", "must be a boolean"),
    ("rollout_connect_timeout", 0, "1-86400"),
    ("rollout_slice_max_failures", "two", "count >= 0"),
    ("infertune_fleet_size", -8, "0-1000000"),
]


@pytest.mark.parametrize("name,value,fragment", HOSTILE, ids=["%s-%d" % (c[0], i) for i, c in enumerate(HOSTILE)])
def test_hostile_input_is_refused_naming_the_variable(name, value, fragment):
    problems = validation.validate({name: value})
    assert problems, "%s=%r passed" % (name, value)
    lines = [problem.line("gpu-07") for problem in problems]
    for problem, line in zip(problems, lines):
        assert problem.variable == name, line          # nothing else fails
        assert line.startswith("host gpu-07: %s" % name), line
        assert "\n" not in line and "Traceback" not in line
        assert SECRET not in line, line                # secrets are never echoed
        assert len(line) < 400, line
    assert any(fragment in line for line in lines), lines


def test_cross_variable_rules():
    problems = validation.report({"kernel_cmdline_params": ["foo=1", "foo=2"], "kernel_cmdline_remove": ["foo"],
                                  "sglang_environment": {"A": "1"}, "sglang_secret_environment": {"A": "2"}})
    assert problems == [
        "kernel_cmdline_params[1]: key foo appears twice (entries 0 and 1), got 'foo=2'",
        "kernel_cmdline_remove[0]: removes a key that kernel_cmdline_params sets, got 'foo'",
        "sglang_environment: also set in sglang_secret_environment, got 'A'",
    ]


def test_fabric_parameters_come_from_the_pcie_role_alone():
    problems = validation.report({"kernel_cmdline_params": ["iommu=on", "pcie-aspm=force"],
                                  "kernel_cmdline_remove": ["amd_iommu"]})
    assert problems == [
        "kernel_cmdline_params[0]: iommu comes from pcie_iommu_mode (role pcie); do not list it here, got 'iommu=on'",
        "kernel_cmdline_params[1]: pcie-aspm comes from pcie_link_pm_off (role pcie); do not list it here,"
        " got 'pcie-aspm=force'",
        "kernel_cmdline_remove[0]: amd_iommu comes from pcie_iommu_mode (role pcie); do not list it here,"
        " got 'amd_iommu'",
    ]
    # Left to the kernel_cmdline role when the pcie role leaves them alone.
    assert validation.report({"kernel_cmdline_params": ["iommu=on", "pcie_aspm=force"], "pcie_iommu_mode": "leave",
                              "pcie_link_pm_off": False}) == []


def test_single_batch_allowed_when_asked():
    assert validation.validate({"rollout_batches": ["100%"], "rollout_allow_single_batch": True}) == []
    assert validation.validate({"rollout_batches": ["100%"], "rollout_allow_single_batch": "yes"}) == []


@pytest.mark.parametrize("name,value", [
    ("rollout_batches", [1, "3", "10%", "100%"][:3]),
    ("rollout_max_failures", 0), ("rollout_max_failures", "25%"), ("rollout_max_failures", 3),
    ("rollout_canary_count", "2"),                       # -e rollout_canary_count=2 arrives as a string
    ("sglang_model_path", "zai-org/GLM-4.6"), ("sglang_model_path", "/models/My Model"),
    ("sglang_host", "::"), ("sglang_host", "gpu-01.example.com"), ("sglang_host", "fe80::1"),
    ("sglang_mem_fraction_static", 0.85), ("sglang_mem_fraction_static", "0.8"),
    ("kernel_cmdline_params", ['acpi_osi="Windows 2015"', "isolcpus=1-3,5", "root=UUID=ab-12", "nohz_full=1-127"]),
    ("kernel_cmdline_remove", ["quiet", "splash", "nvidia-drm.modeset"]),
    ("nvidia_module_options", {"nvidia": {"NVreg_EnableGpuFirmware": 0, "x": True}, "nvidia_drm": None}),
    ("nvidia_module_options", {"nvidia": {"NVreg_InfertuneTest": "1"}}),  # a -e JSON string
    ("sysctl_settings", []),
    ("sysctl_settings", [{"name": "kernel.numa_balancing", "value": "0"}, {"name": "vm.swappiness", "value": "10"},
                         {"name": "net.ipv4.ip_local_port_range", "value": "1024 65000"},
                         {"name": "net.ipv4.conf.eth0-1.rp_filter", "value": 2}]),
    ("sglang_extra_args", ["--enable-metrics", "--context-length", "8192", "--api-key-file-is-not-a-flag"][:3]),
    ("sglang_environment", {"SGLANG_ENABLE_PCIE_IPC_ALLREDUCE": 1, "_X": "a b \"c\" $d"}),
    ("gpu_gate_min_driver", 580), ("gpu_gate_min_driver", "580.95.05"),
    ("kernel_reboot_timeout", 20), ("sglang_port", "30000"), ("benchmark_start_server", "false"),
    ("sglang_before_drain_command", ["/usr/local/bin/lb", "out", "gpu-01; rm -rf /", "$(id)"]),
    ("sglang_after_serve_command", []), ("sglang_after_serve_url", ""),
    ("sglang_before_drain_url", "https://lb.example.com:8443/pools/llm/members?host=gpu-01"),
    ("sglang_after_serve_url", "http://[fd00::1]:8080/in"),
])
def test_good_values_pass(name, value):
    assert validation.report({name: value}) == []


def test_typo_suggests_the_declared_name():
    assert validation.report({"pcie_max_read_requst": 4096}, host="h1") == [
        "host h1: pcie_max_read_requst: no role declares this variable; did you mean pcie_max_read_request?"]


def test_unknown_prefixed_names_but_not_internal_ones_or_other_prefixes():
    lines = validation.report({"sglang_tpp": 8, "rollout_canary": 2, "sglang_argv": [], "kernel_reboot_reasons": [],
                               "infertune_plan": {}, "tuning_persistence_shared_files": [], "my_own_var": 1,
                               "ansible_host": "x",
                               # Host variables the plan's action and infertune_publish publish.
                               "infertune_unreachable": "x", "infertune_gpus": [], "infertune_reached": "drain"})
    assert lines == ["rollout_canary: no role declares this variable; did you mean rollout_canary_count?",
                     "sglang_tpp: no role declares this variable; did you mean sglang_tp?"]
    assert validation.report({"sglang_tpp": 8}, check_unknown=False) == []


def test_a_retired_variable_is_named_with_what_replaces_it():
    """numa_balancing_mode no longer carries a role's prefix: without a word it would be ignored."""
    assert validation.report({"numa_balancing_mode": 1, "numa_balancing_sysctl_file": "/etc/sysctl.d/x.conf"},
                             host="h1", check_unknown=False) == [
        "host h1: numa_balancing_mode: retired: kernel.numa_balancing is an entry of sysctl_settings"
        " (a list of {name, value})",
        "host h1: numa_balancing_sysctl_file: retired: set sysctl_file"]


def test_the_task_files_are_read_only_for_a_name_the_vars_files_do_not_explain(monkeypatch):
    """A play's first task sees the roles' vars and the user's variables: the task files (every
    register and set_fact) are read only for a prefixed name neither declared nor in a vars file."""
    def no_task_files(root):
        raise AssertionError("the task files were read")

    monkeypatch.setattr(validation, "internal_names", no_task_files)
    assert validation.report({"sglang_argv": [], "infertune_knobs": [], "infertune_selected_knobs": [], "infertune_plan": {},
                              "sglang_port": 30000, "my_own_var": 1}) == []
    with pytest.raises(AssertionError, match="the task files were read"):
        validation.report({"tuning_persistence_shared_files": []})


def test_roles_option_limits_the_check():
    bad = {"benchmark_trials": 0, "sglang_port": 0, "benchmark_trails": 5}
    assert [p.variable for p in validation.validate(bad, roles=["sglang"])] == ["sglang_port"]
    assert sorted(p.variable for p in validation.validate(bad, roles=["sglang", "benchmark"])) == [
        "benchmark_trails", "benchmark_trials", "sglang_port"]
    assert [str(p) for p in validation.validate({}, roles=["nope"])][0].startswith("roles: no such role")


WEIRD = [None, [], {}, [[[[]]]], {"a": {"b": {"c": [1, {"d": None}]}}}, 10 ** 5000, -(10 ** 5000), float("nan"),
         float("-inf"), 1e308, True, object(), b"bytes\n", "x" * 200_000, "\x00", {1: 2}, {(1, 2): "x"},
         {None: None}, [None], set([1]), ("t",), 0, -1, "", " ", "%", "\u2028"]


def _cyclic():
    value = []
    value.append(value)
    mapping = {}
    mapping["self"] = mapping
    return [value, mapping]


def _deep(depth):
    value = "leaf"
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize("value", WEIRD + _cyclic() + [_deep(5000)], ids=lambda v: type(v).__name__)
def test_weird_values_never_raise(value):
    names = list(specs.declared()) + ["sglang_unknown_thing"]
    problems = validation.validate({name: value for name in names})
    for problem in problems:
        line = problem.line("h")
        assert "\n" not in line and len(line) < 500


def test_validator_never_raises_on_non_mapping_input():
    assert [str(p) for p in validation.validate(["a"])] == ["variables: must be a mapping of variable name to value"]
    assert validation.validate({1: 2, None: 3}) == []


def test_show_is_short_and_single_line():
    assert rules.show("a\nb") == "'a\\nb'"
    assert len(rules.show("x" * 10_000)) <= 60
    assert rules.show(10 ** 5000) == "an integer of 16610 bits"
    assert math.isnan(float("nan")) and rules.show(float("nan")) == "nan"


def test_file_mode_rule():
    rule = rules.file_mode()
    found = []
    for mode in ("0644", "0755", "0600", "4755", "2755", "0777", "rwx", 0o4755, None):
        rule.check(mode, lambda text, *rest, mode=mode: found.append((mode, text)))
    assert [m for m, _ in found] == ["4755", "2755", "0777", "rwx", 0o4755, None]


# ---------------------------------------------------------------------------- action plugin

PLAYBOOK = """
- name: Plan
  hosts: all
  gather_facts: false
  vars:
    templated_count: "{{ 2 - 3 }}"
  tasks:
    - name: Check every infertune variable
      infertune.fleet.infertune_validate:
        roles: "{{ check_roles | default(omit) }}"
      register: check
    - name: Show what was checked
      ansible.builtin.debug:
        msg: "CHECKED {{ check.checked | length }}"
"""


def run_playbook(tmp_path, *extra, allow_control_node=True):
    """The plugin on a local connection: the control node, allowed unless asked otherwise."""
    playbook = tmp_path / "plan.yml"
    playbook.write_text(textwrap.dedent(PLAYBOOK))
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_STDOUT_CALLBACK="default",
               ANSIBLE_NOCOLOR="1", ANSIBLE_PYTHON_INTERPRETER=sys.executable)
    allow = ["-e", "infertune_allow_control_node=true"] if allow_control_node else []
    return subprocess.run([str(REPO / ".venv" / "bin" / "ansible-playbook"), "-i", "gpu-07,", "-c", "local",
                           str(playbook)] + allow + list(extra),
                          capture_output=True, text=True, cwd=str(tmp_path), env=env, timeout=120)


def test_action_plugin_passes_defaults(tmp_path):
    result = run_playbook(tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "CHECKED" in result.stdout


def test_action_plugin_reports_one_line_per_problem(tmp_path):
    result = run_playbook(tmp_path, "-e", "gpu_gate_expected_count={{ templated_count }}",
                          "-e", json.dumps({"nvidia_module_options": {"nvidia_uvm": "x"},
                                            "sglang_api_key": SECRET + "\n", "pcie_max_read_requst": 1}))
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert "Traceback" not in output and SECRET not in output
    assert "host gpu-07: gpu_gate_expected_count: must be 1-1024, got -1" in output
    assert "host gpu-07: nvidia_module_options.nvidia_uvm: must be a mapping of parameter to value, got 'x'" in output
    assert "host gpu-07: sglang_api_key: must not contain control characters or newlines (found a newline), got <hidden>" in output
    assert ("host gpu-07: pcie_max_read_requst: no role declares this variable; did you mean pcie_max_read_request?"
            in output)
    assert "argument_spec" not in output


def test_action_plugin_refuses_the_control_node(tmp_path):
    result = run_playbook(tmp_path, allow_control_node=False)
    output = result.stdout + result.stderr
    assert result.returncode != 0 and "Traceback" not in output
    assert ("host gpu-07: is the control node (it is reached with connection local, on the control node itself);"
            " set infertune_allow_control_node: true to tune it") in output


def test_action_plugin_takes_string_booleans_and_refuses_junk(tmp_path):
    passed = run_playbook(tmp_path, "-e", "sglang_service_started=false", "-e", "benchmark_floor=YES")
    assert passed.returncode == 0, passed.stdout + passed.stderr
    refused = run_playbook(tmp_path, "-e", "sglang_service_started=y")
    assert refused.returncode != 0
    assert ("host gpu-07: sglang_service_started: %s, got 'y'" % validation.BOOL_RULE) in refused.stdout


def test_action_plugin_roles_option_and_bad_template(tmp_path):
    result = run_playbook(tmp_path, "-e", '{"check_roles": ["benchmark"]}', "-e", "sglang_port=0",
                          "-e", "benchmark_trials={{ undefined_thing }}")
    output = result.stdout + result.stderr
    assert result.returncode != 0 and "Traceback" not in output
    assert "host gpu-07: benchmark_trials: cannot be templated" in output
    assert "sglang_port" not in output


FLEET_PLAYBOOK = """
- name: Plan
  hosts: gpu_nodes
  gather_facts: false
  vars:
    sglang_port: "{{ port_of_the_play }}"
  tasks:
    - name: Check every infertune variable, once for the play's hosts
      infertune.fleet.infertune_validate:
        hosts: "{{ ansible_play_hosts }}"
      run_once: true
      any_errors_fatal: true
    - name: Reached only when every host's input is good
      ansible.builtin.debug:
        msg: "REACHED {{ inventory_hostname }}"
"""

# Each host's own problem: an inventory value (gpu-05), a play variable templated with a host's
# variable (gpu-09's port_of_the_play), a group's value (gpu-09 alone is in group big).
FLEET_INVENTORY = """
all:
  children:
    gpu_nodes:
      hosts:
        gpu-01: {ansible_connection: local, port_of_the_play: 30000}
        gpu-05: {ansible_connection: local, port_of_the_play: 30000, pcie_max_read_request: 3000}
        gpu-09: {ansible_connection: local, port_of_the_play: 0}
    big:
      hosts:
        gpu-09:
      vars:
        gpu_gate_expected_count: 2000
"""


def run_fleet(tmp_path, *extra):
    return controller_play.run(tmp_path, FLEET_PLAYBOOK, FLEET_INVENTORY, *extra)


def test_one_task_checks_every_host_with_its_own_variables(tmp_path):
    rc, out = run_fleet(tmp_path)
    assert rc != 0 and "Traceback" not in out, out
    assert "host gpu-05: pcie_max_read_request: must be one of 128, 256, 512, 1024, 2048, 4096, got 3000" in out, out
    assert "host gpu-09: sglang_port: must be 1-65535, got 0" in out, out
    assert "host gpu-09: gpu_gate_expected_count: must be 1-1024, got 2000" in out, out
    assert "host gpu-01:" not in out, out
    # A failed run-once check ends every host: none reaches the next task.
    assert "REACHED gpu-" not in out, out
    rc, out = run_fleet(tmp_path, "--limit", "gpu-01")
    assert rc == 0 and "REACHED gpu-01" in out, out


# ---------------------------------------------------------------------------- docs/hostile-input.md

HOSTILE_DOC = REPO / "docs" / "hostile-input.md"
HOSTILE_HEAD = """# Hostile input and what it gets

Every input below was given to `infertune_validate` (the plan's first task, on the control node,
before any host is touched) by `tests/unit/test_validation.py`; the message is what the run
prints, one line per problem (here for a host named `gpu-07`). Secret values
(`sglang_api_key`, `sglang_secret_environment`) are never shown. Regenerate this file with
`PYTHONPATH=. .venv/bin/python tests/unit/test_validation.py`; a unit test fails when it is out of date.

Rules live in these places only: type, `elements`, `choices` and defaults in
`roles/*/meta/argument_specs.yml` (the rollout shape in `playbooks/meta/argument_specs.yml`, from
which `playbooks/vars/rollout.yml` is generated); ranges, character sets and per-element rules of a variable a knob
reads in that knob's catalog entry (`rules` in `roles/infertune/vars/main.yml`, naming the
rule makers of `MAKERS` in `infertune/rules.py`), those of the other variables in `RULES`
of `infertune/rules.py`. The variable tables of `docs/variables.md` are generated from them.

Decisions:

- `%` and `\\` are refused in `sglang_served_model_name` rather than escaped: it reaches the unit's
  `Description=`, where systemd expands `%` specifiers and `\\` escapes.
- A newline or any other control character (also tabs, Unicode format characters such as
  U+202E and line separators) is refused in every variable, at any depth, in keys too; the
  other rules of that variable are checked once it is gone.
- Lists must be lists and mappings mappings: Ansible's own argument spec would split `"a,b"`
  into a list, but the tasks use the variable as given.
- Integers given as strings (`-e sglang_port=30000`) are accepted, as Ansible accepts them;
  booleans are not integers.
- Booleans take exactly what Ansible's `bool` filter maps: true/false, yes/no, on/off, 1/0 in
  any case (so `-e sglang_service_started=false` works), real booleans and the integers 0 and 1;
  `y`, `t`, `" true"` or `2`, which the filter would only coerce with a warning, are refused. The
  roles read every boolean through `| bool`.
- `sglang_extra_args` refuses `--api-key`, `--admin-api-key`, `--config`, their `=` forms, `_`
  spellings and abbreviations argparse would expand (`--api`).

| variable | input | message |
| --- | --- | --- |
"""


def _cell(text):
    return "`%s`" % text.replace("|", "\\|") if text else ""


def _input_text(value):
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 200:
        return "10 ** 5000" if value == 10 ** 5000 else rules.show(value)
    if isinstance(value, str) and len(value) > 60 and len(set(value)) == 1:
        return "%r * %d" % (value[0], len(value))
    text = repr(value)
    return text if len(text) <= 70 else text[:67] + "..."


def hostile_doc():
    lines = [HOSTILE_HEAD.rstrip("\n")]
    for name, value, _ in HOSTILE:
        messages = "<br>".join(_cell(line) for line in validation.report({name: value}, host="gpu-07"))
        lines.append("| `%s` | %s | %s |" % (name, _cell(_input_text(value)), messages))
    typo = validation.report({"pcie_max_read_requst": 4096}, host="gpu-07")[0]
    lines.append("| `pcie_max_read_requst` | `4096` | %s |" % _cell(typo))
    return "\n".join(lines) + "\n"


def test_hostile_input_doc_is_current():
    assert HOSTILE_DOC.read_text() == hostile_doc(), "run PYTHONPATH=. .venv/bin/python tests/unit/test_validation.py"


if __name__ == "__main__":
    HOSTILE_DOC.write_text(hostile_doc())


# ---------------------------------------------------------------------------- the run's catalog

# A catalog whose sysctl entry asks more than the shipped one: its file must end in .cfg.
STRICTER = [{"name": "sysctl", "rules": {"sysctl_file": [{"file_suffix": [".cfg"]}]}}]


def test_the_rules_come_from_the_catalog_the_run_read():
    """One reading of the catalog per run: the input check takes the rules from the catalog
    Ansible read (infertune_knobs) where the play has it, the file only where it has not."""
    values = {"sysctl_file": "/etc/sysctl.d/60-infertune-numa.conf"}
    assert validation.validate(values) == []
    found = validation.validate(values, catalog=STRICTER)
    assert [p.variable for p in found] == ["sysctl_file"]
    # Its other entries' rules are the run's catalog's too: none here.
    assert validation.validate({"kernel_package": "Bad Name!"}, roles=["kernel"], catalog=STRICTER) == []
    assert validation.validate({"kernel_package": "Bad Name!"}, roles=["kernel"]) != []


def test_action_plugin_checks_against_the_plays_catalog(tmp_path):
    catalog = tmp_path / "catalog.yml"
    catalog.write_text(json.dumps({"infertune_knobs": STRICTER}))
    refused = run_playbook(tmp_path, "-e", f"@{catalog}", "-e", "sysctl_file=/etc/sysctl.d/60-infertune-numa.conf")
    assert refused.returncode != 0
    assert "host gpu-07: sysctl_file: " in refused.stdout, refused.stdout[-2000:]
    assert run_playbook(tmp_path, "-e", "sysctl_file=/etc/sysctl.d/60-infertune-numa.conf").returncode == 0
