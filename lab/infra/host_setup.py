"""Host fixes this machine needs before it can run systemd containers (see lab/README.md "Host fixes")."""
import subprocess

from . import paths, podman

INOTIFY_KEY = "fs.inotify.max_user_instances"
# Each systemd container takes INOTIFY_PER_HOST inotify instances, counted per user (root) across
# every lab on the machine: the default 128 stops at ~18 hosts, 1024 at ~140 (two labs of 64 and 8
# took 504). 8192 leaves the bound to the lab's /24 (244 hosts), with another lab beside it.
INOTIFY_PER_HOST = 7
INOTIFY_MIN = 8192
TEMPLATES = paths.LAB / "podman"


def _raise_inotify():
    current = int(subprocess.run(["sysctl", "-n", INOTIFY_KEY], check=True, capture_output=True,
                                 text=True).stdout)
    if current >= INOTIFY_MIN:
        return f"{INOTIFY_KEY} = {current} (kept)"
    subprocess.run(["sysctl", "-q", "-w", f"{INOTIFY_KEY}={INOTIFY_MIN}"], check=True)
    return f"{INOTIFY_KEY}: {current} -> {INOTIFY_MIN}"


def _render(template, target):
    text = (TEMPLATES / template).read_text().replace("{state}", str(paths.PODMAN_STATE))
    if target.exists() and target.read_text() == text:
        return f"{target.name} unchanged"
    target.write_text(text)
    return f"{target.name} written"


def setup():
    """Apply the fixes; idempotent. Returns one line per fix."""
    paths.PODMAN_STATE.mkdir(parents=True, exist_ok=True)
    for sub in ("tmp", "networks"):
        (paths.PODMAN_STATE / sub).mkdir(exist_ok=True)
    return [
        _raise_inotify(),
        _render("containers.conf.in", podman.CONF),
        _render("storage.conf.in", podman.STORAGE_CONF),
    ]
