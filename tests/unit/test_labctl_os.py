"""The lab's hosts by OS: a profile's `os` picks the image, `extends` reuses another profile's
hardware, each codename's image has its own recipe hash, and the inventory gives each host its
image's kernel upgrade target."""
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1].parent
sys.path.insert(0, str(REPO / "lab"))
from infra import hosts, image, inventory, paths  # noqa: E402


def test_a_profile_extends_another_and_names_its_os():
    base = hosts.load_profile("small-epyc-rtxpro6000")
    ubuntu = hosts.load_profile("small-epyc-rtxpro6000-ubuntu")
    assert base["os"] == "bookworm" and ubuntu["os"] == "ubuntu-24.04"
    assert ubuntu["name"] == "small-epyc-rtxpro6000-ubuntu" and "extends" not in ubuntu
    assert {k: v for k, v in ubuntu.items() if k not in ("name", "os")} == \
        {k: v for k, v in base.items() if k not in ("name", "os")}
    assert [hosts.codename(p) for p in ("small-epyc-rtxpro6000", "small-epyc-rtxpro6000-trixie",
                                        "small-epyc-rtxpro6000-ubuntu")] == ["bookworm", "trixie", "trixie"]


def test_an_extending_profile_overrides_nested_keys_alone(tmp_path, monkeypatch):
    monkeypatch.setattr(paths, "PROFILES", tmp_path)
    (tmp_path / "base.yml").write_text(yaml.safe_dump(
        {"name": "base", "pci": {"root_acs": 0x2A0, "gpus_per_switch": 2, "nvme": {"vendor": 0x144D}},
         "gpu": {"class": 0x030200, "buses": [0x13, 0x14]}, "numa_nodes": 2}))
    (tmp_path / "ws.yml").write_text(yaml.safe_dump(
        {"name": "ws", "extends": "base", "pci": {"root_acs": None, "gpus_per_switch": 4, "nvme": None},
         "gpu": {"buses": [0x43]}}))
    ws = hosts.load_profile("ws")
    # A mapping is overlaid key by key; a list, a scalar or null replaces the base's value.
    assert ws["pci"] == {"root_acs": None, "gpus_per_switch": 4, "nvme": None}
    assert ws["gpu"] == {"class": 0x030200, "buses": [0x43]} and ws["numa_nodes"] == 2
    assert hosts.load_profile("base")["gpu"]["buses"] == [0x13, 0x14]


def test_the_workstation_profile_is_the_seed_with_its_differences():
    seed, ws = hosts.load_profile("seed-epyc-rtxpro6000"), hosts.load_profile("ws-epyc-rtxpro6000")
    assert ws["cpu"]["flags"] == seed["cpu"]["flags"] and ws["cpu"]["sockets"] == 1
    assert ws["cpufreq"]["drivers"] == seed["cpufreq"]["drivers"] and ws["cpufreq"]["cmdline"] == seed["cpufreq"]["cmdline"]
    assert ws["gpu"]["class"] == 0x030000 and ws["gpu"]["compute_cap"] == seed["gpu"]["compute_cap"]
    assert ws["pci"]["switch_acs"] == seed["pci"]["switch_acs"] and ws["pci"]["root_acs"] is None
    assert ws["modules"] == seed["modules"]


def test_an_unknown_os_or_a_loop_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(paths, "PROFILES", tmp_path)
    (tmp_path / "a.yml").write_text(yaml.safe_dump({"name": "a", "os": "sid"}))
    (tmp_path / "b.yml").write_text(yaml.safe_dump({"name": "b", "extends": "c"}))
    (tmp_path / "c.yml").write_text(yaml.safe_dump({"name": "c", "extends": "b"}))
    with pytest.raises(RuntimeError, match="os 'sid' unknown"):
        hosts.load_profile("a")
    with pytest.raises(RuntimeError, match="extends itself"):
        hosts.load_profile("b")


def test_each_codename_has_its_own_recipe(tmp_path, monkeypatch):
    recipe = tmp_path / "image"
    (recipe / "trixie").mkdir(parents=True)
    (recipe / "packages-apt.txt").write_text("grub-common\n")
    (tmp_path / "infra").mkdir()
    (tmp_path / "infra/image.py").write_text((paths.LAB / "infra/image.py").read_text())
    monkeypatch.setattr(paths, "LAB", tmp_path)
    monkeypatch.setattr(paths, "RECIPE", recipe)
    before = {c: image.recipe_hash(c) for c in image.CODENAMES}
    assert before["bookworm"] != before["trixie"]
    (recipe / "trixie" / "packages-apt.txt").write_text("grub-common\ngrub2-common\n")
    after = {c: image.recipe_hash(c) for c in image.CODENAMES}
    # A file of trixie's own rebuilds trixie's image only; a shared one both.
    assert after["bookworm"] == before["bookworm"] and after["trixie"] != before["trixie"]
    assert image._packages("packages-apt.txt", "trixie") == ["grub-common", "grub2-common"]
    assert image._packages("packages-apt.txt", "bookworm") == ["grub-common"]
    (recipe / "packages-apt.txt").write_text("grub-common\ninitramfs-tools\n")
    assert all(image.recipe_hash(c) != after[c] for c in image.CODENAMES)
    assert image.tag("trixie") == f"{image.REPOSITORY}:trixie-{image.recipe_hash('trixie')}"
    with pytest.raises(RuntimeError, match="no lab image for 'sid'"):
        image.recipe_hash("sid")


def test_each_host_gets_its_images_kernel_target(tmp_path, monkeypatch):
    monkeypatch.setattr(paths, "INVENTORY", tmp_path / "hosts.yml")
    monkeypatch.setattr(hosts.network, "prefix", lambda: "10.77.213")
    lab = hosts.plan(2, "small-epyc-rtxpro6000", {"lab-gpu-02": "small-epyc-rtxpro6000-trixie"})
    metas = {"lab-gpu-01": {"kernel_package": "linux-image-6.12.95+deb12-amd64", "kernel_release": "6.12.95+deb12-amd64"},
             "lab-gpu-02": {"kernel_package": "linux-image-7.3.4+deb13-amd64", "kernel_release": "7.3.4+deb13-amd64"}}
    inventory.write(lab, metas)
    nodes = yaml.safe_load((tmp_path / "hosts.yml").read_text())["all"]["children"]["gpu_nodes"]
    assert nodes["hosts"]["lab-gpu-02"]["kernel_release"] == "7.3.4+deb13-amd64"
    assert nodes["hosts"]["lab-gpu-01"]["kernel_package"] == "linux-image-6.12.95+deb12-amd64"
    assert "kernel_release" not in nodes["vars"]
