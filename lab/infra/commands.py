"""The labctl subcommands."""
import json
import os
import shutil
import sys

from . import host_setup, hosts, image, inventory, network, packages, paths, podman, ssh, users


def _say(text):
    print(f"labctl: {text}", flush=True)


def _prune_old_images():
    """Drop lab images of older recipes that no container uses any more (~700 MB each)."""
    tags = set(podman.run("images", "--format", "{{.Repository}}:{{.Tag}}", image.REPOSITORY).split())
    in_use = set(podman.run("ps", "-a", "--format", "{{.Image}}").split())
    for old in sorted(tags - in_use - {image.tag(c) for c in image.CODENAMES}):
        podman.run("rmi", old)
        _say(f"removed old image {old}")


def cmd_host_setup(_args):
    for line in host_setup.setup():
        _say(line)


def cmd_packages(_args):
    for line in packages.install():
        _say(line)


def cmd_image(args):
    host_setup.setup()
    for codename in args.codenames or [image.DEFAULT]:
        meta = image.ensure(codename)
        _say(f"image {meta['tag']}: base kernel {meta['base_kernel_release']}, "
             f"upgrade target {meta['kernel_package']} (pre-downloaded)")
    _prune_old_images()


def _spec(args):
    """The lab's shape: options given now, else what the last `up` used, else the defaults."""
    stored = json.loads(paths.SPEC_JSON.read_text()) if paths.SPEC_JSON.exists() else {}
    profile_map = stored.get("profile_map", {})
    if args.profile_map is not None:
        pairs = [p.split("=", 1) for p in args.profile_map.split(",") if p]
        if any(len(p) != 2 for p in pairs):
            raise RuntimeError("--profile-map wants host=PROFILE[,host=PROFILE...]")
        profile_map = dict(pairs)
    return {
        "count": args.hosts or stored.get("count", hosts.DEFAULT_COUNT),
        "profile": args.profile or stored.get("profile", hosts.DEFAULT_PROFILE),
        "profile_map": profile_map,
    }


def _lab_hosts():
    if not paths.SPEC_JSON.exists():
        raise RuntimeError("no lab yet: run labctl up")
    spec = json.loads(paths.SPEC_JSON.read_text())
    return hosts.plan(spec["count"], spec["profile"], spec["profile_map"])


def _host(name):
    for host in _lab_hosts():
        if host.name == name:
            return host
    raise RuntimeError(f"no lab host {name!r}")


def _wait_for_ssh(lab):
    """Wait until the hosts that boot answer ssh; return them."""
    booting = [h for h in lab if "no-boot" not in hosts.faults(h.name)]
    for name in sorted(set(h.name for h in lab) - {h.name for h in booting}):
        _say(f"{name}: no-boot fault set, not waiting for it")
    _say(f"waiting for ssh on {len(booting)} host(s)")
    silent = ssh.wait({h.name: h.ip for h in booting})
    if silent:
        raise RuntimeError(f"no ssh answer from {', '.join(silent)} "
                           f"(see: podman logs; labctl exec HOST -- journalctl -b)")
    return booting


def cmd_up(args):
    spec = _spec(args)
    lab = hosts.plan(**spec)
    # Fails on an unknown profile or os before touching anything.
    codenames = {h.name: hosts.codename(h.profile) for h in lab}
    host_setup.setup()
    metas = {c: image.ensure(c) for c in sorted(set(codenames.values()))}
    public_key = ssh.ensure_key()
    network.ensure()
    paths.SPEC_JSON.write_text(json.dumps(spec, indent=2) + "\n")
    existing = hosts.containers()
    wanted = {h.container for h in lab}
    for container in sorted(set(existing) - wanted):
        _say(f"removing {container} (not in the lab any more)")
        hosts.remove(container)
    for stale in sorted(set(p.name for p in paths.HOSTS.glob("*")) - {h.name for h in lab}):
        shutil.rmtree(paths.HOSTS / stale)  # its faults must not haunt a later host of that name
    for host in lab:
        meta = metas[codenames[host.name]]
        profile_changed = hosts.prepare_dir(host, public_key)
        current = existing.get(host.container)
        if current and (args.fresh or profile_changed):
            reason = "--fresh" if args.fresh else f"profile now {host.profile}"
            _say(f"recreating {host.name} ({reason})")
            hosts.remove(host.container)
            current = None
        if current is None:
            _say(f"creating {host.name} {host.ip} profile={host.profile}")
            hosts.create(host, meta["tag"])
        elif current["state"] != "running":
            _say(f"starting {host.name} (was {current['state']})")
            podman.run("start", host.container)
        elif current["image"] != meta["tag"]:
            _say(f"{host.name} runs an older image {current['image']}; `up --fresh` recreates it")
    _prune_old_images()
    ssh.record_host_keys(lab)
    inventory.write(lab, {h.name: metas[codenames[h.name]] for h in lab})
    booted = _wait_for_ssh(lab)
    users.ensure(booted)
    _say(f"{len(lab)} host(s) up; inventory {paths.INVENTORY.relative_to(paths.REPO)}; "
         f"user {users.USER} (sudo) on {len(booted)}")


def cmd_down(_args):
    for container in sorted(hosts.containers()):
        _say(f"removing {container}")
        hosts.remove(container)
    network.remove()
    inventory.remove()
    shutil.rmtree(paths.HOSTS, ignore_errors=True)  # faults and profiles die with their hosts
    _prune_old_images()
    stray = network.stray_firewall_rules()
    if stray:
        raise RuntimeError("firewall rules of the lab network remain:\n" + "\n".join(stray))
    _say("lab is down (image cache kept)")


# What the driver writes to the kernel log when the fault happens: (Xid number or the fault's own, GPU index).
LOGGED = {"xid": lambda words: words, "remap-pending": lambda words: ["63", words[0]],
          "remap-failure": lambda words: ["64", words[0]]}


def cmd_fault(args):
    value = " ".join(args.value) or None
    host = _host(args.host)
    hosts.set_fault(args.host, args.name, value, args.clear, hosts.load_profile(host.profile))
    if args.clear:
        _say(f"{args.host}: fault {args.name} cleared")
        return
    if args.name not in hosts.HEALTH:
        _say(f"{args.host}: fault {args.name} set; it takes effect at the host's next boot")
        return
    # A GPU health fault happens now: the driver logs it on a running host, nvidia-smi answers with it.
    running = hosts.containers().get(host.container, {}).get("state") == "running"
    if args.name in LOGGED and running:
        podman.run("exec", host.container, "/lab/boot/lab-kmsg", "xid", *LOGGED[args.name](value.split()))
    _say(f"{args.host}: fault {args.name} set; it acts now" + (" and the driver logged it" if args.name in LOGGED and running
                                                                 else ""))


def cmd_stop(args):
    podman.run("stop", "-t", "5", _host(args.host).container)
    _say(f"{args.host} stopped (unreachable until labctl start)")


def cmd_start(args):
    host = _host(args.host)
    podman.run("start", host.container)
    _wait_for_ssh([host])
    _say(f"{args.host} started")


def cmd_exec(args):
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        raise RuntimeError("usage: labctl exec HOST -- CMD...")
    tty = ["-t"] if sys.stdin.isatty() and sys.stdout.isatty() else []
    argv, env = podman.exec_argv("exec", "-i", *tty, _host(args.host).container, *command)
    os.execvpe(argv[0], argv, env)


def cmd_status(_args):
    lab = _lab_hosts()
    for codename in image.CODENAMES:
        meta = image.info(codename)
        print(f"image {codename}: {meta['tag'] if meta else 'not built for the current recipe'}")
    existing = hosts.containers()
    print(f"{'host':<12} {'ip':<15} {'container':<10} {'ssh':<4} {'profile':<24} faults")
    for host in lab:
        state = existing.get(host.container, {}).get("state", "missing")
        reach = "yes" if state == "running" and ssh.answers(host.ip) else "no"
        faults = ",".join(hosts.faults(host.name)) or "-"
        print(f"{host.name:<12} {host.ip:<15} {state:<10} {reach:<4} {host.profile:<24} {faults}")
