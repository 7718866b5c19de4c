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


def masked_conf_files(root, dirs):
    """{file name: path} of *.conf under DIRS (highest priority first); a name in an earlier
    directory masks the same name in later ones, as systemd-sysctl and kmod read them."""
    chosen = {}
    for d in dirs:
        full = os.path.join(root, d)
        if os.path.isdir(full):
            for name in os.listdir(full):
                if name.endswith(".conf") and name not in chosen:
                    chosen[name] = os.path.join(full, name)
    return chosen
