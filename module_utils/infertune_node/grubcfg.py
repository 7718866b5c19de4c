"""Menu entries of a generated grub.cfg and the saved default of grubenv."""
import re

from . import sysfs

_OPEN = re.compile(r"^\s*(menuentry|submenu)\s+(?:'([^']*)'|\"([^\"]*)\")(.*)\{\s*$")
_ID = re.compile(r"\$menuentry_id_option\s+'([^']+)'")
_LINUX = re.compile(r"^\s*linux\s+(\S+)")


def entries(text):
    """Menu entries as dicts {title, id, submenu_id, linux}; linux is the kernel image path."""
    found, stack = [], []
    for line in text.splitlines():
        match = _OPEN.match(line)
        if match:
            kind, title = match.group(1), match.group(2) or match.group(3)
            ident = _ID.search(match.group(4))
            frame = {"kind": kind, "title": title, "id": ident.group(1) if ident else title, "linux": None}
            frame["submenu_id"] = next((f["id"] for f in reversed(stack) if f["kind"] == "submenu"), None)
            stack.append(frame)
            continue
        linux = _LINUX.match(line)
        if linux and stack and stack[-1]["kind"] == "menuentry":
            stack[-1]["linux"] = linux.group(1)
        # GRUB's generator puts a closing brace alone on its line.
        if line.strip() == "}" and stack:
            frame = stack.pop()
            if frame["kind"] == "menuentry":
                found.append({k: frame[k] for k in ("title", "id", "submenu_id", "linux")})
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


def saved_entry(root, grubenv="/boot/grub/grubenv"):
    for line in (sysfs.read(root, grubenv) or "").splitlines():
        if line.startswith("saved_entry="):
            return line.split("=", 1)[1]
    return None
