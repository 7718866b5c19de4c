"""The lab's ssh key pair, the hosts' known host keys and the wait for hosts to answer ssh."""
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor

from . import paths, podman

# Host keys are checked, as on a real fleet, against the lab's own known_hosts.
OPTIONS = ["-o", f"UserKnownHostsFile={paths.KNOWN_HOSTS}", "-o", "StrictHostKeyChecking=yes"]


def ensure_key():
    """Generate the lab's key pair once; return the public key text."""
    if not paths.SSH_KEY.exists():
        paths.SSH_DIR.mkdir(parents=True, exist_ok=True)
        paths.SSH_DIR.chmod(0o700)
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "infertune-lab",
                        "-f", str(paths.SSH_KEY)], check=True)
    return paths.SSH_KEY.with_suffix(".pub").read_text()


def record_host_keys(hosts):
    """Write known_hosts from the keys each host holds, read inside its container: no
    trust on first use over the network. Hosts are recreated on the same addresses, so
    the file is rewritten whole. hosts: [Host], running."""
    def keys(host):
        out = podman.run("exec", host.container, "sh", "-c", "cat /etc/ssh/ssh_host_*_key.pub")
        return [f"{host.ip} {' '.join(line.split()[:2])}" for line in out.splitlines() if line.strip()]

    with ThreadPoolExecutor(max_workers=max(1, min(32, len(hosts)))) as pool:
        lines = [line for host_lines in pool.map(keys, hosts) for line in host_lines]
    paths.SSH_DIR.mkdir(parents=True, exist_ok=True)
    tmp = paths.KNOWN_HOSTS.with_suffix(".tmp")
    tmp.write_text("".join(line + "\n" for line in lines))
    tmp.replace(paths.KNOWN_HOSTS)


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
