"""docs/benchmark.md names only options and environment variables the benchmark client has."""
import contextlib
import io
import re

import pytest

from fakehost import REPO
from infertune import bench_client

DOC = REPO / "docs" / "benchmark.md"
SOURCE = REPO / "infertune" / "bench_client.py"


def client_options():
    """The options of the client's parser, from its --help."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        bench_client.main(["--help"])
    return set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", out.getvalue()))


def client_section(text):
    return text.split("## Benchmark client", 1)[1].split("\n## ", 1)[0]


def named_for_the_client(text):
    """(options, environment variables) the doc gives the client: those on its command lines,
    and those the client section names in backticks (not sglang's own flags)."""
    commands = re.findall(r"python -m infertune\.bench_client(?:[^\n]*\\\n)*[^\n]*", text)
    options = {o for line in commands for o in re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", line)}
    section = client_section(text)
    options |= set(re.findall(r"(?<!sglang's )`(--[a-z][a-z0-9-]*)", section))
    environment = set(re.findall(r"`([A-Z][A-Z0-9]*_[A-Z0-9_]+)`", section))
    return options, environment


def test_the_doc_names_only_what_the_client_takes():
    options, environment = named_for_the_client(DOC.read_text())
    source = SOURCE.read_text()
    # The client reads no environment: a variable the doc names would be ignored.
    assert [name for name in environment if name not in source or "environ" not in source] == []
    assert options - client_options() == set()
    assert "--api-key-file" in options, "the doc says how the client takes the key"


def test_the_check_sees_an_option_or_variable_the_client_lacks():
    text = "## Benchmark client\n`--api-key-env` or `INFERTUNE_BENCH_API_KEY`; sglang's `--api-key`\n"
    assert named_for_the_client(text) == ({"--api-key-env"}, {"INFERTUNE_BENCH_API_KEY"})
