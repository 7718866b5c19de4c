"""NVIDIA module options and persistence mode (role nvidia) and the GPUs the gate expects (role gpu_gate)."""
import shlex

import pytest

from expected import truthy
from outcome import mismatch, not_applicable
from probes import probe
from readings import NO_SYSTEMCTL, grep_files, sections

BOOLEAN = {"y": "1", "yes": "1", "true": "1", "on": "1", "n": "0", "no": "0", "false": "0", "off": "0"}


def normal(value):
    """Module parameters read back Y/N for bools; compare them as 1/0."""
    text = str(value).strip()
    return BOOLEAN.get(text.lower(), text)


def options_in(text):
    """{module: {param: value}} from modprobe.d `options` lines."""
    found = {}
    for line in text.splitlines():
        words = shlex.split(line, comments=True)
        if len(words) > 2 and words[0] == "options":
            for assignment in words[2:]:
                param, sep, value = assignment.partition("=")
                found.setdefault(words[1], {})[param] = value
    return found


def wanted_options(want):
    """{(module, parameter): value} of nvidia_module_options, values as the kernel reads them back."""
    return {(m, p): normal(v) for m, params in want["nvidia_module_options"].items() for p, v in params.items()}


@probe("test_nvidia_module_options")
def options_read(want):
    """The options file, then each wanted parameter as the loaded module has it."""
    live_paths = " ".join(shlex.quote(f"/sys/module/{m}/parameters/{p}") for m, p in wanted_options(want))
    return f"cat {shlex.quote(want['nvidia_options_file'])} 2>/dev/null; echo @@; grep -sH . {live_paths}"


def test_nvidia_module_options(name, sh, want):
    wanted, conf = wanted_options(want), want["nvidia_options_file"]
    text, live = sections(sh(options_read(want)), 2)
    written, live = options_in(text), grep_files(live)
    problems = []
    for (module, param), value in sorted(wanted.items()):
        in_file = written.get(module, {}).get(param)
        running = live.get(f"/sys/module/{module}/parameters/{param}")
        if in_file is None or normal(in_file) != value:
            problems.append(f"{module}.{param} in {conf}: {in_file or 'absent'}")
        # A module that is not loaded takes the file's value when it loads.
        if running is not None and normal(running) != value:
            problems.append(f"{module}.{param} live: {running} (reload the module or reboot)")
    if problems:
        expected = ", ".join(f"{m}.{p}={v}" for (m, p), v in sorted(wanted.items()))
        mismatch(name, "NVIDIA module options", f"{expected} in {conf} and live", "; ".join(problems))


@pytest.fixture(scope="module")
def gpus(gpu_state):
    """([(index, bus id, compute capability)], [lines nvidia-smi printed otherwise])."""
    state, rows, other = gpu_state
    return [row[:3] for row in rows], other


def test_gpu_count(name, gpus, want):
    rows, other = gpus
    expected = int(want["gpu_gate_expected_count"])
    if len(rows) != expected:
        found = f"{len(rows)} GPUs" + (" (nvidia-smi: " + "; ".join(other)[-300:] + ")" if other else "")
        mismatch(name, "GPU count", f"{expected} GPUs", found)


def test_gpu_compute_capability(name, gpus, want):
    rows, other = gpus
    expected = str(want["gpu_gate_compute_capability"])
    if not rows:
        mismatch(name, "GPU compute capability", f"{expected} on every GPU",
                 "no GPU answered (nvidia-smi: " + "; ".join(other)[-300:] + ")")
    wrong = [f"GPU {index} ({bus}): {cc}" for index, bus, cc in rows if cc != expected]
    if wrong:
        mismatch(name, "GPU compute capability", f"{expected} on every GPU", ", ".join(wrong))


def test_nvidia_persistence(name, gpu_state, want):
    knob, gate = truthy(want["nvidia_persistence_enabled"]), truthy(want["gpu_gate_require_persistence"])
    if not (knob or gate):
        not_applicable(name, "persistence mode",
                       "nvidia_persistence_enabled and gpu_gate_require_persistence are false")
    state, rows, other = gpu_state
    modes = {}
    for index, bus_id, capability, mode, memory in rows:
        modes.setdefault(mode, []).append(index)
    problems = []
    # Without systemd there is no unit to judge: what the GPUs report decides.
    knob = knob and state != NO_SYSTEMCTL
    unit = {k: v for k, v in state.items() if k in ("LoadState", "UnitFileState", "ActiveState")}
    if knob and (unit.get("UnitFileState"), unit.get("ActiveState")) != ("enabled", "active"):
        problems.append("nvidia-persistenced.service " + (", ".join(f"{k} {v or '-'}" for k, v in sorted(unit.items()))
                                                          or "unknown"))
    # Ubuntu's unit as shipped: running, but with persistence mode off.
    if knob and "--no-persistence-mode" in state.get("ExecStart", ""):
        problems.append("nvidia-persistenced.service runs with --no-persistence-mode")
    problems += [f"{mode} on GPU {', '.join(indexes)}" for mode, indexes in sorted(modes.items()) if mode != "Enabled"]
    if not modes:
        problems.append("no GPU answered (nvidia-smi: " + "; ".join(other)[-300:] + ")")
    if problems:
        unit_wanted = "nvidia-persistenced.service enabled and active, " if knob else ""
        mismatch(name, "persistence mode", unit_wanted + "Enabled on every GPU", "; ".join(problems))
