"""The ansible-playbook commands the README and docs show name playbooks this checkout has."""
import re

import pytest

from fakehost import REPO

DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
# `ansible-playbook [options] PLAYBOOK`: a path ending in .yml, or a collection's playbook name.
COMMAND = re.compile(r"ansible-playbook(?:\s+-{1,2}[\w-]+(?:[ =](?!-)[^\s`']+)?)*\s+([\w./-]+\.yml|infertune\.fleet\.\w+)\b")


def commands():
    for doc in DOCS:
        for number, line in enumerate(doc.read_text().splitlines(), 1):
            for match in COMMAND.finditer(line):
                yield pytest.param(match.group(1), id=f"{doc.name}:{number}")


@pytest.mark.parametrize("playbook", commands())
def test_a_documented_command_names_a_playbook_of_the_checkout(playbook):
    if playbook.startswith("infertune.fleet."):
        playbook = "playbooks/%s.yml" % playbook.rsplit(".", 1)[1]
    assert (REPO / playbook).is_file(), f"{playbook}: no such playbook"


def test_the_commands_are_found():
    found = [param.values[0] for param in commands()]
    assert "site.yml" in found and "playbooks/verify.yml" in found and "infertune.fleet.site" in found
