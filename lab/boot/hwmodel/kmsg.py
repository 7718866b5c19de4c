"""The kernel's log as /dev/kmsg hands it out, one record per line ("PRI,SEQ,USEC,FLAGS;TEXT"):
what the NVIDIA driver writes at load and the Xids it reports, in its own words.

The container has no /dev/kmsg of its own (the machine's ring buffer is not the lab host's):
boot renders this one at /run/lab-hw/kmsg and binds it over /dev/kmsg, read-only, and a fault
set while the host runs appends to it (lab/boot/lab-kmsg), as the driver does when a GPU fails.
"""
import os
import time

from .files import write

KMSG = "kmsg"
BOOTED = "booted"
# What the driver says after the Xid number (its message), for the Xids the lab's faults use; others
# get a generic text.
XID_TEXT = {
    13: "Graphics Exception: ESR 0x404600=0x80000002",
    48: "An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition 3",
    63: "Row Remapper: New row marked for remapping, reset gpu to activate.",
    64: "Row Remapper: Failed to mark a row for remapping",
    79: "GPU has fallen off the bus.",
    94: "Contained: SM (0x1). RST: No, D-RST: No",
    95: "Uncontained: FBHUB. RST: Yes, D-RST: No",
    119: "Timeout after 6s of waiting for RPC response from GPU0 GSP! Expected function 76 (GSP_RM_CONTROL)",
}


def xid_text(bus_id, number, pid=4242, name="python3"):
    """The driver's line for Xid NUMBER on the GPU at BUS_ID (00000000:13:00.0 as nvidia-smi has it)."""
    domain, bus, device = bus_id.split(":")
    where = "PCI:%04x:%s:%s" % (int(domain, 16), bus.lower(), device.split(".")[0].lower())
    return "NVRM: Xid (%s): %d, pid=%d, name=%s, %s" % (where, number, pid, name,
                                                        XID_TEXT.get(number, "Graphics Engine Error"))


def record(seq, usec, text, priority=4):
    return "%d,%d,%d,-;%s\n" % (priority, seq, usec, text)


def render(out, driver_version, driver_loaded, xids):
    """The log at boot: the driver's load line and each Xid ((bus id, number)) a persistent fault
    makes the GPU report at every boot; and the boot's time, which later records count from."""
    write(os.path.join(out, BOOTED), "%f" % time.time())
    lines = []
    if driver_loaded:
        lines.append(record(0, 432907, "NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  %s  Release Build"
                            % driver_version, 6))
        lines += [record(len(lines), 9000000 + i, xid_text(bus, number)) for i, (bus, number) in enumerate(xids)]
    with open(os.path.join(out, KMSG), "w") as f:
        f.write("".join(lines))


def append(out, text):
    """One more record, as the driver writes it while the host runs."""
    path = os.path.join(out, KMSG)
    with open(os.path.join(out, BOOTED)) as f:
        booted = float(f.read())
    with open(path) as f:
        seq = sum(1 for _ in f)
    with open(path, "a") as f:
        f.write(record(seq, int((time.time() - booted) * 1e6), text))


def booted_at(out):
    """When this boot began (seconds since the epoch): a fault set before it, that a reset clears, is gone."""
    with open(os.path.join(out, BOOTED)) as f:
        return float(f.read())
