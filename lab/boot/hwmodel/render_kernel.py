"""/sys/module (loaded modules and their parameters) and /sys/kernel/security/lockdown."""
import os

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
