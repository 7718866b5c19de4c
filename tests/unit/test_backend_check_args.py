"""The MoE backend check's arguments are defined once (the sglang role's sglang_backend_check):
the sglang role's check.yml and the plan (the catalog's infertune_backend_check) pass the same."""
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

from fakehost import REPO
from roletemplates import trusted

GPUS = [{"index": 0, "compute_capability": "12.0"}]


def variables(**overrides):
    values = {}
    for path in ("roles/sglang/defaults/main.yml", "roles/sglang/vars/main.yml", "roles/infertune/vars/main.yml"):
        values.update(yaml.safe_load((REPO / path).read_text()))
    values.update(overrides, inventory_hostname="gpu-a", infertune_gpus=GPUS)
    return trusted(values)


def render(text, values):
    return Templar(loader=DataLoader(), variables=values).template(trust_as_template(text))


def test_check_yml_and_the_plan_judge_the_backend_with_the_same_arguments():
    tasks = yaml.safe_load((REPO / "roles/sglang/tasks/check.yml").read_text())
    judge = next(t for t in tasks if t["name"] == "Judge the MoE runner backend on these GPUs")
    args = judge["infertune.fleet.moe_backend_support"]
    values = variables(sglang_moe_runner_backend="flashinfer_cutedsl", sglang_flashinfer_allreduce_fusion="false")
    from_plan = render("{{ infertune_backend_check }}", values)
    assert (from_plan["backend"], from_plan["allreduce_fusion"]) == ("flashinfer_cutedsl", False)
    assert {key: render(text, values) for key, text in args.items()} == dict(from_plan, gpus=GPUS, host="gpu-a")
    # One definition: what it says (here changed as an inventory could) is what both pass.
    values = variables(sglang_backend_check={"venv": "/opt/v", "backend": "triton", "quantization": "fp8",
                                             "matrix": [], "kernels": {}, "allreduce_fusion": True})
    assert {key: render(text, values) for key, text in args.items()} == dict(
        render("{{ infertune_backend_check }}", values), gpus=GPUS, host="gpu-a") == dict(
        values["sglang_backend_check"], gpus=GPUS, host="gpu-a")
