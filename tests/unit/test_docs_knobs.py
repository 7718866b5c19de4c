"""The README's knob table and docs/verification.md's check table are generated from the catalog."""
import ast
import subprocess
import sys

import pytest

from fakehost import REPO
from infertune import docs_knobs, report

CATALOG = docs_knobs.entries()


def verify_tests():
    """The test functions of tests/verify (test_x -> x), read without importing testinfra, and the
    test_<kind> that tests/verify/test_kinds.py makes for each kind that verifies itself."""
    from infertune_node.kinds import KINDS

    return [node.name[len("test_"):] for path in sorted((REPO / "tests" / "verify").glob("test_*.py"))
            for node in ast.parse(path.read_text()).body
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")] + [
        kind.name for kind in KINDS.values() if kind.observe and kind.judge]


@pytest.mark.parametrize("path", [docs_knobs.README, docs_knobs.VERIFICATION], ids=lambda p: p.name)
def test_documents_are_generated(path):
    start, end, generated = docs_knobs.sections()[path]
    text = path.read_text()
    assert start in text and end in text
    assert docs_knobs.docsection.rewrite(text, generated, start, end) == text, (
        "%s's table is out of date: run .venv/bin/python -m infertune.docs_knobs --write" % path.name)


def test_check_command_finds_and_fixes_a_stale_table(tmp_path):
    readme, verification = tmp_path / "README.md", tmp_path / "verification.md"
    readme.write_text("# x\n\n%s\n| stale |\n%s\n\nmore\n" % (docs_knobs.KNOBS_START, docs_knobs.KNOBS_END))
    verification.write_text(docs_knobs.check_table() + "\n")
    command = [sys.executable, "-m", "infertune.docs_knobs", "--readme", str(readme), "--verification", str(verification)]
    stale = subprocess.run(command + ["--check"], cwd=REPO, capture_output=True, text=True)
    assert stale.returncode == 1 and "README.md" in stale.stdout and "verification.md" not in stale.stdout
    assert subprocess.run(command + ["--write"], cwd=REPO, capture_output=True).returncode == 0
    assert subprocess.run(command + ["--check"], cwd=REPO, capture_output=True).returncode == 0
    text = readme.read_text()
    assert text.startswith("# x\n\n" + docs_knobs.KNOBS_START) and text.endswith(docs_knobs.KNOBS_END + "\n\nmore\n")
    assert ("| `kernel.numa_balancing=0` (`sysctl_settings`: any sysctl, from inventory alone) | `sysctl -w` |"
            " `/etc/sysctl.d/60-infertune-numa.conf` | applied live: `sysctl -w` sets") in text


def test_knob_rows_show_the_defaults_of_the_variables_they_name():
    entry = {"name": "thp", "doc": {"knob": "THP `${mode}` (${nodes})", "now": "sysfs", "boot": "${opts}"}}
    table = docs_knobs.knob_table([entry], {"mode": "never", "nodes": [0, 1], "opts": {"m": {"p": 1}}})
    assert "| THP `never` (0 1) | sysfs | m p=1 | not drained |" in table.splitlines()
    live = dict(entry, stage="runtime", drain=False, doc=dict(entry["doc"], drain="a sysfs write, ${mode}"))
    assert "| THP `never` (0 1) | sysfs | m p=1 | applied live: a sysfs write, never |" in docs_knobs.knob_table(
        [live], {"mode": "never", "nodes": [0, 1], "opts": {"m": {"p": 1}}}).splitlines()
    assert docs_knobs.shown({"NCCL_P2P_LEVEL": "SYS"}) == "NCCL_P2P_LEVEL=SYS" and docs_knobs.shown(True) == "true"
    # A list of {name, value} entries (sysctl_settings) reads as sysctl writes them.
    assert docs_knobs.shown([{"name": "vm.swappiness", "value": "10"}, {"value": 0, "name": "kernel.numa_balancing"}]) == (
        "vm.swappiness=10 kernel.numa_balancing=0")
    with pytest.raises(ValueError, match=r"thp doc: \$\{mode\} names no declared variable"):
        docs_knobs.knob_table([entry], {})
    with pytest.raises(ValueError, match="thp doc: no boot"):
        docs_knobs.knob_table([{"name": "thp", "doc": {"knob": "x", "now": "y"}}], {})


def test_every_verification_test_has_exactly_one_row():
    rows = [row[0] for row in docs_knobs.check_rows()]
    assert len(rows) == len(set(rows))
    assert sorted(rows) == sorted(verify_tests())


def test_a_row_names_every_knob_its_test_verifies():
    rows = {row[0]: row[1] for row in docs_knobs.check_rows()}
    labels = {}
    for key, label, tests in report.knobs():
        for test in tests:
            labels.setdefault(test, []).append(label)
    assert {test: text.split(", ") for test, text in rows.items()} == labels


def test_undocumented_and_misplaced_verification_docs_are_errors():
    lone = [{"name": "thp", "label": "THP", "verify": ["thp"]}]
    with pytest.raises(ValueError, match="verification test thp: no catalog entry"):
        docs_knobs.check_rows(lone)
    stray = [{"name": "thp", "verify": [], "doc": {"verify": {"thp": {"variables": "v", "reads": "r"}}}}]
    with pytest.raises(ValueError, match="thp doc: documents thp, which its verify list does not name"):
        docs_knobs.check_rows(stray)
    doc = {"verify": {"thp": {"variables": "v", "reads": "r"}}}
    twice = [{"name": "a", "verify": ["thp"], "doc": doc}, {"name": "b", "verify": ["thp"], "doc": doc}]
    with pytest.raises(ValueError, match="b doc: thp is documented already"):
        docs_knobs.check_rows(twice)
