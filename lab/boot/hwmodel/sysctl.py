"""What systemd-sysctl applies at boot (it is skipped inside containers, so the lab does it)."""
import os

from .files import masked_conf_files

# systemd-sysctl's search path, highest priority first: a file name found in an earlier
# directory masks the same name in later ones.
DIRS = ("etc/sysctl.d", "run/sysctl.d", "usr/local/lib/sysctl.d", "usr/lib/sysctl.d", "lib/sysctl.d")
# Debian links /etc/sysctl.d/99-sysctl.conf to ../sysctl.conf; honour the file without the link too.
SYSCTL_CONF = ("etc/sysctl.conf", "99-sysctl.conf")


def config_files(root):
    """Paths in the order systemd-sysctl reads them (sorted by file name, masked by priority)."""
    chosen = masked_conf_files(root, DIRS)
    conf, name = SYSCTL_CONF
    if name not in chosen and os.path.isfile(os.path.join(root, conf)):
        chosen[name] = os.path.join(root, conf)
    return [chosen[n] for n in sorted(chosen)]


def _norm(key):
    return key.strip().lstrip("-").replace("/", ".")


def apply(root, defaults):
    """Kernel defaults for the modelled keys, overridden by sysctl files in order (later wins)."""
    values = dict(defaults)
    for path in config_files(root):
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                lines = f.read().splitlines()
        except OSError:
            continue  # e.g. a dangling 99-sysctl.conf link
        for line in lines:
            line = line.strip()
            if not line or line[0] in "#;" or "=" not in line:
                continue
            key, _, value = line.partition("=")
            if _norm(key) in values:
                values[_norm(key)] = value.strip()
    return values
