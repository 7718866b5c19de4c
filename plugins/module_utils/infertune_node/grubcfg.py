"""Menu entries of a generated grub.cfg and the saved default of grubenv."""
import re

from . import sysfs

_OPEN = re.compile(r"^\s*(menuentry|submenu)\s+(?:'([^']*)'|\"([^\"]*)\")(.*)\{\s*$")
_ID = re.compile(r"\$menuentry_id_option\s+'([^']+)'")
_LINUX = re.compile(r"^\s*linux(?:efi|16)?\s+(\S+)(.*)$")
_SET = re.compile(r"^\s*set\s+([A-Za-z_][A-Za-z0-9_]*)=(.*?)\s*$", re.M)
_DEFAULT = re.compile(r'^\s*set default="?([^"\n]*?)"?\s*$', re.M)
GRUBENV = "/boot/grub/grubenv"


def entries(text):
    """Menu entries as dicts {title, id, submenu_id, linux, args, trail}, in menu order; linux is
    the kernel image path, args the rest of its line as written (GRUB variables unexpanded), trail
    the (position, title, id) of each level down to the entry."""
    found, stack, counts = [], [], [0]
    for line in text.splitlines():
        match = _OPEN.match(line)
        if match:
            kind, title = match.group(1), match.group(2) or match.group(3)
            ident = _ID.search(match.group(4))
            frame = {"kind": kind, "title": title, "id": ident.group(1) if ident else title, "linux": None,
                     "args": None}
            frame["submenu_id"] = next((f["id"] for f in reversed(stack) if f["kind"] == "submenu"), None)
            frame["trail"] = [f["step"] for f in stack] + [(counts[-1], title, frame["id"])]
            frame["step"] = frame["trail"][-1]
            counts[-1] += 1
            counts.append(0)
            stack.append(frame)
            continue
        linux = _LINUX.match(line)
        if linux and stack and stack[-1]["kind"] == "menuentry":
            stack[-1]["linux"], stack[-1]["args"] = linux.group(1), linux.group(2).strip()
        # GRUB's generator puts a closing brace alone on its line.
        if line.strip() == "}" and stack:
            frame = stack.pop()
            counts.pop()
            if frame["kind"] == "menuentry":
                found.append({k: frame[k] for k in ("title", "id", "submenu_id", "linux", "args", "trail")})
    return found


def saved_entry_for(text, release):
    """The grub-set-default argument that boots `release` ("submenu>entry"), or None.

    The pinned choice is the normal (not recovery) entry in the advanced submenu:
    the top-level entry follows whichever kernel is newest and would not pin.
    """
    candidates = [e for e in entries(text)
                  if e["linux"] and e["linux"].endswith("/vmlinuz-" + release)
                  and "recovery" not in e["id"] and "recovery mode" not in e["title"]]
    candidates.sort(key=lambda e: e["submenu_id"] is None)
    if not candidates:
        return None
    best = candidates[0]
    return "%s>%s" % (best["submenu_id"], best["id"]) if best["submenu_id"] else best["id"]


def read_env(root, grubenv=GRUBENV):
    """grubenv's variables (saved_entry, next_entry, ...)."""
    lines = (sysfs.read(root, grubenv) or "").splitlines()
    return dict(line.split("=", 1) for line in lines if "=" in line and not line.startswith("#"))


def saved_entry(root, grubenv=GRUBENV):
    return read_env(root, grubenv).get("saved_entry")


def default_spec(text, env):
    """What GRUB boots next as its `default`: a one-shot next_entry, else the config's `set default=`
    (GRUB_DEFAULT=saved writes "${saved_entry}", read from grubenv)."""
    if env.get("next_entry"):
        return env["next_entry"]
    specs = [spec for spec in _DEFAULT.findall(text) if spec != "${next_entry}"]
    spec = specs[-1] if specs else "0"
    return env.get("saved_entry", "") if spec == "${saved_entry}" else spec


def _matches(step, part):
    position, title, ident = step
    return int(part) == position if part.isdigit() else part in (title, ident)


def default_entry(text, env):
    """The menu entry GRUB boots by default: the spec resolved level by level (position, title or id,
    "submenu>entry"); GRUB falls back to the first entry when it names none."""
    return resolve(text, default_spec(text, env))


def resolve(text, spec):
    """The menu entry a default spec names (as default_entry resolves it), or the first entry."""
    menu = entries(text)
    parts = str(spec).split(">")
    for entry in menu:
        if len(entry["trail"]) == len(parts) and all(map(_matches, entry["trail"], parts)):
            return entry
    first = [entry for entry in menu if entry["trail"][0][0] == 0]
    return first[0] if first else None


def assignments(text, name):
    """The values grub.cfg's `set NAME=VALUE` lines give the variable (Ubuntu's vt_handoff is set
    to vt.handoff=7 or to nothing, depending on a condition GRUB evaluates at boot)."""
    return [value.strip("'\"") for found, value in _SET.findall(text) if found == name]
