"""The default boot entry: which kernel the next boot starts, kept on the running one until the target is proved."""
import importlib.util
import pathlib
import re

import pytest
import yaml
from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node.boot_kernel import default_release, pin_running
from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node.gate import Gate, TuningError
from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node.grubcfg import default_entry
from ansible_collections.infertune.fleet.plugins.module_utils.infertune_node.kernel_driver import default_boot
from fakehost import REPO, snapshot, write
from test_boot_kernel import GRUB_CFG, NEW, OLD, UUID, WANTED

SAVED = 'set default="${saved_entry}"'
ZERO = GRUB_CFG.replace(SAVED, 'set default="0"')  # Debian's GRUB_DEFAULT=0
OLD_ENTRY = "gnulinux-advanced-%s>gnulinux-%s-advanced-%s" % (UUID, OLD, UUID)
MODULE = "/lib/modules/%s/kernel/nvidia-580/nvidia.ko"


class Grub:
    """update-grub and grub-set-default as on a host: update-grub writes GRUB_DEFAULT=saved's
    `set default` when infertune's drop-in is there, else GRUB_DEFAULT=0's (the newest kernel first)."""
    def __init__(self, root, follows=True):
        self.root, self.follows, self.calls = root, follows, []

    def update_grub(self):
        saved = (pathlib.Path(self.root) / "etc/default/grub.d/50-infertune-default.cfg").exists()
        write(self.root, "/boot/grub/grub.cfg", GRUB_CFG if saved else ZERO)

    def __call__(self, argv):
        self.calls.append(argv)
        if argv == ["update-grub"]:
            self.update_grub()
        elif argv[0] == "grub-set-default" and self.follows:
            write(self.root, "/boot/grub/grubenv", "# GRUB Environment Block\nsaved_entry=%s\n" % argv[-1])
        return 0, "", ""


@pytest.fixture
def debian(tmp_path):
    """A Debian host running OLD as its menu's default (GRUB_DEFAULT=0, only OLD installed so far)."""
    root = str(tmp_path)
    write(root, "/boot/vmlinuz-" + OLD, b"kernel")
    write(root, "/boot/grub/grub.cfg", ZERO.replace("vmlinuz-%s root" % NEW, "vmlinuz-%s root" % OLD, 1))
    write(root, "/boot/grub/grubenv", "# GRUB Environment Block\n" + "#" * 1000)
    write(root, "/proc/sys/kernel/osrelease", OLD + "\n")
    write(root, MODULE % OLD, "")
    return root


def install_new_kernel(root, grub):
    """What the kernel package does: its image, modules dir, and the zz-update-grub hook."""
    write(root, "/boot/vmlinuz-" + NEW, b"kernel")
    write(root, "/lib/modules/%s/modules.dep" % NEW, "")
    grub.update_grub()


@pytest.mark.parametrize("cfg,env,release", [
    (ZERO, {}, NEW),                                           # GRUB_DEFAULT=0: the newest kernel
    (GRUB_CFG, {"saved_entry": OLD_ENTRY}, OLD),               # ids, submenu>entry
    (GRUB_CFG, {"saved_entry": "1>2"}, OLD),                   # positions
    (GRUB_CFG, {"saved_entry": "Advanced options for Debian GNU/Linux>Debian GNU/Linux, with Linux %s" % OLD}, OLD),
    (GRUB_CFG, {"saved_entry": WANTED, "next_entry": "1>2"}, OLD),  # grub-reboot's one-shot comes first
    (GRUB_CFG, {"saved_entry": "gone-kernel"}, NEW),           # no such entry: GRUB boots the first
    (GRUB_CFG, {}, NEW),
])
def test_default_entry_resolves_as_grub_does(cfg, env, release):
    assert default_entry(cfg, env)["linux"] == "/boot/vmlinuz-" + release


def test_without_the_pin_the_package_hook_moves_the_default(debian):
    install_new_kernel(debian, Grub(debian))
    assert default_release(debian, None)["release"] == NEW


def test_pinned_running_kernel_survives_the_package_hook(debian):
    grub = Grub(debian)
    result = pin_running(debian, Gate(runner=grub))
    assert result["changed"] and result["default_release"] == OLD and not result["boot_kernel_reboot_required"]
    assert grub.calls == [["update-grub"], ["grub-set-default", "--boot-directory=%s/boot" % debian, OLD_ENTRY]]
    install_new_kernel(debian, grub)
    assert default_release(debian, None) == {"release": OLD, "entry": OLD_ENTRY, "loader": "grub"}
    again = Grub(debian)
    assert not pin_running(debian, Gate(runner=again))["changed"] and again.calls == []


def test_pin_under_check_writes_nothing(debian):
    before, grub = snapshot(debian), Grub(debian)
    result = pin_running(debian, Gate(check_mode=True, runner=grub))
    assert result["changed"] and snapshot(debian) == before and grub.calls == []


def test_pin_fails_when_the_default_does_not_follow(debian):
    install_new_kernel(debian, Grub(debian))
    with pytest.raises(TuningError, match=re.escape("boots %s, not the running kernel %s" % (NEW, OLD))):
        pin_running(debian, Gate(runner=Grub(debian, follows=False)))


def test_default_on_a_kernel_without_the_module_is_a_problem(debian):
    install_new_kernel(debian, Grub(debian))  # GRUB_DEFAULT=0 moved the default, no module for NEW
    found = default_boot(debian, lambda argv: (127, "", ""))
    assert found["release"] == NEW and found["running"] == OLD and found["ready"] is False
    assert found["problem"].startswith("the default boot entry (")
    assert "starts kernel %s, where the NVIDIA module will not load" % NEW in found["problem"]
    assert found["problem"].endswith("or make the running kernel %s the default again" % OLD)
    write(debian, MODULE % NEW, "")
    assert default_boot(debian, lambda argv: (127, "", ""))["problem"] is None


def test_no_problem_on_the_running_kernel_or_without_a_driver(debian):
    assert default_boot(debian, lambda argv: (127, "", ""))["problem"] is None  # default is the running kernel
    install_new_kernel(debian, Grub(debian))
    (pathlib.Path(debian) / (MODULE % OLD).lstrip("/")).unlink()
    found = default_boot(debian, lambda argv: (127, "", ""))
    assert found["release"] == NEW and found["problem"] is None and found["ready"] is None


def _tasks(path):
    return yaml.safe_load((REPO / path).read_text())


def test_kernel_role_pins_the_running_kernel_before_installing():
    modules = [next(k for k in task if k not in ("name", "register", "when")) for task in _tasks("roles/kernel/tasks/install.yml")]
    assert modules.index("infertune.fleet.boot_kernel") < modules.index("ansible.builtin.apt")


def test_the_rescue_keeps_the_running_kernel_before_ending_the_host():
    block = next(task for task in _tasks("roles/infertune/tasks/apply.yml") if "rescue" in task)
    names = [task.get("infertune.fleet.boot_kernel", task.get("ansible.builtin.meta")) for task in block["rescue"]]
    assert names.index({}) < names.index("end_host")


def test_the_plan_reads_a_missing_command_as_rc_127():
    """dkms is absent where the driver is not DKMS-managed: the plan's read goes on."""
    spec = importlib.util.spec_from_file_location("infertune_plan", REPO / "plugins" / "modules" / "infertune_plan.py")
    plan = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(plan)

    class Module:
        def get_bin_path(self, name):
            return None

        def run_command(self, argv, **kw):
            raise AssertionError("run_command fails the module on a missing binary")

    assert plan.runner(Module())(["dkms", "status"])[0] == 127
