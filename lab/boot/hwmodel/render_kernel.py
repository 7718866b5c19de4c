"""/sys/module (loaded modules and their parameters), /sys/kernel/security/lockdown and the
transparent hugepage modes (/sys/kernel/mm/transparent_hugepage)."""
import os

from . import cmdline as kcmdline
from . import modprobe
from .files import write

LOCKDOWN = {False: "[none] integrity confidentiality", True: "none [integrity] confidentiality"}


def loaded_modules(profile, root, cmdline, driver_unloaded):
    """{module: params} for the modules that load this boot."""
    loaded = {}
    for module, defaults in profile["modules"].items():
        if driver_unloaded and module.startswith("nvidia"):
            continue
        params = modprobe.loaded_params(root, cmdline, module, defaults or {})
        if params is not None:
            loaded[module] = params
    return loaded


def render_modules(out, modules, driver_version):
    """Write the future /sys/module under OUT."""
    os.makedirs(out, exist_ok=True)
    for module, params in modules.items():
        write(os.path.join(out, module, "initstate"), "live")
        if module.startswith("nvidia"):
            write(os.path.join(out, module, "version"), driver_version)
        os.makedirs(os.path.join(out, module, "parameters"), exist_ok=True)
        for param, value in params.items():
            write(os.path.join(out, module, "parameters", param), value)


def render_security(out, lockdown):
    """Write the future /sys/kernel/security under OUT."""
    write(os.path.join(out, "lockdown"), LOCKDOWN[lockdown])


# The kernel's choice lists, its selection in brackets; Debian's kernels are built with "always".
THP = {"enabled": ("always", "madvise", "never"), "defrag": ("always", "defer", "defer+madvise", "madvise", "never")}
THP_DEFAULTS = {"enabled": "always", "defrag": "madvise"}


def render_thp(out, profile, cmdline):
    """Write the future /sys/kernel/mm/transparent_hugepage under OUT: the profile's modes (kernel.thp),
    transparent_hugepage= on the command line first for enabled, as the kernel reads it at boot.
    A write later replaces the file's text with the word written, where the kernel would show the
    list with the new selection: the lab does not model that; readers take either."""
    modes = dict(THP_DEFAULTS, **(profile.get("kernel") or {}).get("thp", {}))
    asked = kcmdline.param(cmdline, "transparent_hugepage")
    if asked in THP["enabled"]:
        modes["enabled"] = asked
    for name, choices in THP.items():
        write(os.path.join(out, name), " ".join("[%s]" % c if c == modes[name] else c for c in choices))
