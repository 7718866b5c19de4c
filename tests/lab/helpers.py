"""Run playbooks and commands against the lab from tests."""
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BIN = ROOT / ".venv" / "bin"
RECAP = re.compile(
    r"^(?P<host>\S+)\s+:\s+ok=(?P<ok>\d+)\s+changed=(?P<changed>\d+)\s+unreachable=(?P<unreachable>\d+)"
    r"\s+failed=(?P<failed>\d+)\s+skipped=(?P<skipped>\d+)",
    re.M,
)


def playbook(*args, check=False):
    """Run ansible-playbook from the repository root; return (rc, output)."""
    proc = subprocess.run(
        [str(BIN / "ansible-playbook"), *args],
        cwd=ROOT, capture_output=True, text=True, check=False,
    )
    out = proc.stdout + proc.stderr
    if check and proc.returncode:
        raise AssertionError(f"ansible-playbook {' '.join(args)} failed:\n{out[-6000:]}")
    return proc.returncode, out


def recap(output):
    """PLAY RECAP as {host: {ok, changed, unreachable, failed, skipped}}."""
    return {m["host"]: {k: int(v) for k, v in m.groupdict().items() if k != "host"}
            for m in RECAP.finditer(output)}


def labctl(*args):
    proc = subprocess.run([str(BIN / "python"), str(ROOT / "lab" / "labctl"), *args],
                          cwd=ROOT, capture_output=True, text=True, check=False)
    if proc.returncode:
        raise AssertionError(f"labctl {' '.join(args)} failed:\n{proc.stdout}{proc.stderr}")
    return proc.stdout


def fresh_lab():
    """The default fleet recreated from the image, with sglang's package files installed."""
    labctl("up", "--fresh", "--hosts", "8", "--profile", "seed-epyc-rtxpro6000", "--profile-map", "")
    playbook("lab/provision/sglang.yml", check=True)


def on_host(host, command):
    """Run a shell command inside a lab host; return its stdout."""
    return labctl("exec", host, "--", "sh", "-c", command)


# Everything a tuning run may touch: the simulated hardware and the configuration.
STATE_PATHS = ("/etc /boot /sys/devices/system/cpu /sys/bus/pci/devices /sys/module "
               "/proc/sys/kernel/numa_balancing /proc/cmdline /usr/local")


def state_digest(host):
    """One sha256 per file under STATE_PATHS, as a dict path -> digest."""
    out = on_host(host, f"find {STATE_PATHS} -xdev -type f -print0 2>/dev/null"
                        " | sort -z | xargs -0 sha256sum")
    return dict(reversed(line.split(None, 1)) for line in out.splitlines() if line)
