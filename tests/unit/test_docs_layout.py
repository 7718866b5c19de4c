"""The README is a newcomer's front page: a few screens, with every topic's page named in it, and
every page it and the docs name is there."""
import re

from fakehost import REPO

README = REPO / "README.md"
PAGES = sorted(p.relative_to(REPO).as_posix() for p in (REPO / "docs").glob("*.md"))
# A docs page or a lab README named in prose or a table: `docs/x.md`, docs/x.md.
NAMED = re.compile(r"(?<![\w/.-])((?:docs|lab)/[\w./-]*\.md)\b")
MAX_LINES = 300
# Paths of another project a page quotes (AWX's source tree, relative to its root).
FOREIGN = {"docs/awx.md": {"docs/job_slicing.md"}}


def named(path):
    return set(NAMED.findall(path.read_text()))


def test_the_readme_fits_a_few_screens():
    lines = README.read_text().count("\n")
    assert lines <= MAX_LINES, f"README.md has {lines} lines; move long sections into docs/ (at most {MAX_LINES})"


def test_the_readme_names_every_page_of_docs():
    assert sorted(set(PAGES) - named(README)) == []


def test_every_page_the_docs_name_exists():
    missing = [f"{doc.relative_to(REPO)}: {page}" for doc in [README, *(REPO / p for p in PAGES)]
               for page in sorted(named(doc) - FOREIGN.get(doc.relative_to(REPO).as_posix(), set()))
               if not (REPO / page).is_file()]
    assert missing == []


def test_the_check_finds_a_page_named_in_prose():
    assert NAMED.findall("see `docs/site.md` and docs/cost.md, lab/README.md; not xdocs/y.md") == [
        "docs/site.md", "docs/cost.md", "lab/README.md"]


def first_screen(lines=45):
    return "\n".join(README.read_text().splitlines()[:lines])


def test_the_first_screen_says_what_a_real_host_user_runs():
    screen = first_screen()
    assert "make setup" in screen and ".venv/bin/ansible-playbook -i inventory/" in screen
    assert '"Install as a collection"' in screen and "## Install as a collection" in README.read_text()


def test_the_first_lines_say_what_a_host_must_have_first():
    """The plan stops a host without the NVIDIA driver or sglang: the front page says so, and
    never that it starts from a bare server."""
    screen = first_screen(15)
    assert "bare" not in screen
    assert all(need in screen for need in ("NVIDIA", "driver", "`sglang_venv`", "`sglang_model_path`",
                                           "installs neither the driver nor sglang"))


def test_a_decode_floor_figure_never_comes_without_the_other():
    """The seeds' 3.2 ms/token (bytes spread evenly) and sglang's 6.15 ms differ: a paragraph that
    gives one gives the other."""
    paragraphs = [p for p in README.read_text().split("\n\n") if "3.2 ms" in p or "6.15 ms" in p]
    assert paragraphs and all("3.2 ms" in p and "6.15 ms" in p for p in paragraphs), paragraphs
