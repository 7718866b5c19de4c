"""A knob's values in words, for the report's before -> after: the pieces the kinds' `say` functions
are made of ("512 bytes on 2 devices", "governor powersave on 128 CPUs"), never a bare word diff."""

ARROW = " → "
ACS_REDIRECT = 0x000C  # ACS Control bits 2 and 3: P2P request and completion redirect


def plural(count, word):
    return "%d %s%s" % (count, word, "" if count == 1 else "s")


def per_device(values, word, noun):
    """{bdf: value} -> '512 bytes on 2 devices': one group per value, the most common first."""
    counts = {}
    for value in values.values():
        counts[value] = counts.get(value, 0) + 1
    return ", ".join("%s on %s" % (word(value), plural(n, noun))
                     for value, n in sorted(counts.items(), key=lambda item: -item[1]))


def acs(value):
    try:
        bits = int(str(value), 16)
    except ValueError:
        return str(value)
    return "redirect %s (%s)" % ("on" if bits & ACS_REDIRECT else "off", value)


def cpu_counts(value, names=None):
    """{'governor': {'powersave': 128}} -> 'governor powersave on 128 CPUs'."""
    parts = []
    for key, counts in value.items():
        said = ", ".join("%s on %s" % (item, plural(n, "CPU")) for item, n in counts.items() if n)
        parts.append("%s %s" % ((names or {}).get(key, key), said))
    return "; ".join(parts)


def cstates(value):
    """{'C2': {'enabled': 128, 'disabled': 0}} -> 'C2 enabled on 128 CPUs', states said alike grouped."""
    groups = {}
    for state, counts in value.items():
        said = ", ".join("%s on %s" % (word, plural(n, "CPU")) for word, n in counts.items() if n)
        groups.setdefault(said, []).append(state)
    return "; ".join("%s %s" % (", ".join(states), said) for said, states in groups.items())


def unit(value):
    """{'enabled': 'disabled', 'active': 'inactive'} -> 'disabled, inactive' (enablement, then state)."""
    keys = ["enabled", "active"] + sorted(set(value) - {"enabled", "active"})
    return ", ".join(str(value[key]) for key in keys if key in value)


def lines(text):
    return " / ".join(line.strip() for line in str(text).splitlines() if line.strip() and not line.startswith("#"))


def mapping(shape):
    """say(value) for a kind whose sides are mappings said by shape(value); other values as text."""
    return lambda value: shape(value) if isinstance(value, dict) else str(value)
