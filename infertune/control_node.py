"""Never converge the control node by accident: is a target host the machine running Ansible?

A target is the control node when Ansible reaches it with connection `local`, at a loopback
address, or at one of the control node's own addresses (its ansible_host resolved here), or
when its /etc/machine-id (the host_identity module) equals the control node's. The target's
full address list is not compared: bridges such as docker0 carry the same address on many
machines. A cloned machine that kept its image's machine-id is refused too; regenerate it
(`rm /etc/machine-id && systemd-machine-id-setup`).

    python -m infertune.control_node --address HOST [--connection ssh] [--machine-id ID]

prints {"reason": ...} (null when HOST is not the control node) and exits 1 when it is.
"""
from __future__ import annotations

import argparse
import ipaddress
import json
import socket
import sys

from infertune_node import identity


def own_identity(root: str = "/") -> dict:
    """The control node's machine-id and addresses, read as host_identity reads a host's."""
    return {"machine_id": identity.machine_id(root), "addresses": identity.addresses(root)}


def resolve(address: str) -> list[str]:
    """The addresses a host name or address stands for here (none when it does not resolve)."""
    try:
        infos = socket.getaddrinfo(address, None)
    except (socket.gaierror, UnicodeError):
        return []
    return sorted({info[4][0].split("%")[0] for info in infos})


def reason(address: str | None, machine_id: str | None = None, connection: str = "ssh",
           own: dict | None = None) -> str | None:
    """Why the target reached at ADDRESS with CONNECTION, whose machine-id is MACHINE_ID, is the
    control node; None when it is not. OWN defaults to this machine's identity."""
    own = own or own_identity()
    if connection == "local":
        return "it is reached with connection local, on the control node itself"
    for ip in resolve(address) if address else []:
        if ipaddress.ip_address(ip).is_loopback:
            return f"its address {address} ({ip}) is loopback"
        if ip in own["addresses"]:
            return f"its address {address} ({ip}) belongs to the control node"
    if machine_id and machine_id == own["machine_id"]:
        return f"its /etc/machine-id {machine_id} is the control node's"
    return None


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m infertune.control_node", description=__doc__.partition("\n")[0])
    p.add_argument("--address", help="the address Ansible connects to (ansible_host)")
    p.add_argument("--connection", default="ssh", help="the host's ansible_connection")
    p.add_argument("--machine-id", help="the host's /etc/machine-id (host_identity)")
    a = p.parse_args(argv)
    why = reason(a.address, a.machine_id, a.connection)
    print(json.dumps({"reason": why}))
    return 1 if why else 0


if __name__ == "__main__":
    sys.exit(main())
