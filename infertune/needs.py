"""What the control node's Python needs for each use, checked before any host is touched.

The verification (tests/verify) and the benchmark's plot run in the Python that runs
ansible-playbook (sys.executable there). A need it lacks stops the run at its start - in the
plan's input check (infertune_validate), and in the verification's own action before pytest -
with the pip command that installs the collection's declared set for that use (its
requirements files, tested pins): one command, for that very interpreter.

    verify: requirements.txt            pytest, pytest-testinfra (site, rollout, verify, drift --verify)
    plot:   requirements-benchmark.txt  matplotlib, and the above (playbooks/benchmark.yml)

Standard library only: it runs where those packages may be missing.
"""
from __future__ import annotations

import importlib.metadata
import importlib.util
import re
import shlex
import sys
from pathlib import Path

from . import COLLECTION

# Per use: (distribution, module it provides, oldest release accepted: the tested minor).
NEEDS = {
    "verify": (("pytest", "pytest", "9.0"), ("pytest-testinfra", "testinfra", "10.2")),
    "plot": (("matplotlib", "matplotlib", "3.11"),),
}
# The collection's requirements file per use, at its root: the tested pins, one pip command.
REQUIREMENTS = {"verify": "requirements.txt", "plot": "requirements-benchmark.txt"}
# pyproject.toml's: the package's own dependencies are the verification's.
EXTRAS = {"verify": "infertune", "plot": "infertune[plot]"}
WHAT = {"verify": "the verification (tests/verify)", "plot": "the benchmark's plot"}


def release(text):
    """A version's leading numbers, (9, 0, 3) for '9.0.3rc1'."""
    return tuple(int(part) for part in re.findall(r"\d+", re.match(r"[\d.]*", text).group(0)))


def lacking(use, find_spec=importlib.util.find_spec, version=importlib.metadata.version):
    """[(distribution, why)] of USE's needs this Python lacks: not installed, or older than accepted."""
    out = []
    for distribution, module, oldest in NEEDS[use]:
        try:
            found = version(distribution) if find_spec(module) is not None else None
        except importlib.metadata.PackageNotFoundError:
            found = None
        if found is None:
            out.append((distribution, "not installed"))
        elif release(found) < release(oldest):
            out.append((distribution, f"{found} installed, {oldest} or newer needed"))
    return out


def pip_command(use, python=None, root=COLLECTION):
    """The one command that installs USE's declared set into PYTHON: the collection's requirements
    file, or for the package alone (a wheel, no collection) its extra."""
    requirements = Path(root) / REQUIREMENTS[use]
    what = "-r " + shlex.quote(str(requirements)) if requirements.is_file() else shlex.quote(EXTRAS[use])
    return "%s -m pip install %s" % (shlex.quote(python or sys.executable), what)


def problems(uses, python=None, root=COLLECTION, where="the Python that runs ansible-playbook", **probes):
    """One line per use whose needs this Python lacks, naming them and the pip command."""
    python = python or sys.executable
    lines = []
    for use in dict.fromkeys(uses):
        if use not in NEEDS:
            raise ValueError("unknown use %r (known: %s)" % (use, ", ".join(NEEDS)))
        missing = lacking(use, **probes)
        if missing:
            lines.append("control node: %s needs %s in %s, %s; install them with: %s" % (
                WHAT[use], ", ".join(f"{d} ({why})" for d, why in missing), python, where,
                pip_command(use, python, root)))
    return lines


def require(use, prog):
    """Exit with one line when this Python lacks USE's needs (the modules' main())."""
    lines = problems([use], where="the Python running " + prog)
    if lines:
        sys.exit("%s: %s" % (prog, lines[0].removeprefix("control node: ")))
