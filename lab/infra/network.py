"""The lab's podman network and the check that removing it left no firewall rules behind."""
import subprocess

from . import podman

NAME = "infertune-lab"
# A fixed private /24 so that host addresses (and the inventory) survive recreation.
PREFIX = "10.77.213"
SUBNET = f"{PREFIX}.0/24"
GATEWAY = f"{PREFIX}.1"


def ensure():
    if podman.run("network", "exists", NAME, check=False, capture=False) != 0:
        podman.run("network", "create", "--subnet", SUBNET, "--gateway", GATEWAY, NAME)


def remove():
    if podman.run("network", "exists", NAME, check=False, capture=False) == 0:
        podman.run("network", "rm", "-f", NAME)


def stray_firewall_rules():
    """Lines of iptables/nft rulesets that still mention the lab network (should be none)."""
    needles = (NAME, PREFIX + ".")
    found = []
    for argv in (["iptables-save"], ["nft", "list", "ruleset"]):
        try:
            out = subprocess.run(argv, capture_output=True, text=True).stdout
        except FileNotFoundError:
            continue
        found += [f"{argv[0]}: {line.strip()}" for line in out.splitlines() if any(n in line for n in needles)]
    return found
