"""Every sysctl of sysctl_settings live and as systemd-sysctl will set it at boot (role sysctl)."""
import posixpath
import shlex

from outcome import mismatch
from probes import probe
from readings import sections

# systemd-sysctl's directories, highest priority first; a file name in an earlier
# directory masks the same name in later ones; files apply in name order.
SYSCTL_DIRS = ("/etc/sysctl.d", "/run/sysctl.d", "/usr/local/lib/sysctl.d", "/usr/lib/sysctl.d", "/lib/sysctl.d")


def key(text):
    """A key as systemd-sysctl reads it: "-" (ignore failures) dropped, slashes as dots."""
    return text.strip().lstrip("-").replace("/", ".")


def boot_settings(grep_output, wanted):
    """{key: [(file, value)]} for the wanted keys, in the order systemd-sysctl applies them (the
    last one wins)."""
    by_name = {}
    for line in grep_output.splitlines():
        path, sep, assignment = line.partition(":")
        name, sep, value = assignment.partition("=")
        if not sep or key(name) not in wanted:
            continue  # comments and other keys
        base = "99-sysctl.conf" if path == "/etc/sysctl.conf" else posixpath.basename(path)
        directory = posixpath.dirname(path)
        rank = SYSCTL_DIRS.index(directory) if directory in SYSCTL_DIRS else len(SYSCTL_DIRS)
        # Within one file the last line of a key wins, as it does for systemd-sysctl.
        if base not in by_name or rank < by_name[base][0]:
            by_name[base] = (rank, path, {})
        if by_name[base][1] == path:
            by_name[base][2][key(name)] = value.strip()
    settings = {}
    for base, (rank, path, values) in sorted(by_name.items()):
        for name, value in values.items():
            settings.setdefault(name, []).append((path, value))
    return settings


def same(one, other):
    """Multi-field values read back tab-separated: compare the fields."""
    return one.split() == other.split()


def wanted_sysctls(want):
    return {str(item["name"]): str(item["value"]) for item in want["sysctl_settings"]}


@probe("test_sysctl")
def sysctl_read(want):
    """Each wanted sysctl live, then every assignment of the files systemd-sysctl reads at boot."""
    dirs = " ".join(d + "/*.conf" for d in SYSCTL_DIRS)
    reads = "".join(f"cat {shlex.quote('/proc/sys/' + k.replace('.', '/'))} 2>/dev/null; echo @@; "
                    for k in wanted_sysctls(want))
    return f"{reads}grep -H = {dirs} /etc/sysctl.conf 2>/dev/null"


def test_sysctl(name, sh, want):
    wanted, conf = wanted_sysctls(want), want["sysctl_file"]
    *live, files = sections(sh(sysctl_read(want)), len(wanted) + 1)
    settings = boot_settings(files, wanted)
    problems = []
    for (sysctl, value), running in zip(wanted.items(), live):
        running, boot = running.strip(), settings.get(sysctl, [])
        ours = [setting for path, setting in boot if path == conf]
        if not running:
            problems.append(f"{sysctl}: not on this kernel")
            continue
        if not same(running, value):
            problems.append(f"{sysctl} live {running}")
        if len(ours) != 1 or not same(ours[0], value):
            problems.append(f"{conf} sets {sysctl} to {ours[0]}" if ours else f"{conf} does not set {sysctl}")
        if not boot:
            problems.append(f"no sysctl.d file sets {sysctl} (the kernel default applies at boot)")
        elif not same(boot[-1][1], value):
            problems.append(f"boot applies {sysctl} = {boot[-1][1]} from {boot[-1][0]}")
    if problems:
        expected = ", ".join(f"{k}={v}" for k, v in wanted.items())
        mismatch(name, "sysctls", f"{expected} live and from {conf} at boot", "; ".join(problems))
