"""Drive the lab from the control node: ansible-playbook, labctl and commands on the hosts.

Shared by the lab tests (tests/lab) and the benchmarks (bench/): both run the project's
playbooks against the lab as an operator would.
"""
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
    """The default fleet recreated from the image (which carries sglang's package files, the
    stand-in server and the model: lab/infra/serving.py)."""
    labctl("up", "--fresh", "--hosts", "8", "--profile", "seed-epyc-rtxpro6000", "--profile-map", "")


def on_host(host, command):
    """Run a shell command inside a lab host; return its stdout."""
    return labctl("exec", host, "--", "sh", "-c", command)


# Everything a tuning run may touch: the simulated hardware and the configuration.
