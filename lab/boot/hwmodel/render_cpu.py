"""/sys/devices/system/{cpu,node} and /proc/cpuinfo from the profile and the kernel command line."""
import os

from . import cmdline as kcmdline
from .files import write


def _cpulist(cpus):
    return f"{cpus[0]}-{cpus[-1]}" if len(cpus) > 1 else str(cpus[0])


def topology(profile):
    """[(cpu, socket, core, node)]: sockets are spread evenly over the NUMA nodes."""
    cpu = profile["cpu"]
    sockets, cores, nodes = cpu["sockets"], cpu["cores_per_socket"], profile["numa_nodes"]
    per_node = sockets * cores // nodes
    return [(n, n // cores, n % cores, n // per_node) for n in range(sockets * cores)]


def cpufreq_driver(profile, cmdline):
    """The cpufreq selection the kernel makes: the first matching command-line rule, else firmware default."""
    cf = profile["cpufreq"]
    for rule in cf.get("cmdline", []):
        if kcmdline.param(cmdline, rule["param"]) == rule["value"]:
            return rule
    return cf["default"]


def idle_states(profile, cmdline):
    """cpuidle states kept by the driver's max_cstate parameter (POLL is state0, so N keeps N+1 states)."""
    idle = profile["cpuidle"]
    limit = kcmdline.int_param(cmdline, idle["max_cstate_param"]) if idle.get("max_cstate_param") else None
    states = idle["states"]
    return states[: limit + 1] if limit is not None and limit >= 1 else states


def render_cpu(root, profile, cmdline):
    """Write the future /sys/devices/system/cpu under ROOT."""
    topo = topology(profile)
    allcpus = _cpulist([c for c, *_ in topo])
    for name in ("present", "possible", "online"):
        write(os.path.join(root, name), allcpus)
    write(os.path.join(root, "offline"), "")
    selection = cpufreq_driver(profile, cmdline)
    if selection.get("status_dir"):
        write(os.path.join(root, selection["status_dir"], "status"), selection["status"])
    driver = profile["cpufreq"]["drivers"][selection["driver"]]
    states = idle_states(profile, cmdline)
    write(os.path.join(root, "cpuidle", "current_driver"), profile["cpuidle"]["driver"])
    write(os.path.join(root, "cpuidle", "current_governor_ro"), "menu")
    freq = profile["cpufreq"]
    files = {
        "cpufreq/scaling_driver": selection["driver"],
        "cpufreq/scaling_governor": driver["governor"],
        "cpufreq/scaling_available_governors": " ".join(driver["governors"]),
        "cpufreq/cpuinfo_min_freq": freq["min_khz"],
        "cpufreq/cpuinfo_max_freq": freq["max_khz"],
        "cpufreq/scaling_min_freq": freq["min_khz"],
        "cpufreq/scaling_max_freq": freq["max_khz"],
        "cpufreq/scaling_cur_freq": freq["min_khz"],
    }
    if driver.get("epp"):
        files["cpufreq/energy_performance_preference"] = driver["epp_default"]
        files["cpufreq/energy_performance_available_preferences"] = " ".join(driver["epp"])
    for k, state in enumerate(states):
        for key in ("name", "desc", "latency", "residency"):
            files[f"cpuidle/state{k}/{key}"] = state[key]
        for key in ("disable", "usage", "time"):
            files[f"cpuidle/state{k}/{key}"] = 0
    for cpu, socket, core, _node in topo:
        base = os.path.join(root, f"cpu{cpu}")
        for rel, value in files.items():
            write(os.path.join(base, rel), value)
        write(os.path.join(base, "online"), 1)
        write(os.path.join(base, "topology/physical_package_id"), socket)
        write(os.path.join(base, "topology/core_id"), core)


def render_node(root, profile):
    """Write the future /sys/devices/system/node under ROOT."""
    topo = topology(profile)
    nodes = list(range(profile["numa_nodes"]))
    for name in ("possible", "online", "has_cpu", "has_memory", "has_normal_memory"):
        write(os.path.join(root, name), _cpulist(nodes))
    for node in nodes:
        write(os.path.join(root, f"node{node}", "cpulist"), _cpulist([c for c, _, _, n in topo if n == node]))


def cpuinfo(profile):
    """/proc/cpuinfo text in the x86 kernel's layout."""
    cpu = profile["cpu"]
    blocks = []
    for n, socket, core, _node in topology(profile):
        blocks.append(
            f"processor\t: {n}\nvendor_id\t: {cpu['vendor_id']}\ncpu family\t: {cpu['family']}\n"
            f"model\t\t: {cpu['model']}\nmodel name\t: {cpu['model_name']}\nstepping\t: {cpu['stepping']}\n"
            f"cpu MHz\t\t: {float(cpu['mhz']):.3f}\nphysical id\t: {socket}\nsiblings\t: {cpu['cores_per_socket']}\n"
            f"core id\t\t: {core}\ncpu cores\t: {cpu['cores_per_socket']}\napicid\t\t: {n}\n"
            f"initial apicid\t: {n}\nfpu\t\t: yes\nfpu_exception\t: yes\ncpuid level\t: 16\nwp\t\t: yes\n"
            f"flags\t\t: {cpu['flags']}\nbogomips\t: {2 * float(cpu['mhz']):.2f}\nclflush size\t: 64\n"
            f"cache_alignment\t: 64\naddress sizes\t: 52 bits physical, 57 bits virtual\n"
            f"power management:\n"
        )
    return "\n".join(blocks) + "\n"
