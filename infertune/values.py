"""A knob's before and after in words that say what each value is (the report's before → after).

A knob publishes its values as its apply function returns them (infertune_results[knob]); their
shape depends on the catalog entry's `module`, or for the rollout's own rows (drain, reboot) on
the row. Each shape is said here once: "sglang.service: disabled, inactive → enabled, active",
"vm.swappiness: 60 → 10", "512 bytes on 2 devices → 4096 bytes on 2 devices", never the
bare "-1 +0" of a word diff.
"""
from __future__ import annotations

ARROW = " → "
ACS_REDIRECT = 0x000C  # ACS Control bits 2 and 3: P2P request and completion redirect


def _plural(count, word):
    return f"{count} {word}" + ("" if count == 1 else "s")


def _per_device(values, word, noun):
    """{bdf: value} -> '512 bytes on 2 devices': one group per value, the most common first."""
    counts = {}
    for value in values.values():
        counts[value] = counts.get(value, 0) + 1
    return ", ".join(f"{word(value)} on {_plural(n, noun)}"
                     for value, n in sorted(counts.items(), key=lambda item: -item[1]))


def _acs(value):
    try:
        bits = int(str(value), 16)
    except ValueError:
        return str(value)
    return f"redirect {'on' if bits & ACS_REDIRECT else 'off'} ({value})"


def _cpu_counts(value, names=None):
    """{'governor': {'powersave': 128}} -> 'governor powersave on 128 CPUs'."""
    parts = []
    for key, counts in value.items():
        said = ", ".join(f"{item} on {_plural(n, 'CPU')}" for item, n in counts.items() if n)
        parts.append(f"{(names or {}).get(key, key)} {said}")
    return "; ".join(parts)


def _cstates(value):
    """{'C2': {'enabled': 128, 'disabled': 0}} -> 'C2 enabled on 128 CPUs', states said alike grouped."""
    groups = {}
    for state, counts in value.items():
        said = ", ".join(f"{word} on {_plural(n, 'CPU')}" for word, n in counts.items() if n)
        groups.setdefault(said, []).append(state)
    return "; ".join(f"{', '.join(states)} {said}" for said, states in groups.items())


def _unit(value):
    """{'enabled': 'disabled', 'active': 'inactive'} -> 'disabled, inactive' (enablement, then state)."""
    keys = ["enabled", "active"] + sorted(set(value) - {"enabled", "active"})
    return ", ".join(str(value[key]) for key in keys if key in value)


def _lines(text):
    return " / ".join(line.strip() for line in str(text).splitlines() if line.strip() and not line.startswith("#"))


# Per kind: one side in words (None and "" are handled before).
SAY = {
    "systemd_unit": lambda v: _unit(v) if isinstance(v, dict) else str(v),
    "pcie_mrrs": lambda v: _per_device(v, lambda n: f"{n} bytes", "device") if isinstance(v, dict) else str(v),
    "pcie_acs": lambda v: _per_device(v, _acs, "port") if isinstance(v, dict) else str(v),
    "cpufreq_policy": lambda v: _cpu_counts(v, {"epp": "EPP"}) if isinstance(v, dict) else str(v),
    "cpuidle_states": lambda v: _cstates(v) if isinstance(v, dict) else str(v),
    "amd_pstate": lambda v: f"mode {v}",
    "modprobe_options": lambda v: _lines(v) or "no options",
    "apt_hold": lambda v: str(v) if v == "none held" else f"held: {v}",
    "boot_kernel": lambda v: f"default entry {v}",
}
# What an empty side means, where it means more than "none".
NOTHING = {
    "deb_package": "not installed",
    "amd_pstate": "driver not loaded",
    "modprobe_options": "no options file",
    "boot_kernel": "default entry unknown",
    "reboot": "no reboot needed",
    "kernel_cmdline": "no parameters",
}


def say(kind, value, subject=None):
    """One side of a knob of this kind; subject (the unit) is named once, in front."""
    if value is None or value == {} or value == "":
        text = NOTHING.get(kind, "—")
    elif kind == "reboot" and value not in ("rebooted", "not rebooted"):
        text = f"reboot needed: {value}"
    elif kind in SAY:
        text = SAY[kind](value)
    elif isinstance(value, dict):
        text = "; ".join(f"{key}: {item}" for key, item in value.items())
    else:
        text = _lines(value)
    return f"{subject}: {text}" if subject else text


def change(kind, before, after, subject=None, differs=None):
    """'before → after' for a changed knob; a command line by the parameters added and removed,
    sysctls by those whose value changes (none: the file, as the knob's differs says it)."""
    if kind == "sysctl" and isinstance(before, dict) and isinstance(after, dict):
        changed = [f"{key}: {say(kind, before.get(key))}{ARROW}{say(kind, value)}"
                   for key, value in after.items() if before.get(key) != value]
        # None differs live: the change is the sysctl.d file alone, created or rewritten.
        return "; ".join(changed) if changed else f"{say(kind, after)} live; {differs or 'sysctl.d file rewritten'}"
    if kind == "kernel_cmdline" and isinstance(before, str) and isinstance(after, str):
        old, new = before.split(), after.split()
        added, removed = [w for w in new if w not in old], [w for w in old if w not in new]
        parts = ([f"added {' '.join(added)}"] if added else []) + ([f"removed {' '.join(removed)}"] if removed else [])
        if parts:
            return "; ".join(parts)
    return f"{say(kind, before, subject)}{ARROW}{say(kind, after)}"
