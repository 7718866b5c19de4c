"""Helpers for the lab hardware-model tests: repo paths, profiles, real pciutils on a rendered tree."""
import json
import os
import subprocess
import sys

import yaml

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
BOOT = os.path.join(REPO, "lab", "boot")
sys.path.insert(0, BOOT)


def load_profile(name):
    with open(os.path.join(REPO, "lab", "profiles", f"{name}.yml")) as f:
        # Round-trip through JSON like lab/labctl does, so the model sees what init sees.
        return json.loads(json.dumps(yaml.safe_load(f)))


def pci_tool(tool, hw, *args):
    """Run real lspci/setpci against a rendered tree."""
    cmd = [tool, "-A", "linux-sysfs", "-O", f"sysfs.path={hw}/sys/bus/pci", *args]
    return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
