"""Writing the rendered tree: sysfs-style one-value files."""
import os


def write(path, value):
    """Write VALUE plus a newline, as sysfs shows it; creates parent directories on first use."""
    try:
        f = open(path, "w")
    except FileNotFoundError:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        f = open(path, "w")
    with f:
        f.write(f"{value}\n")
