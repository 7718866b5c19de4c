"""infertune.fleet.revert on one host of a fresh lab: converged by site.yml, reverted under --check (the
host stays byte-identical), reverted, and then its files and values are the never-tuned host's, file
by file, but for those allowed() lists (each a thing a revert cannot undo, and why); a second
revert changes nothing; converged again, the host passes its verification.

The tests run in file order on one host.
"""
import json

import pytest

from helpers import ROOT, fresh_lab, on_host, playbook, recap, state_digest

pytestmark = pytest.mark.lab

# What the digest adds to state_digest's regular files: links (a unit's enablement is a link in a
# .wants directory) and directories (one left empty is left behind), where infertune writes.
TREES = "/etc /usr/local /var/lib/infertune /run/infertune"
# sglang's files (roles/sglang/vars/main.yml, sglang_file_paths, and its directory) and its unit's
# .wants link: the revert leaves sglang as its variables say.
SGLANG = ("/etc/sglang", "/etc/sglang/sglang.env", "/etc/sglang/secrets.env", "/usr/local/sbin/sglang-launch",
          "/etc/systemd/system/sglang.service", "/etc/systemd/system/multi-user.target.wants/sglang.service")


def digest(host):
    """state_digest plus every link (with its target) and directory under TREES."""
    found = state_digest(host)
    listing = on_host(host, f"find {TREES} -xdev \\( -type l -printf 'link %p -> %l\\n' \\) -o"
                            " \\( -type d -printf 'dir %p\\n' \\) 2>/dev/null; true")
    found.update((line.split(" ", 1)[1].split(" -> ")[0], line) for line in listing.splitlines())
    return found


def changes(before, after):
    return {path for path in set(before) | set(after) if before.get(path) != after.get(path)}


def kernel_package(host):
    """The lab's upgrade target on this host's image (the inventory passes it as kernel_package)."""
    return json.loads(on_host(host, "cat /etc/infertune-lab-image.json"))["kernel_package"]


@pytest.fixture(scope="module")
def host(lab):
    """The host, its never-tuned state, and what an apt install of the target kernel package alone
    changes on a never-tuned twin (the same image, the package from the image's cache)."""
    fresh_lab()
    host, twin = sorted(lab.hosts())[:2]
    never = {"digest": digest(host), "cmdline": on_host(host, "cat /proc/cmdline").split()}
    before = digest(twin)
    on_host(twin, f"DEBIAN_FRONTEND=noninteractive apt-get install -y -q {kernel_package(twin)} >/dev/null")
    never["apt"] = changes(before, digest(twin))
    return host, never


def allowed(never):
    """{path: why}: what a revert cannot undo, the only paths that may differ from the never-tuned host."""
    # The target kernel package stays installed: a revert removes no package (the kernel may be
    # the one that runs). What installing it changes, the twin shows: its files and what apt
    # installed with it, their maintainer scripts' (an AppArmor profile, a unit's link), the
    # initramfs its hook made, grub.cfg listing it (its default GRUB's own again: asserted).
    why = {path: "the installed kernel package" for path in never["apt"]}
    # GRUB's own default (GRUB_DEFAULT=0) boots the newest kernel, the installed one: BOOT_IMAGE=
    # names it; every other token is the never-tuned host's (asserted).
    why["/proc/cmdline"] = "the kernel GRUB's own default boots"
    why.update((path, "sglang, as its variables say") for path in SGLANG)
    return why


def revert(host, *args):
    return playbook("playbooks/revert.yml", "--limit", host, *args)


def test_site_converges_the_host(host):
    rc, out = playbook("site.yml", "--limit", host[0])
    assert rc == 0, out[-6000:]
    assert on_host(host[0], "ls /var/lib/infertune/original").split(), "the first apply records the host's own state"


def test_check_shows_what_goes_back_and_changes_nothing(host):
    name = host[0]
    before = digest(name)
    records = on_host(name, "sha256sum /var/lib/infertune/original/*")
    rc, out = revert(name, "--check")
    assert rc == 0, out[-6000:]
    said = " ".join(out.split())  # the plan's lines as one, wherever the output callback folds them
    assert "revert: 1 host(s) planned: 1 with pending changes, 0 stopped by the plan, 0 converged" in said, out[-6000:]
    # MaxReadReq and ACS go back under the GPUs' traffic; the command line and the NVIDIA options
    # run until the next boot.
    assert (f"{name}: drain yes (pcie_mrrs, pcie_acs, reboot), reboot yes (command line, NVIDIA options)"
            in said), out[-6000:]
    assert "boot_kernel: GRUB_DEFAULT=saved, boots 6.12" in said and "-> GRUB_DEFAULT=0, boots 6.12" in said, out[-6000:]
    assert "pcie_mrrs: 0000:13:00.0, 0000:14:00.0, 0000:33:00.0, +5 more: 4096 -> 512" in said, out[-6000:]
    assert "cpufreq: cpu0-127 governor performance -> powersave" in said, out[-6000:]
    assert digest(name) == before
    assert on_host(name, "sha256sum /var/lib/infertune/original/*") == records
    report = json.loads((ROOT / "reports" / "revert.json").read_text())
    assert report["check_mode"] and report["hosts"][name]["status"] == "would be put back"


def test_revert_gives_back_the_never_tuned_host_but_for_what_it_cannot_undo(host):
    name, never = host
    rc, out = revert(name)
    assert rc == 0, out[-8000:]
    report = json.loads((ROOT / "reports" / "revert.json").read_text())
    entry = report["hosts"][name]
    assert entry["status"] == "put back" and not report["check_mode"], entry
    assert "left installed" in entry["knobs"]["kernel_package"]["what"], entry
    release = on_host(name, "cat /proc/sys/kernel/osrelease").strip()
    assert {"/boot/grub/grub.cfg", f"/boot/vmlinuz-{release}"} <= never["apt"], "the twin installed the kernel"
    why = allowed(never)
    assert [path for path in sorted(changes(never["digest"], digest(name))) if path not in why] == []
    # What is allowed to differ differs only as said.
    assert 'set default="0"' in on_host(name, "cat /boot/grub/grub.cfg")
    cmdline = on_host(name, "cat /proc/cmdline").split()
    assert [t for t in cmdline if not t.startswith("BOOT_IMAGE=")] == [
        t for t in never["cmdline"] if not t.startswith("BOOT_IMAGE=")]
    assert not on_host(name, "ls -d /var/lib/infertune /run/infertune /boot/grub/grubenv 2>/dev/null; true").strip()
    assert on_host(name, "systemctl is-enabled nvidia-persistenced.service; true").strip() == "disabled"
    assert on_host(name, "apt-mark showhold").strip() == ""


def test_a_second_revert_changes_nothing(host):
    rc, out = revert(host[0])
    assert rc == 0 and recap(out)[host[0]]["changed"] == 0, out[-4000:]
    assert "revert: 1 host(s) planned: 0 with pending changes, 0 stopped by the plan, 1 converged" in " ".join(
        out.split()), out[-4000:]


def test_site_converges_the_reverted_host_again(host):
    rc, out = playbook("site.yml", "--limit", host[0])
    assert rc == 0, out[-6000:]
    fleet = json.loads((ROOT / "reports" / "fleet.json").read_text())
    assert fleet["hosts"][host[0]]["result"] == "pass", fleet["hosts"][host[0]]
