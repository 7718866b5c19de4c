"""The lab's hosts: names, fixed addresses, per-host state directory and container."""
import json
from dataclasses import dataclass

import yaml

from . import image, network, paths, podman

DEFAULT_COUNT = 8
DEFAULT_PROFILE = "seed-epyc-rtxpro6000"
FIRST_OCTET = 11
MAX_HOSTS = 254 - FIRST_OCTET + 1
LABEL = "infertune-lab.host"
FAULTS = ("no-boot", "driver-unloaded", "lockdown", "gpu-lost", "link-degraded", "old-driver",
          "no-driver-for-kernel", "vfio-bound", "remap-pending", "remap-failure", "xid", "hw-slowdown", "nvidia-smi-hang")
# The GPU health faults that take a GPU index (xid: an Xid number, then the index), and those that
# need a card that remaps rows (a profile whose gpu.health answers for remapped_rows).
INDEXED = ("gpu-lost", "remap-pending", "remap-failure", "hw-slowdown")
REMAPPING = ("remap-pending", "remap-failure")
# The GPU health faults act while the host runs (lab/boot/nvidia-smi reads them at every call).
HEALTH = ("remap-pending", "remap-failure", "xid", "hw-slowdown", "nvidia-smi-hang")
INIT = "/lab/boot/init"
# The image each profile `os` runs: a Debian release its own; the Ubuntu-flavoured host trixie's
# userland, on which lab/boot models what Ubuntu's packaging does differently (lab/README.md).
OS_IMAGES = {"bookworm": "bookworm", "trixie": "trixie", "ubuntu-24.04": "trixie"}
DEFAULT_OS = "bookworm"


@dataclass(frozen=True)
class Host:
    index: int
    profile: str

    @property
    def name(self):
        return f"lab-gpu-{self.index:02d}"

    @property
    def container(self):
        return f"infertune-lab-{self.name}"

    @property
    def ip(self):
        return f"{network.prefix()}.{FIRST_OCTET - 1 + self.index}"

    @property
    def mac(self):
        # Pinned per host: a recreated host with a new MAC left stale ARP entries (ssh time-outs).
        return f"02:6c:61:62:00:{self.index:02x}"

    @property
    def dir(self):
        return paths.HOSTS / self.name


def plan(count, profile, profile_map):
    """The hosts of a lab of `count` hosts; profile_map overrides the profile per host name."""
    if not 1 <= count <= MAX_HOSTS:
        raise RuntimeError(f"--hosts must be 1..{MAX_HOSTS}")
    hosts = [Host(i, profile) for i in range(1, count + 1)]
    unknown = set(profile_map) - {h.name for h in hosts}
    if unknown:
        raise RuntimeError(f"--profile-map names hosts outside the lab: {', '.join(sorted(unknown))}")
    return [Host(h.index, profile_map.get(h.name, h.profile)) for h in hosts]


def overlay(base, over):
    """BASE with OVER's keys on top; a mapping in both is overlaid key by key, anything else
    (a list, a scalar, null) replaces BASE's value."""
    out = dict(base)
    for key, value in over.items():
        out[key] = overlay(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def load_profile(name, seen=()):
    """The profile as boot reads it: `extends: OTHER` takes OTHER's keys first, this file's
    overlaid on them (nested mappings key by key), `os` defaults to bookworm."""
    path = paths.PROFILES / f"{name}.yml"
    if not path.is_file():
        known = sorted(p.stem for p in paths.PROFILES.glob("*.yml"))
        raise RuntimeError(f"no profile {name!r} ({path}); known: {', '.join(known) or 'none'}")
    if name in seen:
        raise RuntimeError(f"profile {name!r} extends itself through {' -> '.join(seen)}")
    data = yaml.safe_load(path.read_text())
    base = data.pop("extends", None)
    if base:
        data = overlay(load_profile(base, (*seen, name)), data)
    data.setdefault("os", DEFAULT_OS)
    if data["os"] not in OS_IMAGES:
        raise RuntimeError(f"profile {name!r}: os {data['os']!r} unknown; known: {', '.join(OS_IMAGES)}")
    return data


def codename(profile):
    """The image codename a host of this profile runs."""
    return OS_IMAGES[load_profile(profile)["os"]]


def prepare_dir(host, public_key):
    """Write the host's profile.json, authorized_keys and faults/; True when the profile changed."""
    host.dir.mkdir(parents=True, exist_ok=True)
    (host.dir / "faults").mkdir(exist_ok=True)
    (host.dir / "authorized_keys").write_text(public_key)
    profile_json = host.dir / "profile.json"
    text = json.dumps(load_profile(host.profile), indent=2, sort_keys=True) + "\n"
    changed = not profile_json.exists() or profile_json.read_text() != text
    if changed:
        profile_json.write_text(text)
    return changed


def faults(host_name):
    fault_dir = paths.HOSTS / host_name / "faults"
    return sorted(p.name for p in fault_dir.iterdir()) if fault_dir.is_dir() else []


def check_fault(name, value, profile):
    """Refuse a fault value the lab cannot model on this profile's card, before anything is set."""
    words = (value or "").split()
    if name in INDEXED and not (len(words) == 1 and words[0].isdigit()):
        raise RuntimeError(f"{name} needs the GPU index: labctl fault HOST {name} INDEX")
    if name == "xid" and not (len(words) == 2 and all(w.isdigit() for w in words)):
        raise RuntimeError("xid needs the Xid number and the GPU index: labctl fault HOST xid 79 2")
    if name in REMAPPING and (profile.get("gpu", {}).get("health") or {}).get("remapped_rows.pending", "[N/A]") == "[N/A]":
        raise RuntimeError(f"{name}: the GPUs of profile {profile.get('name')} answer [N/A] for row remapping"
                           " (the card does not report it); use a profile whose card does (xeon-h100, b200)")


def set_fault(host_name, name, value, clear, profile=None):
    if name not in FAULTS:
        raise RuntimeError(f"unknown fault {name!r}; known: {', '.join(FAULTS)}")
    if not clear:
        check_fault(name, value, profile or {})
    fault_dir = paths.HOSTS / host_name / "faults"
    if not fault_dir.is_dir():
        raise RuntimeError(f"no lab host {host_name!r} (run labctl up)")
    path = fault_dir / name
    if clear:
        path.unlink(missing_ok=True)
    else:
        path.write_text(f"{value}\n" if value else "")


def containers():
    """{container name: {"state", "image", "host"}} of every lab container, running or not."""
    out = podman.run("ps", "-a", "--filter", f"label={LABEL}", "--format", "json")
    return {c["Names"][0]: {"state": c["State"], "image": c["Image"], "host": c["Labels"][LABEL]}
            for c in json.loads(out or "[]")}


def create(host, image_tag):
    podman.run(
        "run", "-d", "--name", host.container, "--hostname", host.name,
        "--network", network.NAME, "--ip", host.ip, "--mac-address", host.mac,
        # AUDIT_WRITE as on a real host: without it sudo warns on every call.
        "--systemd=always", "--cap-add", "SYS_ADMIN", "--cap-add", "AUDIT_WRITE", "--restart=always",
        "--stop-timeout", "5",
        "-v", f"{paths.BOOT}:/lab/boot:ro", "-v", f"{host.dir}:/lab/host:ro",
        "--label", f"{LABEL}={host.name}", image_tag, INIT,
    )


def remove(container):
    podman.run("rm", "-f", "-t", "5", container)
