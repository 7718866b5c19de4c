"""Nothing the collection ships reads what its build leaves out: of tests/, only tests/verify ships
(galaxy.yml's build_ignore drops tests/unit, tests/lab and tests/fixtures), so a shipped module that
read tests/fixtures works in the checkout and breaks for every collection user."""
import ast
import re

import yaml

from fakehost import REPO

SHIPPED = ("infertune", "plugins", "roles", "playbooks")


def path_parts(tree):
    """String constants of a module, and the parts of each `x / "a" / "b"` path it builds."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node.value
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            parts = []
            while isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
                if isinstance(node.right, ast.Constant):
                    parts.insert(0, str(node.right.value))
                node = node.left
            yield "/".join(parts)


def test_no_shipped_module_reads_an_unshipped_tests_directory():
    ignored = [entry for entry in yaml.safe_load((REPO / "galaxy.yml").read_text())["build_ignore"]
               if entry.startswith("tests/")]
    assert {"tests/unit", "tests/lab", "tests/fixtures"} <= set(ignored)
    found = []
    for top in SHIPPED:
        for path in sorted((REPO / top).rglob("*.py")):
            for text in path_parts(ast.parse(path.read_text())):
                if re.search(r"(^|/)tests/(unit|lab|fixtures)\b", text):
                    found.append(f"{path.relative_to(REPO)}: {text}")
    assert found == []
    # The MoE table, made from the trimmed sources under tests/fixtures, is a development tool.
    assert "tools" in yaml.safe_load((REPO / "galaxy.yml").read_text())["build_ignore"]
