"""Where the lab keeps things: everything generated lives under lab/.state/ (gitignored)."""
from pathlib import Path

LAB = Path(__file__).resolve().parent.parent
REPO = LAB.parent
STATE = LAB / ".state"
HOSTS = STATE / "hosts"
SSH_DIR = STATE / "ssh"
SSH_KEY = SSH_DIR / "id_ed25519"
KNOWN_HOSTS = SSH_DIR / "known_hosts"
DEBS = STATE / "debs"
PODMAN_STATE = STATE / "podman"
IMAGE_JSON = STATE / "image.json"
SPEC_JSON = STATE / "lab.json"
BUILD = STATE / "build"
RECIPE = LAB / "image"
PROFILES = LAB / "profiles"
BOOT = LAB / "boot"
INVENTORY = REPO / "inventory" / "lab" / "hosts.yml"
