"""AWX / Automation Platform shapes on the lab, as AWX runs them (docs/awx.md): job slicing
gives each slice an inventory of its share of the hosts (sorted by name, taken round-robin) and
runs them as independent ansible-playbook processes; set_stats reaches the job's artifacts
through ansible-runner.

Any lab (the hosts as they are): nothing here changes a host.
"""
import json
import os
import subprocess

import ansible_runner
import pytest
import yaml

from helpers import BIN, ROOT, playbook, recap, state_digest

pytestmark = pytest.mark.lab

LAB = ROOT / "inventory" / "lab"
SLICES = 4
ENV = {"ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "PATH": f"{BIN}:{os.environ['PATH']}"}


def slice_inventory(directory, number, count=SLICES):
    """Slice `number` (1-based) of `count` of the lab inventory as AWX writes it: every group, holding
    only the slice's hosts; group_vars beside it as the lab's. Returns its hosts, sorted."""
    data = yaml.safe_load((LAB / "hosts.yml").read_text())
    group = data["all"]["children"]["gpu_nodes"]
    names = sorted(group["hosts"])[number - 1::count]
    group["hosts"] = {name: group["hosts"][name] for name in names}
    directory.mkdir(parents=True)
    (directory / "hosts.yml").write_text(yaml.safe_dump(data))
    (directory / "group_vars").symlink_to(LAB / "group_vars")
    return names


@pytest.fixture(scope="module")
def fleet(lab):
    return sorted(lab.hosts())


@pytest.fixture(scope="module")
def unsliced(fleet, tmp_path_factory):
    """site.yml --check on the whole lab through ansible-runner, as an unsliced AWX check job
    (awx_job_id 900) would run it: the run's events, its summary artifact among them."""
    base = tmp_path_factory.mktemp("unsliced")
    (base / "runner").mkdir()
    run = ansible_runner.run(private_data_dir=str(base / "runner"), playbook=str(ROOT / "site.yml"),
                             inventory=str(LAB), cmdline="--check", envvars=ENV, quiet=True,
                             extravars={"awx_job_id": 900, "report_dir": str(base / "reports")})
    stats = [e for e in run.events if e["event"] == "playbook_on_stats"]
    assert run.rc == 0 and len(stats) == 1, run.stdout.read()[-6000:]
    return stats[0]["event_data"]["artifact_data"]


def test_the_summary_reaches_ansible_runner_artifacts_keyed_by_the_awx_job(fleet, unsliced):
    assert list(unsliced) == ["infertune_summary_awx_900"]
    summary = unsliced["infertune_summary_awx_900"]
    assert summary["check_mode"] is True and summary["hosts"] == len(fleet)
    assert sum(summary["verdicts"].values()) == len(fleet)
    assert set(summary["pending"]) <= set(fleet)
    # A --check run drains and reboots nothing.
    assert summary["drained"] == [] and summary["rebooted"] == []


def test_four_check_slices_at_once_agree_with_the_unsliced_run(fleet, unsliced, tmp_path):
    slices = [(n, slice_inventory(tmp_path / f"slice{n}", n)) for n in range(1, SLICES + 1)]
    slices = [(n, hosts) for n, hosts in slices if hosts]  # fewer lab hosts than slices: AWX makes fewer
    procs = []
    for number, _ in slices:
        argv = [str(BIN / "ansible-playbook"), "site.yml", "--check", "-i", str(tmp_path / f"slice{number}"),
                "-e", f"report_dir={tmp_path / f'reports{number}'}", "-e", f"infertune_fleet_size={len(fleet)}",
                "-e", f"awx_job_id={900 + number}", "-e", "awx_workflow_job_id=900"]
        procs.append(subprocess.Popen(argv, cwd=ROOT, env=dict(os.environ, **ENV), stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True))
    outputs = [proc.communicate()[0] for proc in procs]
    for proc, out in zip(procs, outputs):
        assert proc.returncode == 0, out[-6000:]
    summaries = [json.loads((tmp_path / f"reports{n}" / "fleet.json").read_text()) for n, _ in slices]
    whole = unsliced["infertune_summary_awx_900"]
    merged = {}
    for summary in (s["run_summary"] for s in summaries):
        merged.update(summary["pending"])
    assert merged == whole["pending"]
    verdicts = {key: sum(s["run_summary"]["verdicts"][key] for s in summaries) for key in whole["verdicts"]}
    assert verdicts == whole["verdicts"]
    per_host = {host: entry["result"] for s in summaries for host, entry in s["hosts"].items()}
    assert sorted(per_host) == fleet
    assert {h: r for h, r in per_host.items() if r == "fail"}.keys() == whole["failed"].keys()


def test_a_sliced_apply_without_a_budget_is_refused_before_any_change(fleet, tmp_path):
    hosts = slice_inventory(tmp_path / "slice1", 1)
    before = {h: state_digest(h) for h in hosts}
    awx = ["-e", "awx_job_id=911", "-e", "awx_workflow_job_id=910"]
    rc, out = playbook("site.yml", "-i", str(tmp_path / "slice1"), "-e", f"infertune_fleet_size={len(fleet)}", *awx)
    assert rc != 0
    for host in hosts:
        assert (f"host {host}: rollout_slice_max_failures: must be set for an apply on a slice of the fleet: the"
                f" inventory's gpu_nodes holds {len(hosts)} of the {len(fleet)} hosts") in out, out[-4000:]
    assert all(r["changed"] == 0 for r in recap(out).values()), out[-3000:]
    # Run by an AWX workflow without the fleet's size, an apply cannot tell a slice: it says what to set.
    rc, out = playbook("site.yml", "-i", str(tmp_path / "slice1"), *awx)
    assert rc != 0
    assert (f"host {hosts[0]}: infertune_fleet_size: must be set for an apply that an AWX workflow runs"
            f" (awx_workflow_job_id 910)") in out, out[-4000:]
    assert all(r["changed"] == 0 for r in recap(out).values()), out[-3000:]
    assert {h: state_digest(h) for h in hosts} == before


def test_an_upstream_summary_passed_on_by_a_workflow_is_accepted(fleet, unsliced, tmp_path):
    """The next node of an AWX workflow gets the earlier node's artifacts as extra variables."""
    extra = tmp_path / "artifacts.json"
    extra.write_text(json.dumps(unsliced))
    rc, out = playbook("site.yml", "--check", "--tags", "sysctl", "-e", f"@{extra}",
                       "-e", f"report_dir={tmp_path / 'r'}", "--limit", fleet[0])
    assert rc == 0 and "no role declares" not in out, out[-4000:]
    assert (tmp_path / "r" / "fleet.json").exists()
