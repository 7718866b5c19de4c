"""apt upgrade and unattended-upgrades cannot move a host to another kernel behind the rollout."""
from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node.gate import Gate
from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node.apt_hold import HOLDS, apply_kernel_hold
from fakehost import Recorder, read, snapshot, write


def status(*packages):
    """dpkg's status file: (name, held) pairs, installed."""
    return "\n".join("Package: %s\nStatus: %s ok installed\nVersion: 1\n" % (name, "hold" if held else "install")
                     for name, held in packages)


def ubuntu(tmp_path, *extra):
    root = str(tmp_path)
    write(root, "/var/lib/dpkg/status", status(("linux-image-generic-hwe-24.04", False),
                                               ("linux-modules-nvidia-580-server-generic-hwe-24.04", False),
                                               ("linux-image-6.8.0-60-generic", False), ("openssh-server", False),
                                               *extra))
    return root


def test_holds_the_kernel_metapackages_and_records_them(tmp_path):
    root, runner = ubuntu(tmp_path), Recorder()
    result = apply_kernel_hold(root, True, Gate(runner=runner))
    held = ["linux-image-generic-hwe-24.04", "linux-modules-nvidia-580-server-generic-hwe-24.04"]
    assert runner.calls == [["apt-mark", "hold"] + held]
    assert result["changed"] and result["before"] == "none held" and result["after"] == ", ".join(held)
    assert read(root, HOLDS).split() == held


def test_held_already_is_unchanged_and_check_mode_writes_nothing(tmp_path):
    root = ubuntu(tmp_path, ("linux-image-amd64", True))
    before, runner = snapshot(root), Recorder()
    assert apply_kernel_hold(root, True, Gate(check_mode=True, runner=runner))["changed"]
    assert snapshot(root) == before and runner.calls == []
    write(root, "/var/lib/dpkg/status", status(("linux-image-generic-hwe-24.04", True), ("linux-image-amd64", True)))
    again = Recorder()
    assert not apply_kernel_hold(root, True, Gate(runner=again))["changed"] and again.calls == []


def test_release_undoes_only_the_holds_infertune_set(tmp_path):
    root = str(tmp_path)
    write(root, "/var/lib/dpkg/status", status(("linux-image-amd64", True), ("proxmox-default-kernel", True)))
    write(root, HOLDS, "proxmox-default-kernel\n")
    runner = Recorder()
    result = apply_kernel_hold(root, False, Gate(runner=runner))
    assert runner.calls == [["apt-mark", "unhold", "proxmox-default-kernel"]]
    assert result["after"] == "linux-image-amd64" and read(root, HOLDS) == ""
