"""The control node's set-up for real hosts is light: `make setup` makes a virtual environment and
nothing else (no Debian package, no service), a clean clone's playbooks resolve the collection
without it, and the lab's packages come with the lab's targets, installed starting no service."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cleanclone import clean_clone
from fakehost import REPO

sys.path.insert(0, str(REPO / "lab"))
from infra import packages  # noqa: E402

BIN = Path(sys.executable).parent
SYSTEM = ("apt-get", "dpkg", "labctl", "systemctl", "podman")


def recipe(target):
    """What `make TARGET` would run, every prerequisite remade."""
    return subprocess.run(["make", "-n", "-B", target], cwd=REPO, capture_output=True, text=True, check=True).stdout


def test_make_setup_installs_no_system_package():
    out = recipe("setup")
    assert "pip install" in out and [word for word in SYSTEM if word in out] == []


@pytest.mark.parametrize("target", ["demo", "test", "lab-up", "monitoring"])
def test_the_labs_targets_install_the_labs_packages(target):
    assert "lab/labctl packages" in recipe(target)


def test_a_clean_clones_playbooks_resolve_the_collection_without_any_set_up(tmp_path):
    """The tracked files alone (as `git clone` gives them, the collection link among them), with
    ansible-core and nothing installed: the syntax check the README shows passes."""
    clone = clean_clone(tmp_path / "clone")
    assert (clone / "collections" / "ansible_collections" / "infertune" / "fleet" / "galaxy.yml").is_file()
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env.update(HOME=str(tmp_path), ANSIBLE_NOCOLOR="1")
    proc = subprocess.run([str(BIN / "ansible-playbook"), "-i", "inventory/example", "site.yml", "--syntax-check"],
                          cwd=clone, env=env, capture_output=True, text=True)
    assert proc.returncode == 0 and "playbook: site.yml" in proc.stdout, proc.stdout + proc.stderr


class Machine:
    """This machine as packages.install sees it: dpkg's installed set, systemd's enabled units,
    and what apt-get does (installs, and enables the units a package ships, as Debian's do)."""

    UNITS = {"prometheus": ["prometheus.service"], "prometheus-node-exporter": ["prometheus-node-exporter.service"],
             "podman": []}

    def __init__(self, tmp_path, installed=(), enabled=("ssh.service",)):
        self.installed, self.enabled, self.calls = set(installed), set(enabled), []
        self.policy, self.systemd = tmp_path / "policy-rc.d", tmp_path / "systemd"
        self.systemd.mkdir()

    def run(self, argv, **kwargs):
        self.calls.append(argv)
        out, rc = "", 0
        if argv[:2] == ["dpkg", "-s"]:
            rc = 0 if argv[2] in self.installed else 1
        elif argv[:2] == ["apt-get", "install"]:
            # A service would start here unless policy-rc.d refuses it.
            assert self.policy.read_text().rstrip().endswith("exit 101"), "apt-get ran without policy-rc.d"
            for name in (a for a in argv[2:] if not a.startswith("-")):
                self.installed.add(name)
                self.enabled.update(self.UNITS.get(name, []))
        elif argv[:2] == ["systemctl", "list-unit-files"]:
            out = "".join(f"{unit} enabled enabled\n" for unit in sorted(self.enabled))
        elif argv[:3] == ["systemctl", "disable", "--now"]:
            self.enabled -= set(argv[3:])
        return subprocess.CompletedProcess(argv, rc, out, "")


def test_the_labs_packages_install_with_no_service_started_or_enabled(tmp_path):
    machine = Machine(tmp_path, installed={"pciutils"})
    lines = packages.install(machine.run, machine.policy, machine.systemd)
    assert machine.installed >= set(packages.LAB + packages.MONITORING)
    assert machine.enabled == {"ssh.service"} and not machine.policy.exists()
    monitoring = next(c for c in machine.calls if c[:2] == ["apt-get", "install"] and "prometheus" in c)
    assert "--no-install-recommends" in monitoring  # the collectors' timers, smartd
    assert lines[-1].startswith("packages: disabled prometheus-node-exporter.service prometheus.service")
    # Installed already: apt is not run again.
    machine.calls.clear()
    assert packages.install(machine.run, machine.policy, machine.systemd)[0].endswith(" installed")
    assert [c for c in machine.calls if c[0] != "dpkg"] == []


def test_a_machines_own_policy_rc_d_is_kept(tmp_path):
    machine = Machine(tmp_path)
    machine.policy.write_text("#!/bin/sh\n# the image's own\nexit 101\n")
    packages.install(machine.run, machine.policy, machine.systemd)
    assert machine.policy.read_text() == "#!/bin/sh\n# the image's own\nexit 101\n"
