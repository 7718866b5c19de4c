"""Run a read-only command under a time limit, and never wait on a child the kernel will not kill.

nvidia-smi on a dying GPU can sit in uninterruptible sleep (D state) inside the driver: SIGKILL
takes effect only when the driver returns, and whatever it forked may hold its pipes open. A
reader that waits for it hangs the play, so past the limit the child's process group is killed
and left behind (init reaps it if it ever ends); the caller gets Unresponsive, a finding.
"""
import os
import signal
import subprocess


class Unresponsive(Exception):
    """The command did not answer within its time limit."""


# How long a killed child gets to go before it is left behind.
REAP_SECONDS = 2


def run(argv, timeout, env=None):
    """(rc, stdout, stderr) of argv, or Unresponsive after `timeout` seconds; a missing binary is
    rc 127, as gate.run answers."""
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, errors="replace", start_new_session=True, env=env)
    except FileNotFoundError:
        return 127, "", "%s: command not found" % argv[0]
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        try:
            proc.wait(timeout=REAP_SECONDS)
        except subprocess.TimeoutExpired:
            pass
        for pipe in (proc.stdout, proc.stderr):
            pipe.close()
        raise Unresponsive("%s did not answer within %s s" % (os.path.basename(argv[0]), timeout))
    return proc.returncode, out, err
