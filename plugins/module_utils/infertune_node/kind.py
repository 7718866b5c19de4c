"""What a knob kind is. A kind is one module of this package that defines KIND: its apply function
(read, compare, write through the gate, which predicts under check mode), the arguments a catalog
entry gives it, how its values read in the report, and the rule makers its variables' validation
may name. kinds.py, generated from the modules that define KIND, is the registry every caller
reads: the knob module, the plan, the boot-time tool, the report and the input validation. Its third
verb, revert, puts back what the host had before infertune (original.py keeps the record)."""
import copy


class Rule:
    """check(value, emit) calls emit(rule_text, suffix="", value=...) for each problem; doc says the rule."""

    def __init__(self, doc, check):
        self.doc = doc
        self.check = check


def is_int(value):
    """An integer, not a boolean (YAML's true is an int to Python)."""
    return isinstance(value, int) and not isinstance(value, bool)


REQUIRED = object()
TRUE = ("1", "yes", "true", "on", "y", "t")
FALSE = ("0", "no", "false", "off", "n", "f", "")


def _coerce(kind, name, value, wanted):
    """value as the type the argument takes; a templated catalog entry may give a number or a
    boolean as text (-e gives strings)."""
    if wanted is None or value is None:
        return value
    if wanted is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in TRUE + FALSE:
            return value.strip().lower() in TRUE
        if isinstance(value, int):
            return bool(value)
    elif wanted is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lstrip("-").isdigit():
            return int(value)
    elif wanted is str:
        if isinstance(value, (str, int)) and not isinstance(value, bool):
            return str(value)
    elif isinstance(value, wanted):
        return value
    said = getattr(wanted, "__name__", wanted)
    raise ValueError("%s: argument %s must be %s, got %s" % (kind, name, said, type(value).__name__))


class Kind:
    """One knob kind.

    name: the catalog entry's `module`. apply(root, args, gate) returns its result (changed, before,
    after, msg, and what the contract asks). args: {argument: (type or None, default or REQUIRED)},
    the arguments a catalog entry may give (others are refused). say(value): one side of a change
    in words (the report's before -> after; None: the value as text); nothing: what an empty side
    says; change(before, after, differs): the whole change in words where the kind says it better than
    before -> after (None from it: before -> after after all). makers: {rule maker name: function
    returning a Rule} for the input validation of the variables its catalog entries read.
    observe(args) and judge(args, output): a kind that verifies itself gives the shell command that
    reads what its knob set on a host and the problems in that output ([] when set as asked);
    tests/verify/test_kinds.py runs them as test_<name>, apart from apply's code.

    revert(root, args, saved, gate): the host put back as it was before infertune, a result in
    apply's shape (changed, before, after, msg; reboot_required where the next boot differs from what
    runs, runtime_pending where the running host changes), check mode through the gate, and
    idempotent; saved is what original(root, args) recorded before the knob's first change (None:
    nothing was recorded; revert then falls back to the kernel's default where it is knowable, else
    leaves the value and says so); a kind that leaves something (deb_package, its package) says so in
    its msg. original: None for a kind whose revert needs no record of its own (apt_hold keeps its
    holds, deb_package leaves the package)."""

    def __init__(self, name, apply, args, say=None, nothing=None, change=None, makers=None, observe=None, judge=None,
                 revert=None, original=None):
        self.name = name
        self.apply = apply
        self.args = dict(args)
        self.say = say
        self.nothing = nothing
        self.change = change
        self.makers = dict(makers or {})
        self.observe = observe
        self.judge = judge
        self.revert = revert
        self.original = original

    def arguments(self, given):
        """The arguments checked against the schema and coerced to its types; ValueError names the
        kind and the argument."""
        if not isinstance(given, dict):
            raise ValueError("arguments of %s must be a mapping, got %s" % (self.name, type(given).__name__))
        unknown = sorted(set(given) - set(self.args))
        if unknown:
            raise ValueError("%s takes no argument %s (it takes %s)"
                             % (self.name, ", ".join(unknown), ", ".join(sorted(self.args))))
        out = {}
        for name, (wanted, default) in self.args.items():
            if name in given:
                out[name] = _coerce(self.name, name, given[name], wanted)
            elif default is REQUIRED:
                raise ValueError("%s: missing argument %s" % (self.name, name))
            else:
                out[name] = copy.deepcopy(default)  # a list default is never shared between calls
        return out
