"""The lab's podman network and the check that removing it left no firewall rules behind.

The /24 is chosen when the network is created and kept in lab/.state, so host addresses (and
the inventory) survive recreation. A lab killed without `down` (for example from another
checkout) leaves its bridge and firewall rules on the machine; podman then refuses the same
subnet, so the choice skips every /24 that a host route or a firewall rule already uses.
"""
import hashlib
import ipaddress
import json
import subprocess

from . import paths, podman

NAME = "infertune-lab"
STATE = paths.STATE / "network.json"
# 10.77.213.0/24 first: the addresses the docs quote; then the rest of 10.77.0.0/16.
CANDIDATES = [f"10.77.{octet}" for octet in [213, *range(214, 255), *range(1, 213)]]


def prefix():
    """The first three octets of the lab's subnet (the recorded choice, else the first candidate)."""
    if STATE.is_file():
        return json.loads(STATE.read_text())["prefix"]
    return CANDIDATES[0]


def ensure():
    if podman.run("network", "exists", NAME, check=False, capture=False) == 0:
        subnet = podman.run("network", "inspect", "--format", "{{range .Subnets}}{{.Subnet}}{{end}}", NAME)
        chosen = subnet.rsplit(".", 1)[0]
    else:
        chosen = choose(routed_networks(), firewall_lines(), prefer=prefix())
        podman.run("network", "create", "--subnet", f"{chosen}.0/24", "--gateway", f"{chosen}.1", NAME)
        name_bridge()
    STATE.parent.mkdir(parents=True, exist_ok=True)
    STATE.write_text(json.dumps({"prefix": chosen}) + "\n")


def bridge_name():
    """The bridge's interface name, one per checkout: podman numbers bridges (podman1, ...) per
    network config directory, so two checkouts' labs would otherwise claim the same interface."""
    return "itl" + hashlib.sha256(str(paths.STATE).encode()).hexdigest()[:10]


def name_bridge():
    """Give the new, still unused network this checkout's bridge name. podman 4.3 (Debian 12)
    has no --interface-name; it reads the network's JSON file at every call."""
    config = paths.PODMAN_STATE / "networks" / f"{NAME}.json"
    data = json.loads(config.read_text())
    data["network_interface"] = bridge_name()
    config.write_text(json.dumps(data, indent=5) + "\n")


def choose(routed, rules, prefer):
    """First free /24 prefix, `prefer` first; routed: [IPv4Network]; rules: firewall rule lines."""
    for candidate in [prefer, *[c for c in CANDIDATES if c != prefer]]:
        subnet = ipaddress.ip_network(f"{candidate}.0/24")
        if any(subnet.overlaps(net) for net in routed):
            continue
        if any(candidate + "." in line for line in rules):
            continue
        return candidate
    raise RuntimeError("no free /24 in 10.77.0.0/16 for the lab network (all routed or in firewall rules)")


def routed_networks():
    """IPv4 networks this machine routes to, the default route left out."""
    out = subprocess.run(["ip", "-4", "-o", "route", "show", "table", "all"],
                         capture_output=True, text=True, check=True).stdout
    nets = []
    for line in out.splitlines():
        words = line.split()
        if words and words[0] in ("local", "broadcast", "unicast", "blackhole", "unreachable"):
            words = words[1:]
        if not words or words[0] == "default":
            continue
        try:
            nets.append(ipaddress.ip_network(words[0], strict=False))
        except ValueError:
            continue
    return nets


def remove():
    if podman.run("network", "exists", NAME, check=False, capture=False) == 0:
        podman.run("network", "rm", "-f", NAME)


def firewall_lines():
    lines = []
    for argv in (["iptables-save"], ["nft", "list", "ruleset"]):
        try:
            out = subprocess.run(argv, capture_output=True, text=True).stdout
        except FileNotFoundError:
            continue
        lines += [f"{argv[0]}: {line.strip()}" for line in out.splitlines()]
    return lines


def stray_firewall_rules():
    """Lines of iptables/nft rulesets that still mention the lab network (should be none)."""
    needle = prefix() + "."
    return [line for line in firewall_lines() if needle in line]
