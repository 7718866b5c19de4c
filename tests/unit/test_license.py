"""One licence: galaxy.yml's, in every role's meta/main.yml and the Python package's metadata, and
its text in LICENSE (tests/unit/test_collection_build.py: the tarball carries it)."""
import tomllib

import pytest
import yaml

from fakehost import REPO

GALAXY = yaml.safe_load((REPO / "galaxy.yml").read_text())
ROLE_META = sorted(REPO.glob("roles/*/meta/main.yml"))


def test_the_collection_has_one_licence():
    assert GALAXY["license"] == ["Apache-2.0"]


@pytest.mark.parametrize("meta", ROLE_META, ids=lambda p: p.parts[-3])
def test_every_role_says_the_collections_licence(meta):
    assert yaml.safe_load(meta.read_text())["galaxy_info"]["license"] == GALAXY["license"][0]


def test_the_python_package_says_it_too():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["license"] == GALAXY["license"][0] and project["license-files"] == ["LICENSE"]


def test_license_holds_the_apache_2_0_text():
    text = (REPO / "LICENSE").read_text()
    assert text.lstrip().startswith("Apache License\n                           Version 2.0, January 2004")
    assert "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION" in text
    assert "END OF TERMS AND CONDITIONS" in text and "http://www.apache.org/licenses/LICENSE-2.0" in text
