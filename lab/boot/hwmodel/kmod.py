"""The NVIDIA kernel modules per kernel release: a kernel loads them only from its own /lib/modules.

The lab's driver is a prebuilt module package per kernel, in the layout of Ubuntu's
linux-modules-nvidia-<branch>-<release>: /lib/modules/<release>/kernel/nvidia-<branch>/*.ko.
Boot installs it for every kernel in /boot, the /etc/kernel/postinst.d hook
(lab/boot/kernel-postinst-nvidia) for each kernel installed later. Under the fault
no-driver-for-kernel there is no package for one release (the fault's value, default the
image's upgrade target: kernel_release in /etc/infertune-lab-image.json); boot removes it.
The nvidia modules load only when the booted release has nvidia.ko.
"""
import json
import os
import shutil

FAULT = "no-driver-for-kernel"
IMAGE_INFO = "etc/infertune-lab-image.json"
HOOK = "etc/kernel/postinst.d/lab-nvidia-modules"
PLAN = "nvidia-modules.json"  # written into the rendered tree at boot, read by the hook


def plan(root, profile, faults):
    """{branch, modules, withheld}: what the package holds and the releases it does not exist for."""
    withheld = []
    if FAULT in faults:
        release = faults[FAULT] or _image_target(root)
        withheld = [release] if release else []
    return {"branch": profile["gpu"]["driver_version"].split(".")[0],
            "modules": sorted(m for m in profile["modules"] if m.startswith("nvidia")),
            "withheld": withheld}


def _image_target(root):
    try:
        with open(os.path.join(root, IMAGE_INFO)) as f:
            return json.load(f).get("kernel_release")
    except (OSError, ValueError):
        return None


def module_dir(root, release, plan):
    return os.path.join(root, "lib/modules", release, "kernel", f"nvidia-{plan['branch']}")


def install(root, release, plan):
    """Install the package for RELEASE (remove it where withheld); True when it is installed."""
    directory = module_dir(root, release, plan)
    if release in plan["withheld"]:
        shutil.rmtree(directory, ignore_errors=True)
        return False
    os.makedirs(directory, exist_ok=True)
    for module in plan["modules"]:
        path = os.path.join(directory, module.replace("_", "-") + ".ko")
        if not os.path.exists(path):
            with open(path, "w") as f:
                f.write(f"lab stand-in for {module} {plan['branch']}, vermagic {release}\n")
    return True


def sync(root, plan):
    """At boot: the package for every kernel in /boot, none for a withheld release."""
    boot = os.path.join(root, "boot")
    for name in sorted(os.listdir(boot)) if os.path.isdir(boot) else []:
        if name.startswith("vmlinuz-"):
            install(root, name.removeprefix("vmlinuz-"), plan)


def loads(root, release, plan):
    return os.path.exists(os.path.join(module_dir(root, release, plan), "nvidia.ko"))


def hook(release, root="/", hw="/run/lab-hw"):
    """The postinst.d hook for a kernel just installed: the message the package manager prints."""
    try:
        with open(os.path.join(hw, PLAN)) as f:
            planned = json.load(f)
    except (OSError, ValueError):
        return f"lab: no NVIDIA module plan in {hw} (host booted before it existed); nothing installed"
    if install(root, release, planned):
        return f"lab: NVIDIA {planned['branch']} modules installed in {module_dir(root, release, planned)}"
    return f"lab: no NVIDIA module package for {release} (fault {FAULT})"
