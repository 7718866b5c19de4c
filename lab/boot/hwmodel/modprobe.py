"""Module parameters as the kernel would hold them after modprobe: defaults + cmdline + modprobe.d."""
import shlex

from . import cmdline as kcmdline
from .files import masked_conf_files

# kmod's search path, highest priority first (same-name files in later dirs are masked).
DIRS = ("etc/modprobe.d", "run/modprobe.d", "usr/local/lib/modprobe.d", "usr/lib/modprobe.d", "lib/modprobe.d")
TRUE, FALSE = ("1", "y", "Y", "on"), ("0", "n", "N", "off")


def _norm(name):
    return name.replace("-", "_")


def config_options(root):
    """{module: [(param, value), ...]} from `options` lines, in kmod's file order."""
    chosen = masked_conf_files(root, DIRS)
    options = {}
    for name in sorted(chosen):
        with open(chosen[name], encoding="utf-8", errors="replace") as f:
            text = f.read().replace("\\\n", " ")
        for line in text.splitlines():
            words = shlex.split(line, comments=True)
            if len(words) >= 2 and words[0] == "options":
                for word in words[2:]:
                    param, _, value = word.partition("=")
                    options.setdefault(_norm(words[1]), []).append((_norm(param), value))
    return options


def loaded_params(root, cmdline, module, defaults):
    """Parameters as /sys/module shows them, or None when a bad bool value makes the load fail."""
    values = dict(defaults)
    # kmod puts command-line options before the config files' options; the last one wins.
    for param, value in kcmdline.module_params(cmdline, module) + config_options(root).get(module, []):
        if param not in values:
            continue  # the kernel ignores unknown parameters with a warning
        if values[param] in ("Y", "N"):
            if value not in TRUE + FALSE:
                return None
            value = "Y" if value in TRUE else "N"
        values[param] = value
    return values
