"""docs/adding-a-knob.md lists the files a new kind of knob is written in, and every knob of the
catalog has what it needs from exactly those: a kind module (KIND, in the generated registry), a
catalog entry with its label, stage, verification and rules, declared variables, a unit test
importing the kind's module, and its verification (its kind's own, or a test of tests/verify)."""
import re

import pytest
from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node.kinds import KINDS
from fakehost import REPO

from infertune import docs_knobs, registry, rules, specs

# The numbered items of docs/adding-a-knob.md, each naming the file it is about first: all a new
# kind of knob is written in (the registry, the defaults and the docs' tables are generated).
FILES = ["plugins/module_utils/infertune_node/<kind>.py", "roles/infertune/vars/main.yml",
         "roles/<role>/meta/argument_specs.yml", "tests/unit/test_<kind>.py"]
STAGES = ("boot", "runtime", "persist", "service")
CATALOG = docs_knobs.entries()
UNIT_TESTS = [path.read_text() for path in sorted((REPO / "tests" / "unit").glob("test_*.py"))]
# tests/verify's checks, and test_<kind> for each kind that verifies itself (tests/verify/test_kinds.py).
VERIFY_TESTS = set(re.findall(r"^def test_(\w+)\(", "".join(
    path.read_text() for path in (REPO / "tests" / "verify").glob("test_*.py")), re.M)) | {
        kind.name for kind in KINDS.values() if kind.observe and kind.judge}


def section():
    return (REPO / "docs" / "adding-a-knob.md").read_text()


def apply_modules(module):
    """The infertune_node module that defines the kind, by the registry."""
    return [KINDS[module].apply.__module__.rsplit(".", 1)[-1]]


def unit_tested(code, module, unit_tests):
    """Whether a unit test imports one of the code's modules, or runs module through knobs.run."""
    for text in unit_tests:
        found = set(re.findall(r"infertune_node\.(\w+) import", text))
        for names in re.findall(r"infertune_node import \(?([\w, \n]+)\)?", text):
            found |= {n.strip() for n in names.split(",") if n.strip()}
        if set(code) & found or (re.search(r"knobs\.(run|predict)\(", text) and '"%s"' % module in text):
            return True
    return False


def variables_named(value):
    """Variables with a role's prefix that the entry's Jinja reads."""
    text = repr(value)
    marks = specs.prefixes()
    return {name for expression in re.findall(r"\{\{(.*?)\}\}", text)
            for name in re.findall(r"[A-Za-z_]\w*", expression) if name.startswith(marks)}


def needs(entry, declared=None, internal=None, tests=None, unit_tests=None):
    """What the entry lacks from the files docs/adding-a-knob.md lists, one line each."""
    declared = specs.declared() if declared is None else declared
    internal = specs.internal_names() if internal is None else internal
    name, missing = entry.get("name", "?"), []
    # 1. its kind: a module of infertune_node that defines KIND, in the generated registry
    if entry.get("module") not in KINDS:
        missing.append("%s: module %s is no kind of infertune_node/kinds.py" % (name, entry.get("module")))
        code = []
    else:
        code = apply_modules(entry["module"])
    # 2. the catalog entry
    for key in ("label", "role", "stage", "verify", "doc"):
        if not entry.get(key):
            missing.append("%s: no %s" % (name, key))
    if entry.get("stage") and entry["stage"] not in STAGES:
        missing.append("%s: stage %s is none of %s" % (name, entry["stage"], ", ".join(STAGES)))
    # Whether its change, applied live, disturbs a serving host: declared by every runtime knob, with the reason.
    if entry.get("stage") == "runtime" and not isinstance(entry.get("drain"), bool):
        missing.append("%s: a runtime knob without drain: true or false" % name)
    if "drain" in entry and not (entry.get("doc") or {}).get("drain"):
        missing.append("%s: drain without its reason (doc.drain)" % name)
    own = {v for v, option in declared.items() if option.role == entry.get("role")}
    for variable in entry.get("rules") or {}:
        if variable not in own:
            missing.append("%s: rules for %s, which role %s does not declare" % (name, variable, entry.get("role")))
    # 3. the argument spec declares every variable it reads
    for variable in sorted(variables_named({k: v for k, v in entry.items() if k not in ("doc", "rules")})):
        if variable not in declared and variable not in internal:
            missing.append("%s: reads %s, which no argument spec declares" % (name, variable))
    # 4. a unit test of its apply code
    if code and not unit_tested(code, entry["module"], UNIT_TESTS if unit_tests is None else unit_tests):
        missing.append("%s: no unit test imports %s or runs %s" % (name, " or ".join(code), entry["module"]))
    # its verification: its kind's own, or tests/verify's
    for test in entry.get("verify") or ():
        if test not in (VERIFY_TESTS if tests is None else tests):
            missing.append("%s: no test_%s in tests/verify, nor a kind %s that verifies itself" % (name, test, test))
    return missing


def test_the_section_lists_the_files():
    items = re.findall(r"^\d+\. `([^`]+)`", section(), re.M)
    assert items == FILES
    for command in ("registry", "role_defaults", "docs_knobs", "docs_vars"):
        assert "python -m infertune.%s --write" % command in section(), command


def test_the_registry_is_generated_from_the_kind_modules():
    assert (REPO / "plugins/module_utils/infertune_node/kinds.py").read_text() == registry.render(
        registry.kind_modules()), "run .venv/bin/python -m infertune.registry --write"
    assert set(KINDS) == {e["module"] for e in CATALOG}


@pytest.mark.parametrize("entry", CATALOG, ids=[e["name"] for e in CATALOG])
def test_every_knob_has_what_it_needs_from_those_files(entry):
    assert needs(entry) == []


def test_knob_variables_have_their_rules_in_the_catalog():
    read = set().union(*(variables_named(e.get("args")) for e in CATALOG))
    assert sorted(read & set(rules.RULES)) == []
    assert {v for e in CATALOG for v in e.get("rules") or {}} <= read


def test_the_docs_tables_cover_the_catalog():
    assert docs_knobs.check_rows()  # raises on a verification test no entry documents


def test_a_knob_missing_its_files_is_named():
    entry = {"name": "thp", "role": "sysctl", "stage": "later", "module": "thp",
             "args": {"mode": "{{ sysctl_thp | int }}"}, "verify": ["thp"],
             "rules": {"pcie_mrrs_vendor": ["non_empty"]}}
    assert needs(entry) == [
        "thp: module thp is no kind of infertune_node/kinds.py", "thp: no label", "thp: no doc",
        "thp: stage later is none of boot, runtime, persist, service",
        "thp: rules for pcie_mrrs_vendor, which role sysctl does not declare",
        "thp: reads sysctl_thp, which no argument spec declares",
        "thp: no test_thp in tests/verify, nor a kind thp that verifies itself"]
    numa = next(e for e in CATALOG if e["name"] == "sysctl")
    assert needs(numa, tests=set()) == ["sysctl: no test_sysctl in tests/verify, nor a kind sysctl that verifies itself"]
    assert needs(numa, unit_tests=['knobs.run("cpuidle_states", {})', 'knobs.predict([])\n"sysctl"']) == []
    assert needs(numa, unit_tests=['knobs.run("cpuidle_states", {})', '"sysctl"']) == [
        "sysctl: no unit test imports sysctl or runs sysctl"]
    assert apply_modules("kernel_cmdline") == ["cmdline"] and apply_modules("sysfs") == ["sysfs_attributes"]


def test_a_runtime_knob_says_whether_it_drains_and_why():
    numa = next(e for e in CATALOG if e["name"] == "sysctl")
    assert needs({k: v for k, v in numa.items() if k != "drain"}) == ["sysctl: a runtime knob without drain: true or false"]
    assert needs(dict(numa, doc={k: v for k, v in numa["doc"].items() if k != "drain"})) == [
        "sysctl: drain without its reason (doc.drain)"]
