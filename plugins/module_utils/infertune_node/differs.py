"""What differs between a knob's before and after, in one bounded line for the plan.

The plan once cut before and after at a fixed width, which hid the one CPU in 128 whose EPP
had drifted. Here the differing elements come first, whole; a long list ends in "+N more".
Elements with the same change are grouped (cpu0-3,7), and the count of those that need
nothing follows: "cpu3 epp balance_performance -> performance (127 others ok)". A mapping's
elements are its keys, each followed by a colon: "enabled: disabled -> enabled".
"""
import re

SHOWN = 3
ARROW = " -> "


def elements(changes, total, shown=SHOWN):
    """changes: [(element, what, before, after)], total: elements looked at."""
    groups = {}
    for element, what, old, new in changes:
        groups.setdefault((what, _text(old), _text(new)), []).append(element)
    # A mapping's key says what its value is: "active: inactive -> active", "0000:05:00.0: 4096 -> 512".
    parts = [" ".join(p for p in (names(members), what) if p) + (" " if what else ": ") + old + ARROW + new
             for (what, old, new), members in groups.items()]
    text = _bounded(parts, shown, "; ")
    others = total - len({change[0] for change in changes})
    if text and others > 0:
        text += " (%d other%s ok)" % (others, "" if others == 1 else "s")
    return text


def summarize(before, after, shown=SHOWN):
    """Any before/after pair: mappings by key, lists and text by the items added or removed."""
    if before == after:
        return ""
    if isinstance(before, dict) and isinstance(after, dict):
        leaves_before, leaves_after = _leaves(before), _leaves(after)
        keys = list(leaves_before) + [k for k in leaves_after if k not in leaves_before]
        return elements([(key, "", leaves_before.get(key, "absent"), leaves_after.get(key, "absent"))
                         for key in keys if leaves_before.get(key, "absent") != leaves_after.get(key, "absent")],
                        len(keys), shown)
    if isinstance(before, (list, str)) and isinstance(after, (list, str)):
        lines = any(isinstance(v, str) and "\n" in v for v in (before, after))  # a file's content
        old, new = _items(before, lines), _items(after, lines)
        if len(old) > 1 or len(new) > 1:
            removed = ["-" + item for item in old if item not in new]
            added = ["+" + item for item in new if item not in old]
            return _bounded(removed + added, shown, "; " if lines else " ") or "same items, another order"
    return _text(before) + ARROW + _text(after)


def names(members):
    """['cpu0', 'cpu1', 'cpu2', 'cpu7'] -> 'cpu0-2,7'; other names comma-separated, bounded."""
    split = [re.fullmatch(r"(.*?)(\d+)", str(m)) for m in members]
    prefixes = {m.group(1) for m in split if m}
    if len(members) > 1 and all(split) and len(prefixes) == 1:
        numbers = sorted(int(m.group(2)) for m in split)
        spans, start = [], numbers[0]
        for index, number in enumerate(numbers):
            if index + 1 == len(numbers) or numbers[index + 1] != number + 1:
                spans.append(str(start) if start == number else "%d-%d" % (start, number))
                if index + 1 < len(numbers):
                    start = numbers[index + 1]
        return prefixes.pop() + ",".join(spans)
    return _bounded([str(m) for m in members], SHOWN, ", ")


def _bounded(parts, shown, separator):
    text = separator.join(parts[:shown])
    return text + ("%s+%d more" % (separator, len(parts) - shown) if len(parts) > shown else "")


def _leaves(mapping, prefix=""):
    found = {}
    for key, value in mapping.items():
        path = "%s%s" % (prefix, key)
        if isinstance(value, dict) and value:
            found.update(_leaves(value, path + "."))
        else:
            found[path] = value
    return found


def _items(value, lines):
    if isinstance(value, list):
        return [_text(item) for item in value]
    return [line for line in value.split("\n") if line.strip()] if lines else value.split()


def _text(value):
    if value is None:
        return "none"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, str):
        return value if value.strip() else repr(value)
    return str(value)
