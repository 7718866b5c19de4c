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
SPEC_JSON = STATE / "lab.json"
BUILD = STATE / "build"
RECIPE = LAB / "image"
PROFILES = LAB / "profiles"
BOOT = LAB / "boot"
INVENTORY = REPO / "inventory" / "lab" / "hosts.yml"


def image_json(codename):
    """The build record of a codename's image; the default image's keeps the name image.json."""
    return STATE / ("image.json" if codename == "bookworm" else f"image-{codename}.json")
