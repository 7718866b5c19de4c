"""Read helpers for kernel files under a root directory ("/" in production).

A missing or unreadable file reads as None: VMs, containers and hosts without
a driver simply lack the file, and that is information, not an error.
"""
import glob
import os
import re


def path(root, rel):
    return os.path.join(root, rel.lstrip("/"))


def read(root, rel):
    try:
        with open(path(root, rel)) as handle:
            return handle.read().strip()
    except (OSError, UnicodeDecodeError):
        return None


def content(root, rel):
    """A configuration file's whole text as written, None where it does not exist (what a knob
    records before its first write, and gives back at revert). Unlike read(), an unreadable file
    raises: a record must not take a file it could not read for an absent one."""
    target = path(root, rel)
    if not os.path.exists(target):
        return None
    with open(target) as handle:
        return handle.read()


def read_int(root, rel):
    text = read(root, rel)
    try:
        return int(text)
    except (TypeError, ValueError):
        return None


def read_words(root, rel):
    text = read(root, rel)
    return text.split() if text else []


def natural_key(name):
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def entries(root, rel_pattern):
    """Base names matching a glob under root, in natural order (cpu2 before cpu10)."""
    names = [os.path.basename(p) for p in glob.glob(path(root, rel_pattern))]
    return sorted(names, key=natural_key)


def bracketed(text):
    """The selected word of a sysfs choice list such as 'none [integrity] confidentiality'."""
    match = re.search(r"\[(\w+)\]", text or "")
    return match.group(1) if match else None


def lockdown(root):
    return bracketed(read(root, "/sys/kernel/security/lockdown"))


def count(values):
    """Aggregate per-CPU values into {value: number of CPUs}."""
    totals = {}
    for value in values:
        totals[value] = totals.get(value, 0) + 1
    return totals
