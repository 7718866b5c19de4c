"""Which machine this is: /etc/machine-id and the addresses of its interfaces.

Read from files only (/proc/net/fib_trie, /proc/net/if_inet6), so the host_identity module and
the control node (infertune/control_node.py) read them with the same code and the same rules.
"""
import ipaddress

from . import sysfs


def machine_id(root):
    """/etc/machine-id, or None where it is missing or empty (not yet initialised)."""
    return sysfs.read(root, "/etc/machine-id") or None


def addresses(root):
    """Every local IPv4 and IPv6 address, loopback included, IPv4 first."""
    found, current = set(), None
    for line in (sysfs.read(root, "/proc/net/fib_trie") or "").splitlines():
        words = line.split()
        if words[:1] == ["|--"]:
            current = words[1]
        elif words == ["/32", "host", "LOCAL"] and current:
            found.add(ipaddress.ip_address(current))
    for line in (sysfs.read(root, "/proc/net/if_inet6") or "").splitlines():
        found.add(ipaddress.IPv6Address(int(line.split()[0], 16)))
    return [str(a) for a in sorted(found, key=lambda a: (a.version, a))]
