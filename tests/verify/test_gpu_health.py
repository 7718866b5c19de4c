"""The GPUs' health after the rollout (role gpu_gate): no GPU reset or rma. Read in the GPU checks'
own nvidia-smi round, with the kernel log's Xids since this boot, and judged by the plan's own
table (plugins/module_utils/infertune_node/gpu_health.py); what needs earlier reads (an Xid again
after a reboot, counters rising) is the plan's and the drift watch's."""
import pytest

from expected import truthy
from infertune_node.gpu_health import ABSENT, XID_LINE, bus_prefix, classify, lines, xid_signal, worst
from outcome import mismatch, not_applicable
from readings import gpu_health_reading


@pytest.fixture(scope="module")
def gpu_health(gpu_output):
    return gpu_health_reading(gpu_output)


def kernel_xids(found):
    """{bus prefix: {xid: count}} of the kernel log's Xid lines."""
    out = {}
    for line in found:
        match = XID_LINE.search(line.encode("latin-1"))
        if match:
            bus = out.setdefault(bus_prefix(*[part.decode() for part in match.groups()[:3]]), {})
            bus[match.group(4).decode()] = bus.get(match.group(4).decode(), 0) + 1
    return out


def test_gpu_health(name, gpu_health, want):
    if not truthy(want["gpu_gate_health"]):
        not_applicable(name, "GPU health", "gpu_gate_health is false")
    rows, kernel, other = gpu_health
    if not rows:
        mismatch(name, "GPU health", "every GPU's health read", "no GPU answered (nvidia-smi: " + "; ".join(other)[-300:] + ")")
    limits = {"sram_uncorrectable_max": int(want["gpu_gate_health_sram_uncorrectable_max"]),
              "remap_uncorrectable_max": int(want["gpu_gate_health_remap_uncorrectable_max"])}
    xids = kernel_xids(kernel) if kernel is not None else {}
    gpus = []
    for index, bus_id, raw in rows:
        signals = classify(raw, limits)
        domain, bus, device = bus_id.split(":")
        signals["xid"] = xid_signal(xids.get(bus_prefix(domain, bus, device.split(".")[0]), {}))
        serial = raw.get("serial")
        gpus.append({"index": index, "bus_id": bus_id, "uuid": raw.get("uuid"),
                     "serial": None if serial in ABSENT or str(serial).startswith("[") else serial,
                     "signals": signals, "class": worst(found for found, detail in signals.values())})
    found = lines(gpus)
    if found:
        mismatch(name, "GPU health", "no GPU reset or rma", "; ".join(found))
