"""Build the lab's Debian host images (one per codename) with debootstrap, each cached by the hash of
its recipe."""
import hashlib
import json
import re
import shutil
import subprocess
import time

from . import mirror, paths, podman, serving

CODENAMES = ("bookworm", "trixie")
DEFAULT = "bookworm"
REPOSITORY = "localhost/infertune-lab"
IMAGE_INFO = "/etc/infertune-lab-image.json"
DIVERTED = {"grub-probe": "/usr/sbin/grub-probe", "update-initramfs": "/usr/sbin/update-initramfs",
            "systemd-detect-virt": "/usr/bin/systemd-detect-virt"}
CHROOT_ENV = {"DEBIAN_FRONTEND": "noninteractive", "LC_ALL": "C.UTF-8",
              "PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/root"}
LOG = paths.BUILD / "build.log"


def _check(codename):
    if codename not in CODENAMES:
        raise RuntimeError(f"no lab image for {codename!r}; known: {', '.join(CODENAMES)}")


def recipe_hash(codename=DEFAULT):
    """Hash of a codename's recipe: its name, the files under lab/image/ (but another codename's
    folder), the build steps in this module and what its serving layer copies."""
    _check(codename)
    others = {paths.RECIPE / c for c in CODENAMES if c != codename}
    digest = hashlib.sha256(codename.encode() + b"\0")
    files = sorted(p for p in paths.RECIPE.rglob("*") if p.is_file() and not others & set(p.parents))
    named = [(p, p.relative_to(paths.LAB)) for p in files + [paths.LAB / "infra/image.py"]]
    named += [(p, p.relative_to(paths.REPO)) for p in serving.inputs(codename)]
    for path, name in named:
        digest.update(str(name).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:12]


def tag(codename=DEFAULT):
    return f"{REPOSITORY}:{codename}-{recipe_hash(codename)}"


def info(codename=DEFAULT):
    """image.json of the codename's current build: tag, kernel_package, kernel_release,
    base_kernel_release."""
    path = paths.image_json(codename)
    if not path.exists():
        return None
    data = json.loads(path.read_text())
    return data if data.get("tag") == tag(codename) else None


def _recipe_file(name, codename):
    """lab/image/<codename>/<name> when the codename has its own, else lab/image/<name>."""
    own = paths.RECIPE / codename / name
    return own if own.is_file() else paths.RECIPE / name


def _packages(name, codename):
    lines = _recipe_file(name, codename).read_text().splitlines()
    return [w for w in (line.split("#")[0].strip() for line in lines) if w]


class _Build:
    def __init__(self, root, codename):
        self.root = root
        self.codename = codename
        self.started = time.monotonic()

    def step(self, text):
        print(f"[image {time.monotonic() - self.started:5.0f}s] {text}", flush=True)

    def sh(self, argv, **kw):
        with LOG.open("a") as log:
            log.write(f"\n$ {' '.join(argv)}\n")
            log.flush()
            proc = subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT, text=True, **kw)
        if proc.returncode != 0:
            tail = "".join(LOG.read_text().splitlines(keepends=True)[-30:])
            raise RuntimeError(f"{' '.join(argv)} failed ({proc.returncode}); log {LOG}:\n{tail}")

    def chroot(self, *argv):
        self.sh(["chroot", str(self.root), *argv], env=CHROOT_ENV)

    def chroot_out(self, *argv):
        return subprocess.run(["chroot", str(self.root), *argv], env=CHROOT_ENV, check=True,
                              capture_output=True, text=True).stdout

    def write(self, path, text, mode=0o644):
        target = self.root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        target.chmod(mode)


def _mounts_under(root):
    with open("/proc/self/mounts") as mounts:
        points = [line.split()[1] for line in mounts]
    return [p for p in points if p == str(root) or p.startswith(f"{root}/")]


def _unmount_all(root):
    for point in sorted(_mounts_under(root), key=len, reverse=True):
        subprocess.run(["umount", "-l", point], check=True)


def _clean_build_dir():
    # Never rm -rf through a bind mount of the machine's /dev or /proc left by a failed build.
    _unmount_all(paths.BUILD)
    if _mounts_under(paths.BUILD):
        raise RuntimeError(f"mounts remain under {paths.BUILD}; unmount them and retry")
    shutil.rmtree(paths.BUILD, ignore_errors=True)
    paths.BUILD.mkdir(parents=True)


def _install_stubs(b):
    """Divert the stubbed commands (see each stub's comment), before their packages arrive where they can."""
    for stub, target in DIVERTED.items():
        b.chroot("dpkg-divert", "--local", "--rename", "--divert", f"{target}.distrib", "--add", target)
        b.write(target, (paths.RECIPE / stub).read_text(), 0o755)


def _backports_kernel(b):
    """Resolve linux-image-amd64 in <codename>-backports to its concrete linux-image-<release>."""
    show = b.chroot_out("apt-cache", "show", f"linux-image-amd64/{b.codename}-backports")
    match = re.search(r"^Depends:.*?\b(linux-image-(\d\S*?))\s*\(", show, re.M)
    if not match:
        raise RuntimeError(f"cannot resolve linux-image-amd64 in {b.codename}-backports:\n{show}")
    return match.group(1), match.group(2)


def _predownload(b, package):
    """Put the backports kernel (as concrete package and as metapackage) and whatever they need that
    is not installed into /var/cache/apt/archives; prove that installing it later on a host, either
    way, has nothing left to download."""
    meta = f"linux-image-amd64/{b.codename}-backports"
    b.chroot("apt-get", "install", "--download-only", "-y", package, meta)
    for request in ([package], ["-t", f"{b.codename}-backports", "linux-image-amd64"]):
        pending = b.chroot_out("apt-get", "install", "--print-uris", "-qq", "-y", *request).strip()
        if pending:
            raise RuntimeError(f"apt-get install {' '.join(request)} would still download:\n{pending}")


def _update_grub(b, base_release):
    (b.root / "boot/grub").mkdir(exist_ok=True)  # grub-install creates it on a real host
    b.chroot("update-grub")
    cfg = (b.root / "boot/grub/grub.cfg").read_text()
    entry = re.search(rf"^\s*linux\s+/boot/vmlinuz-{re.escape(base_release)}\s+root=\S+\s+ro\s+quiet\s*$",
                      cfg, re.M)
    if "menuentry " not in cfg or not entry:
        raise RuntimeError(f"update-grub produced no menuentry booting {base_release} with 'ro quiet'")


def _build(b, image_tag, mirrors):
    root, codename = b.root, b.codename
    b.step(f"debootstrap {codename} from {mirrors.main} (minbase, ~2 min)")
    b.sh(["debootstrap", "--variant=minbase",
          f"--include={','.join(_packages('packages-debootstrap.txt', codename))}",
          codename, str(root), mirrors.main])
    # Keep package scripts from starting services inside the build chroot.
    b.write("/usr/sbin/policy-rc.d", "#!/bin/sh\nexit 101\n", 0o755)
    (root / "etc/apt/sources.list").unlink(missing_ok=True)
    b.write("/etc/apt/sources.list.d/debian.sources", mirror.image_sources(mirrors, codename))
    preferences = _recipe_file("apt-preferences", codename)
    if preferences.is_file():
        b.write("/etc/apt/preferences.d/lab-backports-kernel", preferences.read_text())
    b.sh(["mount", "-t", "proc", "proc", str(root / "proc")])
    b.sh(["mount", "--rbind", "/dev", str(root / "dev")])
    _install_stubs(b)
    b.step(f"apt-get update ({codename}, -updates, -security, -backports)")
    b.chroot("apt-get", "update")
    b.step(f"install GRUB, initramfs-tools, {codename}'s kernel, python3-venv/pip")
    b.chroot("apt-get", "install", "-y", "--no-install-recommends", *_packages("packages-apt.txt", codename))
    if not (root / "etc/default/grub").exists():
        # What grub-pc's postinst would install; the kernel_cmdline role edits this file.
        shutil.copy(root / "usr/share/grub/default/grub", root / "etc/default/grub")
    base_release = sorted(p.name.removeprefix("vmlinuz-") for p in (root / "boot").glob("vmlinuz-*"))[-1]
    b.step(f"update-grub (boot entry for {base_release})")
    _update_grub(b, base_release)
    package, release = _backports_kernel(b)
    b.step(f"pre-download {package} from {codename}-backports (~100 MB)")
    _predownload(b, package)
    serving.install(b)
    b.write("/etc/ssh/sshd_config.d/lab.conf", (paths.RECIPE / "sshd-lab.conf").read_text())
    b.chroot("ssh-keygen", "-A")
    # Each host gets its own machine-id at first boot instead of sharing the build's; systemd
    # would copy dbus's build-time id, so link it to /etc/machine-id as a Debian installer does.
    b.write("/etc/machine-id", "")
    (root / "var/lib/dbus/machine-id").unlink(missing_ok=True)
    (root / "var/lib/dbus/machine-id").symlink_to("/etc/machine-id")
    (root / "usr/sbin/policy-rc.d").unlink()
    meta = {"codename": codename, "kernel_package": package, "kernel_release": release,
            "base_kernel_release": base_release}
    b.write(IMAGE_INFO, json.dumps(meta, indent=2) + "\n")
    _unmount_all(root)
    b.step(f"podman import -> {image_tag}")
    tar = subprocess.Popen(["tar", "-C", str(root), "--numeric-owner", "-c", "."], stdout=subprocess.PIPE)
    podman.run("import", "--change", 'CMD ["/sbin/init"]', "-", image_tag, stdin=tar.stdout)
    tar.stdout.close()
    if tar.wait() != 0:
        raise RuntimeError("tar of the image root failed")
    return meta


def ensure(codename=DEFAULT):
    """Return image.json for the codename's current recipe, building the image first when it is missing."""
    image_tag = tag(codename)
    current = info(codename)
    if current and podman.run("image", "exists", image_tag, check=False, capture=False) == 0:
        return current
    mirrors = mirror.derive()
    _clean_build_dir()
    b = _Build(paths.BUILD / "rootfs", codename)
    b.step(f"building {image_tag}; log: {LOG}")
    try:
        meta = _build(b, image_tag, mirrors)
    finally:
        _unmount_all(paths.BUILD)
    shutil.rmtree(b.root)
    meta = {"tag": image_tag, **meta}
    paths.image_json(codename).write_text(json.dumps(meta, indent=2) + "\n")
    b.step("done")
    return meta
