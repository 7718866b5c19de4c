"""The lab's ssh key pair and the wait for hosts to answer ssh."""
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor

from . import paths

# Lab hosts are recreated at will on the same addresses: never record their host keys.
OPTIONS = ["-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR"]


def ensure_key():
    """Generate the lab's key pair once; return the public key text."""
    if not paths.SSH_KEY.exists():
        paths.SSH_DIR.mkdir(parents=True, exist_ok=True)
        paths.SSH_DIR.chmod(0o700)
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "infertune-lab",
                        "-f", str(paths.SSH_KEY)], check=True)
    return paths.SSH_KEY.with_suffix(".pub").read_text()


def answers(ip):
    """True when root@ip accepts the lab key and runs a command."""
    argv = ["ssh", "-i", str(paths.SSH_KEY), "-o", "BatchMode=yes", "-o", "ConnectTimeout=3", *OPTIONS,
            f"root@{ip}", "true"]
    return subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0


def wait(hosts, timeout=180):
    """Wait until every {name: ip} answers; return the names that never did."""
    deadline = time.monotonic() + timeout

    def one(ip):
        while not answers(ip):
            if time.monotonic() > deadline:
                return False
            time.sleep(1)
        return True

    with ThreadPoolExecutor(max_workers=max(1, min(32, len(hosts)))) as pool:
        results = dict(zip(hosts, pool.map(one, hosts.values())))
    return sorted(name for name, ok in results.items() if not ok)
