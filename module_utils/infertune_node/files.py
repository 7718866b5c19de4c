"""Install a set of files in one pass: content and mode, atomically, through the Gate.

One module call for all the files of a component keeps a no-op run to a single
round trip, where copy/template would cost two per file.
"""
import os
import stat
import tempfile

from . import sysfs
from .gate import TuningError


def _current(path):
    """(content, mode) of an existing file, or (None, None)."""
    try:
        with open(path) as handle:
            content = handle.read()
        return content, stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        return None, None
    except (OSError, UnicodeDecodeError) as exc:
        raise TuningError("cannot read %s: %s" % (path, exc)) from exc


def _validate(gate, command, content, directory):
    """Run e.g. `bash -n %s` on the new content before it replaces anything."""
    fd, tmp = tempfile.mkstemp(dir=directory if os.path.isdir(directory) else None, prefix=".infertune-check-")
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(content)
        rc, out, err = gate.runner(command.replace("%s", tmp).split())
    finally:
        os.unlink(tmp)
    if rc != 0:
        raise TuningError("validation `%s` failed: %s" % (command, (err or out).strip()))


def install(root, files, gate):
    """files: [{path, content, mode (octal string), validate (optional, with %s)}]."""
    changed, diffs = [], []
    for spec in files:
        path = sysfs.path(root, spec["path"])
        mode = int(str(spec.get("mode", "0644")), 8)
        before, before_mode = _current(path)
        if before == spec["content"] and before_mode == mode:
            continue
        if spec.get("validate"):
            _validate(gate, spec["validate"], spec["content"], os.path.dirname(path))
        if before == spec["content"]:
            gate.actions.append("chmod %o %s" % (mode, path))
            if not gate.check_mode:
                os.chmod(path, mode)
        else:
            gate.write_file(path, spec["content"], mode)
        changed.append(spec["path"])
        diffs.append({"before_header": spec["path"], "after_header": spec["path"],
                      "before": before if before is not None else "",
                      "after": spec["content"]})
    return {"changed": bool(changed), "files": changed, "diff": diffs}
