"""A generated section of a document: the part between two HTML comment markers, rewritten
from code (docs/variables.md's tables, docs/gpu-gate.md's MoE verdicts) and checked by a unit
test so the document cannot go stale."""
import argparse
from pathlib import Path

from . import collection_files


def rewrite(text, generated, start_marker, end_marker, name="the document"):
    """text with the part between the markers (markers included) replaced; ValueError without markers."""
    start, end = text.find(start_marker), text.find(end_marker)
    if start < 0 or end < start:
        raise ValueError("%s has no %s ... %s section" % (name, start_marker, end_marker))
    return text[:start] + generated + text[end + len(end_marker):]


def main(argv, description, render, rewrite_doc, option, default, what, module):
    """The shared command line: print the section, --write it into the document, or --check it
    (exit 1 when stale). option names the document's flag (--readme, --doc); what names the
    section and module the command that rewrites it, in the stale message."""
    parser = argparse.ArgumentParser(prog="python -m " + module, description=description)
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--write", action="store_true", help="rewrite the document between the markers")
    group.add_argument("--check", action="store_true", help="exit 1 when the document is out of date")
    parser.add_argument(option, dest="doc", type=Path, default=default)
    args = parser.parse_args(argv)
    collection_files(parser.prog, "files the section is generated from")
    generated = render()
    if not (args.write or args.check):
        print(generated)
        return 0
    text = args.doc.read_text(encoding="utf-8")
    new = rewrite_doc(text, generated)
    if args.check:
        if new != text:
            print("%s: %s is out of date; run python -m %s --write" % (args.doc, what, module))
            return 1
        return 0
    if new != text:
        args.doc.write_text(new, encoding="utf-8")
    return 0
