"""The lab hosts' unprivileged login, as a real fleet has: USER with the lab key and
passwordless sudo (the lab inventory still logs in as root unless told otherwise)."""
import subprocess
from concurrent.futures import ThreadPoolExecutor

from . import paths, podman

USER = "infertune"
# sudo is not in the image, and adding it there means an image rebuild: the .deb comes
# from this machine's apt (Debian 12, like the hosts) on standard input instead. Ends by
# proving that USER gets root through sudo without a password.
SETUP = f"""set -eu
command -v sudo >/dev/null || {{ t=$(mktemp); cat >"$t"; dpkg -i "$t" >/dev/null; rm -f "$t"; }}
id -u {USER} >/dev/null 2>&1 || useradd --create-home --shell /bin/bash {USER}
install -d -m 0700 -o {USER} -g {USER} /home/{USER}/.ssh
install -m 0600 -o {USER} -g {USER} /lab/host/authorized_keys /home/{USER}/.ssh/authorized_keys
echo '{USER} ALL=(ALL:ALL) NOPASSWD: ALL' >/etc/sudoers.d/{USER}
chmod 0440 /etc/sudoers.d/{USER}
test "$(runuser -u {USER} -- sudo -n id -u)" = 0
"""


def _sudo_deb():
    """sudo's package file, downloaded once into lab/.state/debs/."""
    found = sorted(paths.DEBS.glob("sudo_*.deb"))
    if not found:
        paths.DEBS.mkdir(parents=True, exist_ok=True)
        proc = subprocess.run(["apt-get", "download", "sudo"], cwd=paths.DEBS, capture_output=True, text=True)
        found = sorted(paths.DEBS.glob("sudo_*.deb"))
        if proc.returncode != 0 or not found:
            raise RuntimeError(f"apt-get download sudo failed (apt-get update first?): {proc.stderr.strip()}")
    return found[-1]


def ensure(hosts):
    """Give every running, booted host USER (idempotent; the container keeps it across reboots)."""
    deb = _sudo_deb()

    def one(host):
        with deb.open("rb") as package:
            podman.run("exec", "-i", host.container, "sh", "-c", SETUP, stdin=package)

    with ThreadPoolExecutor(max_workers=max(1, min(32, len(hosts)))) as pool:
        list(pool.map(one, hosts))
