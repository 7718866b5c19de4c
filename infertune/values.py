"""A knob's before and after in words that say what each value is (the report's before → after).

A knob publishes its values as its apply function returns them (infertune_results[knob]); their
shape depends on the catalog entry's `module`, or for the rollout's own rows (drain, reboot) on
the row. Each shape is said here once: "sglang.service: disabled, inactive → enabled, active",
"vm.swappiness: 60 → 10", "512 bytes on 2 devices → 4096 bytes on 2 devices", never the
bare "-1 +0" of a word diff.
"""
from __future__ import annotations

from infertune_node.kinds import KINDS
from infertune_node.words import ARROW, lines

# One side in words, per knob kind (its module's say) and for the rollout's own rows.
SAY = {name: kind.say for name, kind in KINDS.items() if kind.say}
# What an empty side means, where it means more than "none".
NOTHING = {**{name: kind.nothing for name, kind in KINDS.items() if kind.nothing}, "reboot": "no reboot needed"}


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
        text = lines(value)
    return f"{subject}: {text}" if subject else text


def change(kind, before, after, subject=None, differs=None):
    """'before → after' for a changed knob, or the change as its kind says it better (a command line
    by the parameters added and removed, sysctls by those whose value changes)."""
    said = KINDS[kind].change(before, after, differs) if kind in KINDS and KINDS[kind].change else None
    return said or f"{say(kind, before, subject)}{ARROW}{say(kind, after)}"
