"""The knobs whose kind verifies itself: a kind module that gives observe (the shell command that reads
what its knob set) and judge (the problems in what it read) gets a check here, test_<kind>, against
the arguments the run rendered for each of the host's catalog entries of that kind (want["knobs"]).
A new kind of that sort needs no check of its own."""
from infertune_node.kinds import KINDS
from outcome import mismatch, not_applicable
from probes import probe

# Between two entries' reads (each one's own sections are split by @@, readings.SECTION).
ENTRY = "@@entry"


def entries_of(want, kind):
    """{knob: its arguments} of the host's enabled entries of this kind, in catalog order."""
    return {name: entry["args"] for name, entry in (want.get("knobs") or {}).items() if entry["module"] == kind}


def reading(kind):
    """The command reading every entry of the kind at once, their outputs apart (none without an
    entry: nothing to prefetch)."""
    def command(want):
        entries = entries_of(want, kind)
        if not entries:
            raise ValueError("no %s entry" % kind)
        return f"; echo {ENTRY}; ".join(KINDS[kind].observe(args) for args in entries.values())
    return command


def check(kind):
    def test(name, sh, want):
        entries = entries_of(want, kind)
        if not entries:
            not_applicable(name, kind, "no catalog entry of this kind is enabled")
        parts = sh(reading(kind)(want)).split(ENTRY + "\n")
        problems = [f"{knob}: {problem}" for (knob, args), part in zip(entries.items(), parts)
                    for problem in KINDS[kind].judge(args, part)]
        if problems:
            mismatch(name, kind, "what its catalog entries set", "; ".join(problems))
    test.__name__ = f"test_{kind}"
    test.__doc__ = f"The host's {kind} knobs as the kind's own judge reads them."
    return test


for _kind in KINDS.values():
    if _kind.observe and _kind.judge:
        probe(f"test_{_kind.name}")(reading(_kind.name))
        globals()[f"test_{_kind.name}"] = check(_kind.name)
