"""Host fixes this machine needs before it can run systemd containers (see lab/README.md "Host fixes")."""
import subprocess

from . import paths, podman

INOTIFY_KEY = "fs.inotify.max_user_instances"
# Each systemd container takes ~7 inotify instances; the default 128 stops at ~18 hosts.
INOTIFY_MIN = 1024
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
