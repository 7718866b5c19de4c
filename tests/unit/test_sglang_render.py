"""The sglang role's launch script, unit and environment files, rendered by Ansible's own templating.

The script is executed with a stand-in python that records its argv, so quoting
is proven by what a program actually receives, not by reading the text.
"""
import json
import os
import stat
import subprocess

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

from fakehost import REPO
from roletemplates import trusted

ROLE = REPO / "roles" / "sglang"
HOSTILE = ['/models/x"; touch /tmp/pwned; "', "/models/$(touch /tmp/pwned)"]
SECRET = "s3cr3t-'key\"$(touch /tmp/pwned)"


def role_vars(version="0.5.23", **overrides):
    values = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    values.update(yaml.safe_load((ROLE / "vars" / "main.yml").read_text()))
    values.update(overrides, sglang_support={"sglang_version": version}, ansible_managed="Ansible managed")
    return trusted(values)


def render(template, variables):
    """As the template action renders a file (it does not escape backslashes)."""
    templar = Templar(loader=DataLoader(), variables=variables)
    source = trust_as_template((ROLE / "templates" / template).read_text())
    return templar.template(source, escape_backslashes=False)


def argv(**kwargs):
    variables = role_vars(**kwargs)
    return Templar(loader=DataLoader(), variables=variables).template(trust_as_template("{{ sglang_argv }}"))


@pytest.fixture
def standin_python(tmp_path):
    """A 'python3' that writes the argv it received as JSON and starts nothing."""
    record = tmp_path / "argv.json"
    script = tmp_path / "python3"
    script.write_text("#!/usr/bin/python3\nimport json, sys\njson.dump(sys.argv[1:], open(%r, 'w'))\n" % str(record))
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script, record


def launch(tmp_path, script_text, env=None):
    """Run the script as sglang.service would; return RuntimeDirectory and what reached the journal."""
    path = tmp_path / "sglang-launch"
    path.write_text(script_text)
    runtime, logs = tmp_path / "run", tmp_path / "log"
    runtime.mkdir(exist_ok=True)
    logs.mkdir(exist_ok=True)
    full_env = {"PATH": os.environ["PATH"], "RUNTIME_DIRECTORY": str(runtime), "LOGS_DIRECTORY": str(logs),
                **(env or {})}
    proc = subprocess.run(["bash", str(path)], check=True, env=full_env, cwd=tmp_path, capture_output=True,
                          text=True)
    return runtime, proc.stdout + proc.stderr


def test_default_argv_is_the_seed_campaign():
    assert argv() == [
        "--model-path", "/models/GLM-5-NVFP4", "--served-model-name", "GLM-5-NVFP4", "--tp-size", "8",
        "--ep-size", "1", "--moe-runner-backend", "flashinfer_cutlass", "--quantization", "modelopt_fp4",
        "--kv-cache-dtype", "auto", "--host", "0.0.0.0", "--port", "30000",
        # The drain counts in-flight requests on /metrics.
        "--enable-metrics"]


@pytest.mark.parametrize("version, flags", [
    ("0.5.19", ["--cuda-graph-max-bs", "256", "--flashinfer-allreduce-fusion-backend", "auto"]),
    ("0.5.23", ["--cuda-graph-max-bs-decode", "256", "--flashinfer-allreduce-fusion-backend", "auto"]),
    ("0.5.10", ["--cuda-graph-max-bs", "256", "--enable-flashinfer-allreduce-fusion"]),
])
def test_renamed_flags_follow_the_installed_release(version, flags):
    rendered = argv(version=version, sglang_cuda_graph_max_bs=256, sglang_flashinfer_allreduce_fusion=True)
    assert rendered[-len(flags) - 1:-1] == flags


def test_script_passes_bash_n_and_hostile_values_arrive_as_single_arguments(tmp_path, standin_python):
    python, record = standin_python
    if os.path.exists("/tmp/pwned"):
        os.remove("/tmp/pwned")
    extra = ["--chat-template", "it's a 'template' with $HOME and `id`"]
    script = render("sglang-launch.sh.j2", role_vars(
        sglang_model_path=HOSTILE[0], sglang_served_model_name=HOSTILE[1], sglang_extra_args=extra,
        sglang_python=str(python)))
    (tmp_path / "check.sh").write_text(script)
    subprocess.run(["bash", "-n", str(tmp_path / "check.sh")], check=True)
    assert script.startswith("#!/usr/bin/env bash\n") and "set -euo pipefail" in script

    launch(tmp_path, script)
    received = json.loads(record.read_text())
    assert received[:2] == ["-m", "sglang.launch_server"]
    assert received[2:6] == ["--model-path", HOSTILE[0], "--served-model-name", HOSTILE[1]]
    assert received[-2:] == extra
    assert not os.path.exists("/tmp/pwned")


def test_api_key_reaches_sglang_through_a_private_config_not_argv(tmp_path, standin_python):
    python, record = standin_python
    script = render("sglang-launch.sh.j2", role_vars(sglang_python=str(python)))
    runtime, _ = launch(tmp_path, script, env={"INFERTUNE_SGLANG_API_KEY": SECRET})
    received = json.loads(record.read_text())
    config = runtime / "secret-args.yaml"
    assert received[-2:] == ["--config", str(config)]
    assert not any(SECRET in arg for arg in received)
    assert yaml.safe_load(config.read_text()) == {"api-key": SECRET}
    assert stat.S_IMODE(config.stat().st_mode) == 0o600
    assert not os.path.exists("/tmp/pwned")


def test_server_output_goes_to_a_root_only_log_file_not_the_journal(tmp_path):
    """sglang prints its server_args (API key included) at startup: stdout and stderr of the
    unit reach the journal, so the server's output must land in the private log file only."""
    talker = tmp_path / "python3"  # prints the config it was given, as sglang prints server_args
    talker.write_text('#!/bin/sh\nfor a; do last=$a; done\necho "server_args: $(cat "$last")"\necho oops >&2\n')
    talker.chmod(0o755)
    _, journal = launch(tmp_path, render("sglang-launch.sh.j2", role_vars(sglang_python=str(talker))),
                        env={"INFERTUNE_SGLANG_API_KEY": "canary-key"})
    log = tmp_path / "log" / "server.log"
    assert journal == f"sglang output: {log}\n"
    assert "canary-key" in log.read_text() and "oops" in log.read_text()
    assert stat.S_IMODE(log.stat().st_mode) == 0o600


def test_unit_gives_the_server_a_private_log_directory_that_logrotate_rotates():
    unit = render("sglang.service.j2", role_vars()).splitlines()
    assert "LogsDirectory=sglang" in unit and "LogsDirectoryMode=0700" in unit
    assert 'log="${LOGS_DIRECTORY:?set by systemd LogsDirectory=}/server.log"' in render(
        "sglang-launch.sh.j2", role_vars())
    rotate = render("sglang.logrotate.j2", role_vars())
    assert "/var/log/sglang/server.log {" in rotate.splitlines() and "    copytruncate" in rotate.splitlines()


def test_without_api_key_no_config_is_written(tmp_path, standin_python):
    python, record = standin_python
    runtime, _ = launch(tmp_path, render("sglang-launch.sh.j2", role_vars(sglang_python=str(python))))
    assert "--config" not in json.loads(record.read_text())
    assert list(runtime.iterdir()) == []


def test_unit_orders_after_tuning_restarts_on_failure_and_holds_no_secret():
    variables = role_vars(sglang_api_key=SECRET, sglang_secret_environment={"HF_TOKEN": "hf_secret"})
    unit = render("sglang.service.j2", variables)
    lines = unit.splitlines()
    assert "After=network-online.target infertune-tune.service" in lines
    assert "Restart=on-failure" in lines
    assert "ExecStart=/usr/local/sbin/sglang-launch" in lines
    assert "EnvironmentFile=/etc/sglang/secrets.env" in lines
    assert SECRET not in unit and "hf_secret" not in unit
    script = render("sglang-launch.sh.j2", variables)
    assert SECRET not in script and "hf_secret" not in script


def test_nccl_defaults_for_pcie_hosts_are_overridable():
    lines = render("sglang.env.j2", role_vars()).splitlines()
    assert 'NCCL_P2P_LEVEL="SYS"' in lines
    lines = render("sglang.env.j2", role_vars(sglang_environment={"NCCL_P2P_LEVEL": "PHB"})).splitlines()
    assert 'NCCL_P2P_LEVEL="PHB"' in lines and 'NCCL_P2P_LEVEL="SYS"' not in lines
    assert "NCCL_P2P_LEVEL" not in render("sglang.env.j2", role_vars(sglang_nccl_environment={}))


def test_secrets_go_only_to_the_root_only_file():
    variables = role_vars(sglang_api_key=SECRET, sglang_secret_environment={"HF_TOKEN": "hf_secret"},
                          sglang_environment={"SGLANG_ENABLE_PCIE_IPC_ALLREDUCE": "1"})
    public = render("sglang.env.j2", variables)
    secrets = render("secrets.env.j2", variables)
    assert 'SGLANG_ENABLE_PCIE_IPC_ALLREDUCE="1"' in public.splitlines()
    assert SECRET not in public and "hf_secret" not in public
    assert 'HF_TOKEN="hf_secret"' in secrets.splitlines()
    # systemd's EnvironmentFile unescapes \" and \\ inside double quotes.
    assert 'INFERTUNE_SGLANG_API_KEY="s3cr3t-\'key\\"$(touch /tmp/pwned)"' in secrets.splitlines()

    tasks = {task["name"]: task for task in yaml.safe_load((ROLE / "tasks" / "install.yml").read_text())}
    assert tasks["Write the secrets to a file only root can read"]["no_log"] is True
    role = yaml.safe_load((ROLE / "vars" / "main.yml").read_text())
    assert [f["mode"] for f in role["sglang_secret_files"]] == ["0600"]
    public_files = role["sglang_files"]
    assert all("secrets" not in f["content"] for f in public_files)
    assert {f["path"]: f.get("mode", "0644") for f in public_files}["{{ sglang_env_file }}"] == "0644"
