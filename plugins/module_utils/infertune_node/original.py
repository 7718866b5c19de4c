"""What a host had before infertune changed it, one record per knob, for the kinds' revert.

The first apply of a knob that changes something (a write or a command through the gate) records
the host's own state first, raw and restorable (per CPU, per device, per port, per sysctl: the
kind's `original`, not the summarized before), in DIR/<knob>.json, through the gate: never under
check mode. A recorded value is never overwritten by a later apply; an element the knob reaches
later (a sysctl added to the list, a new file of the boot-time tool) is added as it was then.
Revert reads the record, puts the host back, and removes the record (forget); DIR itself goes
with the last one, and PARENT once nothing of infertune's is left in it.
"""
import json
import os
import re

from . import sysfs
from .gate import TuningError

PARENT = "/var/lib/infertune"
DIR = PARENT + "/original"
# A knob's name is the record's file name: nothing a path could be made of.
NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]*")


def path(root, name):
    if not NAME.fullmatch(str(name)):
        raise TuningError("knob name %r cannot name its record (%s)" % (name, NAME.pattern))
    return sysfs.path(root, "%s/%s.json" % (DIR, name))


def read(root, name):
    """The recorded state of knob `name`, or None where nothing was recorded."""
    try:
        with open(path(root, name)) as handle:
            return json.load(handle)["state"]
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise TuningError("cannot read the record of %s's original state (%s): %s"
                          % (name, path(root, name), exc)) from exc


def merge(old, new):
    """old with what new adds: a recorded value stays, keys old lacks come from new (mappings
    merged key by key, anything else kept as old has it)."""
    if not (isinstance(old, dict) and isinstance(new, dict)):
        return old
    out = dict(old)
    for key, value in new.items():
        out[key] = merge(old[key], value) if key in old else value
    return out


def keep(root, name, kind, args, gate, apply):
    """apply() (the kind's apply with its arguments), recording the host's state before it where
    it changes something: a check-mode gate, a knob without a name or a kind without `original`
    records nothing. Recorded when the apply fails part way too: what it did write goes back."""
    if gate.check_mode or not name or kind.original is None:
        return apply()
    old = read(root, name)
    state = kind.original(root, args)
    writes = len(gate.actions)
    try:
        return apply()
    finally:
        if len(gate.actions) > writes:
            merged = state if old is None else merge(old, state)
            if merged != old:
                record = {"knob": name, "kind": kind.name, "state": merged}
                # Root's alone: a unit's files it held before infertune's are kept here as they were.
                gate.write_file(path(root, name), json.dumps(record, indent=1, sort_keys=True) + "\n", mode=0o600)


def give_back(root, files, saved, header, gate):
    """A record's files ({path: content, None where the file did not exist}) given back in path
    order: each written as recorded, or removed. Without a record (saved None) a file there that
    does not start with the kind's header is not infertune's, and is left. (changes, lines, diffs):
    (path, content before, content given back) per file changed, its line for the msg, its diff."""
    changes, lines, diffs = [], [], []
    for rel, content in sorted(files.items()):
        old = sysfs.content(root, rel)
        if old == content or (content is None and old is not None and saved is None and not old.startswith(header)):
            continue
        if content is None:
            gate.remove(sysfs.path(root, rel))
        else:
            gate.write_file(sysfs.path(root, rel), content)
        changes.append((rel, old, content))
        lines.append("%s %s" % (rel, "removed" if content is None else "as before infertune"))
        diffs.append({"before": old or "", "after": content or "", "before_header": rel, "after_header": rel})
    return changes, lines, diffs


def forget(root, name, gate):
    """Remove knob `name`'s record, then DIR and PARENT where nothing else is left in them.
    Whether a record was there to remove."""
    target = path(root, name)
    found = os.path.exists(target)
    gate.remove(target)
    tidy(root, gate, gone=[target] if found else [])
    return found


def tidy(root, gate, gone=()):
    """DIR, then PARENT, removed once empty (under check mode, once empty but for `gone`: what this
    run would have removed)."""
    for directory in (DIR, PARENT):
        full = sysfs.path(root, directory)
        if not os.path.isdir(full):
            continue
        left = [os.path.join(full, entry) for entry in os.listdir(full)]
        if all(entry in gone for entry in left):
            gate.remove(full)
            gone = list(gone) + [full]
