"""Choose the boot entry the way GRUB would, from the image's grub.cfg and grubenv."""
import os
import re
import shlex

CFG = "boot/grub/grub.cfg"
ENV = "boot/grub/grubenv"
ENV_SIZE = 1024
ENV_HEADER = "# GRUB Environment Block\n"


def parse_cfg(text):
    """Menu tree of a grub.cfg: list of entries {title, id, image, args} and submenus {title, id, children}."""
    root = []
    stack = [root]
    node_stack = []
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith(("menuentry ", "submenu ")) and line.endswith("{"):
            words = shlex.split(line[:-1])
            node = {"title": words[1], "id": _option(words, "$menuentry_id_option") or _option(words, "--id")}
            if words[0] == "submenu":
                node["children"] = []
            stack[-1].append(node)
            node_stack.append(node)
            stack.append(node.get("children", []))
        elif line == "}" and node_stack:
            node_stack.pop()
            stack.pop()
        elif node_stack and "children" not in node_stack[-1]:
            match = re.match(r"(linux|linuxefi|linux16)\s+(\S*vmlinuz-\S+)\s*(.*)", line)
            if match:
                # Unexpanded $variables (e.g. Ubuntu's $vt_handoff) are empty at boot here.
                args = [a for a in shlex.split(match.group(3)) if not a.startswith("$")]
                node_stack[-1].update(image=match.group(2), args=args)
    return root


def _option(words, flag):
    return words[words.index(flag) + 1] if flag in words[:-1] else None


def read_env(path):
    env = {}
    if os.path.exists(path):
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                if not line.startswith("#") and "=" in line:
                    key, _, value = line.rstrip("\n").partition("=")
                    env[key] = value
    return env


def write_env(path, env):
    """Rewrite grubenv as the fixed 1024-byte block that grub-editenv writes."""
    body = ENV_HEADER + "".join(f"{k}={v}\n" for k, v in env.items())
    with open(path, "w", encoding="utf-8") as f:
        f.write(body + "#" * max(0, ENV_SIZE - len(body.encode())))


def default_spec(cfg_text, env):
    """The `default` GRUB ends up with: next_entry (one-shot) or the config's `set default=`."""
    if env.get("next_entry"):
        return env["next_entry"]
    specs = [s for s in re.findall(r'^\s*set default="?([^"\n]*)"?\s*$', cfg_text, re.M) if s != "${next_entry}"]
    spec = specs[-1] if specs else "0"
    if spec == "${saved_entry}":
        return env.get("saved_entry", "")
    return spec


def choose(entries, spec):
    """Entry for a default spec: index, title, id, or a 'submenu>entry' path of those; None if unmatched."""
    level, node = entries, None
    for part in spec.split(">"):
        if part.isdigit():
            node = level[int(part)] if int(part) < len(level) else None
        else:
            node = next((e for e in level if part in (e["title"], e["id"])), None)
        if node is None:
            return None
        level = node.get("children", [])
    return node if node and "image" in node else None


def _first_entry(entries):
    for entry in entries:
        found = _first_entry(entry["children"]) if "children" in entry else entry
        if found and "image" in found:
            return found
    return None


def _version_key(name):
    return [(0, int(p), "") if p.isdigit() else (1, 0, p) for p in re.split(r"(\d+)", name)]


def boot_entry(root, profile):
    """(kernel release, /proc/cmdline) for this boot; consumes a one-shot next_entry like GRUB."""
    cfg_path = os.path.join(root, CFG)
    if os.path.exists(cfg_path):
        with open(cfg_path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        env_path = os.path.join(root, ENV)
        env = read_env(env_path)
        entries = parse_cfg(text)
        entry = choose(entries, default_spec(text, env)) or _first_entry(entries)
        if env.get("next_entry"):
            env["next_entry"] = ""
            write_env(env_path, env)
        if entry:
            return _release(entry["image"]), " ".join([f"BOOT_IMAGE={entry['image']}"] + entry["args"])
    boot = os.path.join(root, "boot")
    images = sorted((n for n in os.listdir(boot) if n.startswith("vmlinuz-")),
                    key=_version_key) if os.path.isdir(boot) else []
    kernel = profile["kernel"]
    release = _release(images[-1]) if images else kernel["fallback_release"]
    return release, f"BOOT_IMAGE=/boot/vmlinuz-{release} {kernel['fallback_args']}"


def _release(image):
    return os.path.basename(image).split("vmlinuz-", 1)[1]
