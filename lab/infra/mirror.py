"""Derive the Debian mirror from this machine's apt sources, so no host name is written anywhere."""
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Mirrors:
    main: str
    security: str | None


def _deb822_entries(text):
    """Yield (uris, suites) of each enabled binary stanza of a deb822 .sources file."""
    for stanza in text.split("\n\n"):
        fields, key = {}, None
        for line in stanza.splitlines():
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            if line[0] in " \t" and key:  # continuation line
                fields[key] += " " + line.strip()
                continue
            key, _, value = line.partition(":")
            key = key.strip().lower()
            fields[key] = value.strip()
        if "deb" not in fields.get("types", "").split():
            continue
        if fields.get("enabled", "yes").lower() == "no":
            continue
        yield fields.get("uris", "").split(), fields.get("suites", "").split()


def _one_line_entries(text):
    """Yield (uris, suites) of each `deb URI SUITE ...` line of a sources.list file."""
    for line in text.splitlines():
        words = line.split("#", 1)[0].split()
        if not words or words[0] != "deb":
            continue
        words = words[1:]
        if words and words[0].startswith("["):  # [arch=amd64 signed-by=...] options
            while words and not words[0].endswith("]"):
                words.pop(0)
            words.pop(0)
        if len(words) >= 2:
            yield [words[0]], [words[1]]


def derive(apt_dir=Path("/etc/apt")):
    """Return the machine's Debian archive and security mirrors (security may be None)."""
    entries = []
    for path in sorted(Path(apt_dir).glob("sources.list.d/*.sources")):
        entries += _deb822_entries(path.read_text())
    one_line = [Path(apt_dir) / "sources.list"] + sorted(Path(apt_dir).glob("sources.list.d/*.list"))
    for path in one_line:
        if path.is_file():
            entries += _one_line_entries(path.read_text())
    main = security = None
    for uris, suites in entries:
        http = [u.rstrip("/") for u in uris if u.startswith(("http://", "https://"))]
        if not http:
            continue
        if any(s.endswith("-security") or s.endswith("/updates") for s in suites):
            security = security or http[0]
        else:
            main = main or http[0]
    if main is None:
        raise RuntimeError(f"no Debian http(s) mirror found in {apt_dir}/sources.list(.d)")
    return Mirrors(main, security)


def image_sources(mirrors, codename="bookworm"):
    """deb822 sources for the lab image: release, updates, backports and (if known) security."""
    stanzas = [
        f"Types: deb\nURIs: {mirrors.main}\n"
        f"Suites: {codename} {codename}-updates {codename}-backports\n"
        "Components: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n"
    ]
    if mirrors.security:
        stanzas.append(
            f"Types: deb\nURIs: {mirrors.security}\nSuites: {codename}-security\n"
            "Components: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n"
        )
    return "\n".join(stanzas)
