"""Every podman call of the lab goes through run(), with the lab's own podman configuration."""
import os
import subprocess

from . import paths

CONF = paths.PODMAN_STATE / "containers.conf"
STORAGE_CONF = paths.PODMAN_STATE / "storage.conf"


def env():
    return dict(os.environ, CONTAINERS_CONF=str(CONF), CONTAINERS_STORAGE_CONF=str(STORAGE_CONF))


def run(*args, check=True, capture=True, stdin=None):
    """Run `podman ARGS`; return stdout (stripped) when captured."""
    if not CONF.exists():
        raise RuntimeError("podman is not configured for the lab: run `lab/labctl host-setup` first")
    proc = subprocess.run(
        ["podman", *args], env=env(), check=False, stdin=stdin,
        stdout=subprocess.PIPE if capture else None, stderr=subprocess.PIPE if capture else None, text=True,
    )
    if check and proc.returncode != 0:
        detail = (proc.stderr or "").strip() if capture else ""
        raise RuntimeError(f"podman {' '.join(args)} failed ({proc.returncode}): {detail}")
    return proc.stdout.strip() if capture else proc.returncode


def exec_argv(*args):
    """argv and env to os.execvpe podman (for interactive passthrough)."""
    return ["podman", *args], env()
