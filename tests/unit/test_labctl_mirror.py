"""labctl derives the Debian mirror from the machine's apt sources instead of naming a host."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "lab"))
from infra import mirror  # noqa: E402

DEB822 = """\
Types: deb
# http://snapshot.debian.org/archive/debian/20250520T000000Z
URIs: http://mirror.example.org/debian/
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb-src
URIs: http://src.example.org/debian
Suites: bookworm
Components: main

Types: deb
URIs: http://security.example.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
"""


def _apt(tmp_path, sources=None, sources_list=None):
    (tmp_path / "sources.list.d").mkdir()
    if sources is not None:
        (tmp_path / "sources.list.d" / "debian.sources").write_text(sources)
    if sources_list is not None:
        (tmp_path / "sources.list").write_text(sources_list)
    return tmp_path


def test_deb822_sources_give_archive_and_security_mirror(tmp_path):
    found = mirror.derive(_apt(tmp_path, sources=DEB822))
    assert found == mirror.Mirrors("http://mirror.example.org/debian", "http://security.example.org/debian-security")


def test_disabled_stanza_is_ignored(tmp_path):
    disabled = "Types: deb\nURIs: http://old.example.org/debian\nSuites: bookworm\nEnabled: no\n\n"
    assert mirror.derive(_apt(tmp_path, sources=disabled + DEB822)).main == "http://mirror.example.org/debian"


def test_one_line_sources_list_with_options(tmp_path):
    text = ("# comment\ndeb-src http://src.example.org/debian bookworm main\n"
            "deb [arch=amd64 signed-by=/usr/share/keyrings/k.gpg] http://one.example.org/debian bookworm main\n"
            "deb http://one.example.org/debian-security bookworm-security main\n")
    found = mirror.derive(_apt(tmp_path, sources_list=text))
    assert found == mirror.Mirrors("http://one.example.org/debian", "http://one.example.org/debian-security")


def test_no_mirror_is_an_error(tmp_path):
    with pytest.raises(RuntimeError, match="no Debian"):
        mirror.derive(_apt(tmp_path, sources_list="deb-src http://src.example.org/debian bookworm main\n"))


def test_image_sources_cover_release_updates_backports_security():
    text = mirror.image_sources(mirror.Mirrors("http://m.example.org/debian", "http://s.example.org/sec"))
    assert "URIs: http://m.example.org/debian\nSuites: bookworm bookworm-updates bookworm-backports\n" in text
    assert "URIs: http://s.example.org/sec\nSuites: bookworm-security\n" in text


def test_image_sources_without_security_mirror():
    text = mirror.image_sources(mirror.Mirrors("http://m.example.org/debian", None))
    assert "security" not in text
