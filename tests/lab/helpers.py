"""Run playbooks and commands against the lab from tests (lab/infra/drive.py), and read its state."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "lab"))
from infra.drive import BIN, ROOT, fresh_lab, labctl, on_host, playbook, recap  # noqa: E402,F401

# MaxReadReq back to 512 on the GPU endpoints (NVIDIA, class 0x0300 or 0x0302): a config-space
# write under the GPUs' DMA, a change whose repair drains a serving host.
GPU_MRRS_512 = ("for d in /sys/bus/pci/devices/*; do [ $(cat $d/vendor) = 0x10de ] && case $(cut -c1-6 $d/class) in"
                " 0x0300|0x0302) setpci -s $(basename $d) CAP_EXP+8.w=2000:7000;; esac; done")


def gpu_mrrs(host):
    """The MaxReadReq values lspci reads on the host's NVIDIA functions, sorted, distinct."""
    return on_host(host, "lspci -vvv -d 10de: | grep -o 'MaxReadReq [0-9]*' | sort -u").splitlines()


# PCI functions live under /sys/devices/pci* (/sys/bus/pci/devices holds links to them).
STATE_PATHS = ("/etc /boot /sys/devices/system/cpu /sys/devices/pci* /sys/module "
               "/proc/sys/kernel/numa_balancing /proc/sys/vm/swappiness /proc/cmdline /usr/local")


def state_digest(host):
    """One sha256 per file under STATE_PATHS, as a dict path -> digest."""
    out = on_host(host, f"find {STATE_PATHS} -xdev -type f -print0 2>/dev/null"
                        " | sort -z | xargs -0 sha256sum")
    return dict(reversed(line.split(None, 1)) for line in out.splitlines() if line)
