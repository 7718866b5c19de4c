"""Run playbooks and commands against the lab from tests (lab/infra/drive.py), and read its state."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "lab"))
from infra.drive import BIN, ROOT, fresh_lab, labctl, on_host, playbook, recap  # noqa: E402,F401

# PCI functions live under /sys/devices/pci* (/sys/bus/pci/devices holds links to them).
STATE_PATHS = ("/etc /boot /sys/devices/system/cpu /sys/devices/pci* /sys/module "
               "/proc/sys/kernel/numa_balancing /proc/sys/vm/swappiness /proc/cmdline /usr/local")


def state_digest(host):
    """One sha256 per file under STATE_PATHS, as a dict path -> digest."""
    out = on_host(host, f"find {STATE_PATHS} -xdev -type f -print0 2>/dev/null"
                        " | sort -z | xargs -0 sha256sum")
    return dict(reversed(line.split(None, 1)) for line in out.splitlines() if line)
