"""Fixtures for the lab hardware model: profiles and a rendered host tree in tmp dirs."""
import os
import pathlib
import shutil
import tempfile

import pytest
from labhw import load_profile

from hwmodel import kmod, render  # noqa: E402  (labhw puts lab/boot on sys.path)

SHM = "/dev/shm"


@pytest.fixture
def seed():
    return load_profile("seed-epyc-rtxpro6000")


@pytest.fixture
def xeon():
    return load_profile("xeon-h100")


@pytest.fixture
def hw_tmp(tmp_path):
    """A tmpfs directory like the one init renders into (thousands of small files: disk is slow)."""
    if not os.path.isdir(SHM):
        yield tmp_path
        return
    path = tempfile.mkdtemp(dir=SHM, prefix="lab-hw-")
    yield pathlib.Path(path)
    shutil.rmtree(path)


@pytest.fixture
def render_host(hw_tmp):
    """render_host(profile, cmdline=..., faults=..., files={relpath: text}, release=...) -> rendered tree path.

    Every call is a fresh boot of a fresh image (its own root and output directory) with the
    booted kernel in /boot, so boot installs its NVIDIA modules as init does.
    """
    boots = iter(range(1000))

    def _render(profile, cmdline="BOOT_IMAGE=/boot/vmlinuz-6.1.0-28-amd64 ro quiet", faults=None, files=None,
                release="6.1.0-28-amd64"):
        n = next(boots)
        root, out = hw_tmp / f"root{n}", hw_tmp / f"hw{n}"
        files = {f"boot/vmlinuz-{release}": "", **(files or {})}
        for rel, text in files.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(text)
        kmod.sync(str(root), kmod.plan(str(root), profile, faults or {}))
        render.render(str(out), profile, root=str(root), release=release, cmdline=cmdline,
                      faults=faults or {}, hostname="lab-test")
        return out
    return _render
