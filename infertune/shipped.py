"""Files the control node ships from this collection to the hosts (the boot-time tool and its
library, tasks/render.yml of tuning_persistence): named by `src`, their content read here, where
a module's arguments are built (the plan's action, the knob action). No task's arguments or
result carry it: the library is some 200 KB of source, which a job log would otherwise hold
once per host.
"""
from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from . import COLLECTION


def content(src, root=COLLECTION):
    """The text of `src`, a file of the collection, as Ansible's file lookup reads it (no newline
    translation); ValueError for a path outside the collection."""
    path, base = Path(src).resolve(), Path(root).resolve()
    if not path.is_relative_to(base):
        raise ValueError(f"{src}: not a file of the collection {base}")
    return path.read_bytes().decode("utf-8")


def inline(files, root=COLLECTION):
    """The file entries ({path, src or content, ...}) with each src replaced by its content."""
    return [{**{k: v for k, v in entry.items() if k != "src"}, "content": content(entry["src"], root)}
            if isinstance(entry, Mapping) and "src" in entry and "content" not in entry else entry
            for entry in files or []]


def inline_args(args, root=COLLECTION):
    """A unit knob's arguments with its files' content read (other arguments as they are)."""
    if not isinstance(args, Mapping) or not isinstance(args.get("files"), list):
        return args
    return {**args, "files": inline(args["files"], root)}
