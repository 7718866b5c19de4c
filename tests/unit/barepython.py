"""A Python without some of the project's packages, for tests of what a control node without them
is told: a virtual environment (no pip) whose site-packages holds links to the project's own
entries but those left out, so it imports everything else from where the project installed it."""
import subprocess
import sys
from pathlib import Path

SITE = next(Path(sys.prefix).glob("lib/python*/site-packages"))
# The verification's packages: pytest (its _pytest and py modules too) and pytest-testinfra.
PYTEST = ("pytest", "_pytest", "py", "pytest-testinfra", "testinfra")


def python_without(directory, *names):
    """The interpreter of a new environment in DIRECTORY lacking NAMES (distributions or modules,
    their dist-info too; PYTEST for the verification's); the checkout's own infertune package,
    installed editable, is never linked in."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(directory)], check=True)
    (site,) = Path(directory).glob("lib/python*/site-packages")
    left_out = {n.replace("-", "_").lower() for n in (*names, "infertune")}
    for entry in SITE.iterdir():
        stem = entry.name.split("-")[0].removesuffix(".py").lower()
        if stem in left_out or (entry.name.startswith("__editable__") and "infertune" in entry.name):
            continue
        (site / entry.name).symlink_to(entry)
    return Path(directory) / "bin" / "python"
