"""kernel.numa_balancing live and as systemd-sysctl will set it at boot (role numa_balancing)."""
import posixpath

from outcome import mismatch, not_applicable
from readings import sections

# systemd-sysctl's directories, highest priority first; a file name in an earlier
# directory masks the same name in later ones; files apply in name order.
SYSCTL_DIRS = ("/etc/sysctl.d", "/run/sysctl.d", "/usr/local/lib/sysctl.d", "/usr/lib/sysctl.d", "/lib/sysctl.d")
KEYS = ("kernel.numa_balancing", "kernel/numa_balancing")


def boot_settings(grep_output):
    """[(file, value)] in the order systemd-sysctl applies them (the last one wins)."""
    by_name = {}
    for line in grep_output.splitlines():
        path, sep, assignment = line.partition(":")
        key, sep, value = assignment.partition("=")
        if not sep or key.strip() not in KEYS:
            continue  # comments and other keys
        base = "99-sysctl.conf" if path == "/etc/sysctl.conf" else posixpath.basename(path)
        directory = posixpath.dirname(path)
        rank = SYSCTL_DIRS.index(directory) if directory in SYSCTL_DIRS else len(SYSCTL_DIRS)
        if base not in by_name or rank < by_name[base][0]:
            by_name[base] = (rank, path, value.strip())
    return [(path, value) for base, (rank, path, value) in sorted(by_name.items())]


def test_numa_balancing(name, sh, want):
    dirs = " ".join(d + "/*.conf" for d in SYSCTL_DIRS)
    live, files = sections(sh(f"cat /proc/sys/kernel/numa_balancing 2>/dev/null; echo @@;"
                              f" grep -H numa_balancing {dirs} /etc/sysctl.conf 2>/dev/null"), 2)
    live = live.strip()
    if not live:
        not_applicable(name, "numa_balancing", "the kernel has no kernel.numa_balancing (no NUMA balancing built in)")
    mode, conf = str(want["numa_balancing_mode"]), want["numa_balancing_sysctl_file"]
    settings = boot_settings(files)
    ours = [value for path, value in settings if path == conf]
    problems = []
    if live != mode:
        problems.append(f"live {live}")
    if ours != [mode]:
        problems.append(f"{conf} sets {ours[0] if ours else 'nothing'}")
    if not settings:
        problems.append("no sysctl.d file sets it (the kernel default applies at boot)")
    elif settings[-1][1] != mode:
        problems.append(f"boot applies {settings[-1][1]} from {settings[-1][0]}")
    if problems:
        mismatch(name, "numa_balancing", f"{mode} live and from {conf} at boot", "; ".join(problems))
