"""One version everywhere: galaxy.yml's is the package's, CHANGELOG.md's newest release, every
tarball and image name the docs and build files give, and a git tag v<version> whose tree says
the same; the install commands work pasted from any directory."""
import re
import subprocess
import tomllib

import pytest
import yaml

from fakehost import REPO

GALAXY = yaml.safe_load((REPO / "galaxy.yml").read_text())
VERSION = GALAXY["version"]
TEXTS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), REPO / "docs" / "requirements.yml",
         REPO / "execution-environment.yml", REPO / "ansible-navigator.yml", REPO / "Makefile"]
README_TEXT = (REPO / "README.md").read_text()
NAMED = re.compile(r"infertune-fleet-(\d+\.\d+\.\d+)\.tar\.gz|infertune-ee:(\d+\.\d+\.\d+)")


def released(changelog):
    """The versions CHANGELOG.md's headings name, newest first (Unreleased left out)."""
    return re.findall(r"^## (\d+\.\d+\.\d+)\s*$", changelog, re.M)


def git(*argv):
    return subprocess.run(["git", *argv], cwd=REPO, capture_output=True, text=True, check=False)


def test_the_package_and_the_changelog_name_galaxys_version():
    assert tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"] == VERSION
    assert released((REPO / "CHANGELOG.md").read_text())[0] == VERSION


@pytest.mark.parametrize("path", TEXTS, ids=lambda p: p.name)
def test_every_tarball_and_image_named_is_of_this_version(path):
    named = {v for match in NAMED.finditer(path.read_text()) for v in match.groups() if v}
    assert named <= {VERSION}, f"{path.name} names {sorted(named)}, galaxy.yml {VERSION}"


def test_the_requirements_example_pins_the_release_tag():
    (entry,) = yaml.safe_load((REPO / "docs" / "requirements.yml").read_text())["collections"]
    assert (entry["type"], entry["version"]) == ("git", f"v{VERSION}")
    assert entry["name"] == GALAXY["repository"] + ".git"


@pytest.mark.skipif(git("rev-parse", "--is-shallow-repository").stdout.strip() != "false",
                    reason="a shallow clone or no git repository: no tags to read")
def test_each_release_tag_names_the_version_its_tree_declares():
    tags = git("tag", "--list", "v*").stdout.split()
    if not tags:
        # A clone given the branch alone (a CI's, say) carries none of the project's tags.
        pytest.skip("no v* tag in this clone: the project's tags did not come with it")
    assert f"v{VERSION}" in tags, f"no tag v{VERSION} (git tag -a v{VERSION} <the release's commit>)"
    for tag in tags:
        version = tag[1:]
        assert yaml.safe_load(git("show", f"{tag}:galaxy.yml").stdout)["version"] == version, tag
        assert tomllib.loads(git("show", f"{tag}:pyproject.toml").stdout)["project"]["version"] == version, tag
        assert released(git("show", f"{tag}:CHANGELOG.md").stdout)[0] == version, tag


def install_commands():
    for path in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if line.startswith("ansible-galaxy collection install"):
                yield pytest.param(line, id=f"{path.name}:{number}")


@pytest.mark.parametrize("line", install_commands())
def test_an_install_command_names_where_it_installs(line):
    """Without -p it installs where the directory's ansible.cfg says: in the checkout, its own
    collections/ (where the checkout already is the collection)."""
    assert re.search(r"\s-p\s+\S", line), line
    assert not re.search(r"\sbuild/", line), "a path relative to the checkout: " + line


def test_the_readme_names_every_playbook_by_fqcn():
    sentence = re.search(r"playbooks run by FQCN \((.*?)\)", " ".join(README_TEXT.split())).group(1)
    named = set(re.findall(r"`(?:infertune\.fleet)?\.(\w+)`", sentence))
    assert named == {p.stem for p in (REPO / "playbooks").glob("*.yml")}, sentence

