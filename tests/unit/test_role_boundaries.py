"""Roles talk through published results (issue 23): a role's registers and internal facts are its
own (__<role>_<name>), no role, playbook or plugin reads another role's, the run's record
(infertune_reached, infertune_results, infertune_failure, infertune_gpus) is written through
infertune.fleet.infertune_publish only, and no var-naming suppression is left to hide a breach.
A static scan of the files as they are."""
import os
import re
from pathlib import Path

import yaml

from infertune import publish
from infertune.host_plan import PUBLISHED as PLAN_PUBLISHED

REPO = Path(__file__).resolve().parents[2]
ROLES = sorted(p.name for p in (REPO / "roles").iterdir() if (p / "meta").is_dir())
# Registers another role or the plan genuinely reads, documented as the role's outputs
# (docs/design.md, "What the roles publish"): what sglang's files and checks read the installed release,
# the backend verdict and the command-line check from, which the plan publishes too.
PUBLISHED_REGISTERS = {"sglang_support", "sglang_argv_check"}
INTERNAL = re.compile(r"(?<![\w.])__([a-z][a-z0-9_]*[a-z0-9])(?![\w(])")
PUBLISH = "infertune.fleet.infertune_publish"
SET_FACT = ("ansible.builtin.set_fact", "set_fact")


def files(*roots, suffixes=(".yml", ".yaml", ".j2")):
    """The project's files under each root; "." is the top level alone (site.yml), never the
    untracked trees beside it (an installed copy of the collection); the lab's state (its
    images' file trees) is not walked."""
    for root in roots:
        if root == ".":
            found = [p for p in REPO.glob("*") if p.is_file()]
        else:
            found = []
            for top, dirs, names in os.walk(REPO / root):
                dirs[:] = [d for d in dirs if d != ".state"]
                found += [Path(top) / n for n in names]
        for path in sorted(found):
            if path.suffix in suffixes:
                yield path


def owner(name):
    """The role whose prefix `name` (without its leading underscores) carries: the longest match."""
    matches = [role for role in ROLES if name.startswith(role + "_")]
    return max(matches, key=len) if matches else None


def tasks(node):
    """Every task mapping in a task file, blocks' and rescues' included."""
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, dict):
            for key in ("block", "rescue", "always"):
                stack.extend(item.get(key) or [])
            if not any(k in item for k in ("block", "rescue", "always")):
                yield item


def task_files(*roots):
    for path in files(*roots, suffixes=(".yml",)):
        if "tasks" in path.parts or "handlers" in path.parts or path.parent.name == "playbooks" or path.parent == REPO:
            data = yaml.safe_load(path.read_text())
            if isinstance(data, list):
                yield path, data


def test_no_var_naming_suppression_is_left():
    found = [f"{p.relative_to(REPO)}:{n}" for p in files("roles", "playbooks", suffixes=(".yml", ".yaml"))
             for n, line in enumerate(p.read_text().splitlines(), 1) if "noqa: var-naming" in line]
    assert found == []


def test_every_register_is_internal_to_its_role_or_a_documented_output():
    bad = []
    for path, data in task_files("roles"):
        role = path.relative_to(REPO / "roles").parts[0]
        for task in tasks(data):
            name = task.get("register")
            if name and name not in PUBLISHED_REGISTERS and not (name.startswith("__") and owner(name[2:]) == role):
                bad.append(f"{path.relative_to(REPO)}: register {name}")
    assert bad == []


def test_documented_outputs_are_documented():
    design = (REPO / "docs" / "design.md").read_text()
    section = design[design.index("## What the roles publish\n"):]
    for name in sorted(PUBLISHED_REGISTERS | set(publish.NAMES)):
        assert f"`{name}`" in section, name


def test_no_role_playbook_or_plugin_reads_another_roles_internals():
    bad = []
    for path in files("roles"):
        role = path.relative_to(REPO / "roles").parts[0]
        for n, line in enumerate(path.read_text().splitlines(), 1):
            for name in INTERNAL.findall(line):
                if owner(name) != role:
                    bad.append(f"{path.relative_to(REPO)}:{n}: __{name}")
    # Outside the roles nothing reads a role's internals: playbooks, plugins, the engine.
    for path in list(files("playbooks", "lab", "bench", suffixes=(".yml", ".yaml", ".j2"))) + list(
            files("plugins", "infertune", suffixes=(".py",))) + [REPO / "site.yml"]:
        for n, line in enumerate(path.read_text().splitlines(), 1):
            for name in INTERNAL.findall(line):
                if owner(name):
                    bad.append(f"{path.relative_to(REPO)}:{n}: __{name}")
    assert bad == []


def test_the_runs_record_is_written_through_infertune_publish_only():
    """A set_fact of a record's name would outrank every later publication (add_host's host
    variables); a publication needs changed_when: false (the strategy calls a host whose
    variables it set changed)."""
    bad = []
    for path, data in task_files("roles", "playbooks", "."):
        for task in tasks(data):
            for key in SET_FACT:
                if isinstance(task.get(key), dict) and set(task[key]) & set(publish.NAMES):
                    bad.append(f"{path.relative_to(REPO)}: {task.get('name')}: set_fact {sorted(set(task[key]) & set(publish.NAMES))}")
            if PUBLISH in task and task.get("changed_when") is not False:
                bad.append(f"{path.relative_to(REPO)}: {task.get('name')}: infertune_publish without changed_when: false")
    assert bad == []


def test_the_scan_sees_what_it_must_refuse():
    """The scans' own parts find a breach: another role's internal, a register without its prefix."""
    assert owner("kernel_reboot_result") == "kernel_reboot" and owner("kernel_install") == "kernel"
    assert owner("sglang_drain_unit") == "sglang" and owner("foo_bar") is None
    assert INTERNAL.findall("{{ __kernel_install is changed and x.__class__ and __sglang_x.y }}") == [
        "kernel_install", "sglang_x"]
    nested = [{"block": [{"name": "a", "register": "x"}], "rescue": [{"name": "b"}]}]
    assert [t["name"] for t in tasks(nested)] == ["b", "a"]


# The engine's names another role may read: the run's record and the plan's published variables
# (roles talk through these), the groups the runs fill, and the collection's plugins by name.
ENGINE_OUTPUTS = set(publish.NAMES) | set(PLAN_PUBLISHED) | {
    "infertune_pending", "infertune_converged", "infertune_verify_failed", "infertune_drift_unread"}
ENGINE_NAME = re.compile(r"(?<![\w./])(infertune_[a-z][a-z0-9_]*)(?![\w.])")


def engine_reads(text):
    """The engine's names a role file's text reads, comments and the plugins' FQCNs left out."""
    code = "\n".join(line.split("#", 1)[0] if not line.lstrip().startswith("{#") else "" for line in text.splitlines())
    code = re.sub(r"infertune\.fleet\.\w+", "", code)
    return sorted({name for name in ENGINE_NAME.findall(code) if name not in ENGINE_OUTPUTS})


def test_no_role_reads_the_engines_variables_back():
    """The engine passes a role what it needs as the role's parameters; a role that read the
    engine's own variables (its catalog, its selection, its gate's options) would close a circle."""
    bad = [f"{path.relative_to(REPO)}: {', '.join(engine_reads(path.read_text()))}"
           for path in files("roles") if path.relative_to(REPO / "roles").parts[0] != "infertune"
           and engine_reads(path.read_text())]
    assert bad == []
    assert engine_reads("x: \"{{ infertune_selected_knobs | first }}\"  # infertune_knobs\nname: infertune.fleet.knob\n"
                        "y: '{{ infertune_results.drain }}'") == ["infertune_selected_knobs"]


def test_every_role_runs_its_main_or_says_it_is_none_to_run():
    """A role in a play's roles runs its tasks/main.yml: none that silently does nothing."""
    for role in ROLES:
        main = REPO / "roles" / role / "tasks" / "main.yml"
        assert main.exists(), role
        tasks_ = list(tasks(yaml.safe_load(main.read_text())))
        assert tasks_, role
        spec = yaml.safe_load((REPO / "roles" / role / "meta" / "argument_specs.yml").read_text())["argument_specs"]
        assert "main" in spec, f"{role}: Ansible checks a role's arguments only for its main entry point"
    meta = {role: REPO / "roles" / role / "meta" / "main.yml" for role in ROLES}
    deps = {role: (yaml.safe_load(path.read_text()) or {}).get("dependencies") for role, path in meta.items()
            if path.exists()}
    assert {role: d for role, d in deps.items() if d} == {}, "a dependency runs its role's main"
