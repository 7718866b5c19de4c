"""The boot_kernel module, as the kernel role and the rollout's rescue call it, and its twin: the
`knob` module running the catalog's boot_kernel entry (module boot_kernel, args {release}) returns
the same before, after and changed, and leaves the same tree, on the same fake host."""
import os
import shutil
from pathlib import Path

import pytest

from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node import boot_kernel, original
from fakehost import snapshot, write
from moduleharness import run_module
from test_boot_kernel import NEW, OLD, UUID, WANTED, boot_root  # noqa: F401 - boot_root is a fixture

APPLY, PIN, KEEP = boot_kernel.apply_boot_kernel, boot_kernel.pin_running, original.keep
DROPIN = "/etc/default/grub.d/50-infertune-default.cfg"
# GRUB's tools as the module runs them, on the fake tree: update-grub leaves a grub.cfg that already
# lists every kernel, grub-set-default writes grubenv under the --boot-directory it is given.
TOOLS = {"update-grub": "#!/bin/sh\nexit 0\n",
         "grub-set-default": '#!/bin/sh\nprintf "# GRUB Environment Block\\nsaved_entry=%s\\n" "$2" '
                             '>"${1#--boot-directory=}/grub/grubenv"\n'}


@pytest.fixture
def grub_tools(tmp_path_factory, monkeypatch):
    bin_dir = tmp_path_factory.mktemp("bin")
    for name, text in TOOLS.items():
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    monkeypatch.setenv("PATH", "%s:%s" % (bin_dir, os.environ["PATH"]))


def on_tree(monkeypatch, root):
    """The modules act on /: point the boot_kernel code both of them run at a fake tree instead."""
    monkeypatch.setattr(boot_kernel, "apply_boot_kernel", lambda _root, *args: APPLY(root, *args))
    monkeypatch.setattr(boot_kernel, "pin_running", lambda _root, *args: PIN(root, *args))
    # The record of the host's original entry (for the revert) is kept on the same tree.
    monkeypatch.setattr(original, "keep", lambda _root, *args: KEEP(root, *args))


def entry_of(release):
    return "gnulinux-advanced-%s>gnulinux-%s-advanced-%s" % (UUID, release, UUID)


def test_boots_the_release_by_default_then_changes_nothing(boot_root, grub_tools, monkeypatch, capsys):
    on_tree(monkeypatch, boot_root)
    rc, result = run_module("boot_kernel", {"release": NEW}, capsys)
    assert rc == 0 and result["changed"] and result["loader"] == "grub"
    assert (result["before"], result["after"]) == ("0", WANTED)
    assert result["running"] == OLD and result["boot_kernel_reboot_required"] is True
    assert "saved_entry=%s\n" % WANTED in (Path(boot_root) / "boot/grub/grubenv").read_text()
    assert (Path(boot_root) / DROPIN.lstrip("/")).read_text().endswith("GRUB_DEFAULT=saved\n")
    rc, again = run_module("boot_kernel", {"release": NEW}, capsys)
    assert rc == 0 and not again["changed"] and again["before"] == again["after"] == WANTED


def test_check_mode_reports_the_change_and_writes_nothing(boot_root, monkeypatch, capsys):
    on_tree(monkeypatch, boot_root)
    before = snapshot(boot_root)
    rc, result = run_module("boot_kernel", {"release": NEW, "_ansible_check_mode": True,
                                            "_ansible_diff": True}, capsys)
    assert rc == 0 and result["changed"] and result["after"] == WANTED
    assert result["diff"] == {"before": "0\n", "after": WANTED + "\n"}
    assert snapshot(boot_root) == before


def test_without_a_release_pins_the_running_kernel(boot_root, grub_tools, monkeypatch, capsys):
    on_tree(monkeypatch, boot_root)
    rc, result = run_module("boot_kernel", {}, capsys)
    assert rc == 0 and result["changed"] and result["after"] == entry_of(OLD)
    assert result["default_release"] == OLD and result["boot_kernel_reboot_required"] is False


def test_the_first_pin_records_the_entry_the_host_booted_before(boot_root, grub_tools, monkeypatch, capsys):
    on_tree(monkeypatch, boot_root)
    rc, _ = run_module("boot_kernel", {}, capsys)
    assert rc == 0 and original.read(boot_root, "boot_kernel") == {
        "loader": "grub", "dropin": None, "saved_entry": "0", "grubenv": True}
    rc, _ = run_module("boot_kernel", {"release": NEW}, capsys)
    assert rc == 0 and original.read(boot_root, "boot_kernel")["saved_entry"] == "0", "never overwritten"


def test_a_kernel_not_installed_fails_naming_the_package_to_install(boot_root, monkeypatch, capsys):
    on_tree(monkeypatch, boot_root)
    rc, result = run_module("boot_kernel", {"release": "6.14.0-1-amd64"}, capsys)
    assert rc == 1 and result["failed"]
    assert result["msg"] == "/boot/vmlinuz-6.14.0-1-amd64 is absent: install the kernel package for 6.14.0-1-amd64 first"


def converged(root):
    write(root, DROPIN, boot_kernel.DROPIN_CONTENT)
    write(root, "/boot/grub/grubenv", "# GRUB Environment Block\nsaved_entry=%s\n" % WANTED)


@pytest.mark.parametrize("release", [NEW, OLD, "6.14.0-1-amd64"])
@pytest.mark.parametrize("check_mode", [False, True])
@pytest.mark.parametrize("state", [None, converged])
def test_the_knob_module_returns_what_boot_kernel_returns(boot_root, grub_tools, tmp_path_factory, monkeypatch,
                                                          capsys, release, check_mode, state):
    if state:
        state(boot_root)
    twin = str(tmp_path_factory.mktemp("twin") / "root")
    shutil.copytree(boot_root, twin)
    common = {"_ansible_check_mode": check_mode}
    on_tree(monkeypatch, boot_root)
    rc, ours = run_module("boot_kernel", dict(common, release=release), capsys)
    on_tree(monkeypatch, twin)
    knob_rc, knob = run_module("knob", dict(common, name="boot_kernel", module="boot_kernel",
                                            args={"release": release}), capsys)
    assert knob_rc == rc
    if rc:
        assert knob["msg"] == "boot_kernel: " + ours["msg"]
    else:
        assert {k: knob[k] for k in ("before", "after", "changed")} == {k: ours[k] for k in ("before", "after", "changed")}
        assert knob["reboot_required"] == ours["boot_kernel_reboot_required"]
    assert snapshot(twin) == snapshot(boot_root)
