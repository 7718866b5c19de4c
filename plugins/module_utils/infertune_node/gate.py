"""The single place where infertune changes a host.

Modules and the boot-time tool route every write and every state-changing
command through one Gate. In check mode the Gate only records what it would
have done, so `changed` stays honest while nothing on disk moves.
"""
import os
import shutil
import subprocess
import tempfile


class TuningError(Exception):
    """A knob cannot be applied; the message is shown to the operator as is."""


def run(argv):
    """Run a command and return (rc, stdout, stderr); a missing binary is rc 127."""
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    except FileNotFoundError:
        return 127, "", "%s: command not found" % argv[0]
    return proc.returncode, proc.stdout, proc.stderr


class Gate:
    def __init__(self, check_mode=False, runner=None):
        self.check_mode = check_mode
        self.runner = runner or run
        self.actions = []

    def write_sysfs(self, path, value):
        """Write one attribute in place; sysfs files cannot be replaced by rename."""
        self.actions.append("write %s = %s" % (path, value))
        if self.check_mode:
            return
        try:
            with open(path, "w") as handle:
                handle.write(value)
        except OSError as exc:
            raise TuningError("cannot write %r to %s: %s" % (value, path, exc.strerror)) from exc

    def write_file(self, path, content, mode=0o644):
        """Replace a configuration file atomically so a crash never leaves half a file."""
        self.actions.append("write %s" % path)
        if self.check_mode:
            return
        directory = os.path.dirname(path)
        os.makedirs(directory, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".infertune-")
        try:
            with os.fdopen(fd, "w") as handle:
                handle.write(content)
            os.chmod(tmp, mode)
            os.replace(tmp, path)
        except OSError as exc:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise TuningError("cannot write %s: %s" % (path, exc.strerror)) from exc

    def remove(self, path):
        """Remove a file, a link or a directory tree of infertune's own; one already gone is no action."""
        if not os.path.lexists(path):
            return
        self.actions.append("remove %s" % path)
        if self.check_mode:
            return
        try:
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path)
            else:
                os.unlink(path)
        except OSError as exc:
            raise TuningError("cannot remove %s: %s" % (path, exc.strerror)) from exc

    def run(self, argv):
        """Run a state-changing command; in check mode return None without running it."""
        self.actions.append(" ".join(argv))
        if self.check_mode:
            return None
        return self.runner(argv)

    def run_or_fail(self, argv):
        result = self.run(argv)
        if result is not None and result[0] != 0:
            detail = result[2].strip() or result[1].strip()
            raise TuningError("%s failed (rc=%d): %s" % (" ".join(argv), result[0], detail))
        return result
