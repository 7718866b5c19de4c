"""The Debian packages the lab and the tests need on this machine, installed so that none of them
starts or enables a service here.

Debian's packages start and enable their services on install: prometheus and
prometheus-node-exporter would leave a Prometheus server and an exporter running on the
operator's machine, and their recommends more (the collectors' timers, smartmontools' smartd).
Nothing of the lab needs them running: promtool is a command (make monitoring, the drift watch's
unit tests), and tests/lab/test_drift.py starts its own node_exporter on loopback. So apt runs
under a policy-rc.d that refuses every start (unless the machine has one of its own, which is
kept), the monitoring packages come without their recommends, and the units the install enabled
are disabled (and stopped) again.
"""
import contextlib
import os
import subprocess
from pathlib import Path

LAB = ("podman", "runc", "debootstrap", "pciutils", "iptables")
MONITORING = ("prometheus", "prometheus-node-exporter")
POLICY = Path("/usr/sbin/policy-rc.d")
# Present when systemd runs this machine (sd_booted).
SYSTEMD = Path("/run/systemd/system")
# invoke-rc.d and deb-systemd-invoke start nothing while it exits 101 ("action forbidden").
REFUSE = "#!/bin/sh\n# labctl packages: no service starts while the lab's packages install.\nexit 101\n"


def missing(packages, run=subprocess.run):
    return [p for p in packages if run(["dpkg", "-s", p], capture_output=True, check=False).returncode != 0]


def enabled_units(run=subprocess.run, systemd=SYSTEMD):
    """The unit files enabled on this machine (none to tell without systemd)."""
    if not systemd.is_dir():
        return set()
    out = run(["systemctl", "list-unit-files", "--state=enabled", "--no-legend", "--plain"],
              capture_output=True, text=True, check=True).stdout
    return {line.split()[0] for line in out.splitlines() if line.strip()}


@contextlib.contextmanager
def no_service_starts(policy=POLICY):
    """policy-rc.d refusing every start for the duration, unless the machine has its own."""
    if policy.exists():
        yield
        return
    policy.write_text(REFUSE)
    policy.chmod(0o755)
    try:
        yield
    finally:
        policy.unlink()


def install(run=subprocess.run, policy=POLICY, systemd=SYSTEMD):
    """Install what is missing of LAB and MONITORING; one line per step."""
    lab, monitoring = missing(LAB, run), missing(MONITORING, run)
    if not lab and not monitoring:
        return ["packages: " + " ".join(LAB + MONITORING) + " installed"]
    before = enabled_units(run, systemd)
    apt = ["apt-get", "install", "-y", "-qq"]
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    with no_service_starts(policy):
        run(["apt-get", "update", "-qq"], check=True, env=env)
        if lab:
            run([*apt, *lab], check=True, env=env)
        if monitoring:
            run([*apt, "--no-install-recommends", *monitoring], check=True, env=env)
    lines = ["packages: installed " + " ".join(lab + monitoring)]
    enabled = sorted(enabled_units(run, systemd) - before)
    if enabled:
        run(["systemctl", "disable", "--now", *enabled], check=True)
        lines.append("packages: disabled " + " ".join(enabled) + " (enabled by the install; the lab runs what it needs)")
    return lines
