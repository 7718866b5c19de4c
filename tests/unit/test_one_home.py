"""One home for each fact: the rollout's stages are told in docs/site.md alone (the other pages and
the task files' headers point there), NVIDIA's vendor id and GPU classes are constants of pcie.py
(every module and plugin takes them from there), and docs/variables.md lists the roles in the
knob catalog's order rather than a list of its own."""
import ast
import re

from fakehost import REPO
from infertune import docs_knobs, docs_vars

# Two stages of the rollout told one after the other, as a restated pipeline does.
SEQUENCE = re.compile(r"drain\s*(?:->|→|\]\s*->)\s*\[?\s*reboot", re.I)


def test_the_rollouts_stages_are_told_in_one_place():
    told = []
    for path in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), *sorted((REPO / "roles").rglob("*.yml")),
                 *sorted((REPO / "playbooks").rglob("*.yml"))]:
        if SEQUENCE.search(path.read_text()):
            told.append(str(path.relative_to(REPO)))
    assert told == ["docs/site.md"]


def code_constants(path):
    """String constants of a module's code, its documentation blocks (DOCUMENTATION, EXAMPLES, RETURN) left out."""
    tree = ast.parse(path.read_text())
    docs = {id(node.value) for node in tree.body if isinstance(node, ast.Assign)
            and any(getattr(t, "id", "") in ("DOCUMENTATION", "EXAMPLES", "RETURN") for t in node.targets)}
    return [node.value for node in ast.walk(tree) if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and id(node) not in docs]


def test_nvidias_vendor_id_and_gpu_classes_are_written_once_in_code():
    found = [str(path.relative_to(REPO)) for top in ("plugins", "infertune") for path in sorted((REPO / top).rglob("*.py"))
             if any(c.lower() in ("0x10de", "0x0302") for c in code_constants(path))]
    assert found == ["plugins/module_utils/infertune_node/pcie.py"]


def test_variables_md_follows_the_catalogs_role_order():
    catalog_roles = list(dict.fromkeys(entry["role"] for entry in docs_knobs.entries()))
    roles = docs_vars.order({r: None for r in catalog_roles + ["gpu_gate", "report", "infertune", "rollout"]})
    assert roles[:len(catalog_roles)] == catalog_roles and roles[-2:] == ["infertune", "rollout"]
    assert not hasattr(docs_vars, "ORDER")


def test_the_design_maps_files_exist():
    """docs/design.md's map names the file that owns each step: every path it names is there."""
    text = (REPO / "docs" / "design.md").read_text()
    section = text[text.index("## Map"):text.index("## Layers")]
    named = {p for p in re.findall(r"`([\w./<>*-]+\.(?:py|yml|md))`", section) if "<" not in p and "*" not in p}
    short = {p for p in named if "/" not in p}  # a module of infertune_node, named after its package
    missing = [p for p in named - short if not (REPO / p).exists()]
    missing += [p for p in short if not (REPO / "plugins/module_utils/infertune_node" / p).exists()]
    assert len(named) > 15 and missing == []
