"""Kernel command line lookups, with the kernel's own rules."""


def _norm(name):
    # The kernel treats '-' and '_' in parameter names as the same character.
    return name.replace("-", "_")


def param(cmdline, name):
    """Value of NAME=VALUE on the command line (last one wins, like the kernel); None if absent."""
    found = None
    for token in cmdline.split():
        key, _, value = token.partition("=")
        if _norm(key) == _norm(name):
            found = value
    return found


def int_param(cmdline, name):
    value = param(cmdline, name)
    try:
        return int(value, 0) if value is not None else None
    except ValueError:
        return None


def module_params(cmdline, module):
    """MODULE.PARAM=VALUE tokens as (param, value) pairs, in command-line order."""
    prefix = _norm(module) + "."
    pairs = []
    for token in cmdline.split():
        key, _, value = token.partition("=")
        if _norm(key).startswith(prefix):
            pairs.append((_norm(key)[len(prefix):], value))
    return pairs
