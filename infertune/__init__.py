"""infertune's control-node package.

It ships at the root of the collection infertune.fleet, beside the roles and plugins it
reads (the knob catalog, sglang's defaults, tests/verify). Code that runs on the hosts
lives in plugins/module_utils/infertune_node, where Ansible ships it from; the few readers
the control node shares with it are imported from there, so each exists once.
"""
import sys
from pathlib import Path

FQCN = "infertune.fleet"


def find_collection(here: Path, search=None) -> Path | None:
    """The collection this package belongs to, `here` being the package's parent directory:
    `here` itself in a checkout or an installed collection; for a pip-installed console script,
    the first infertune.fleet on Ansible's collections path, as ansible-playbook searches it
    (search: directories to look in instead)."""
    if (here / "galaxy.yml").is_file() or (here / "MANIFEST.json").is_file():
        return here
    if search is None:
        from ansible import constants as C  # only here: a second of imports the other cases skip

        search = [*C.COLLECTIONS_PATHS, *(sys.path if C.COLLECTIONS_SCAN_SYS_PATH else ())]
    for base in search:
        candidate = Path(base).expanduser() / "ansible_collections" / Path(*FQCN.split("."))
        if (candidate / "MANIFEST.json").is_file() or (candidate / "galaxy.yml").is_file():
            return candidate
    return None


_HERE = Path(__file__).resolve().parent.parent
_FOUND = find_collection(_HERE)
# None found: the package's own parent, where the CLI says that the collection is missing.
COLLECTION = _FOUND or _HERE

_MODULE_UTILS = str(COLLECTION / "plugins" / "module_utils")
if _FOUND is not None and _MODULE_UTILS not in sys.path:
    # The collection's own package reads its own host-side code first; a pip-installed package
    # keeps the copy its wheel ships (infertune_node) and falls back to the collection's.
    if _FOUND == _HERE:
        sys.path.insert(0, _MODULE_UTILS)
    else:
        sys.path.append(_MODULE_UTILS)


def collection_files(prog, what):
    """Exit with one line when this package runs without the collection's files (a wheel with no
    infertune.fleet on Ansible's collections path): PROG needs WHAT of it."""
    if _FOUND is None:
        sys.exit(f"{prog}: needs the collection {FQCN}'s {what}: install it (ansible-galaxy collection install"
                 f" -p ~/.ansible/collections infertune-fleet-<version>.tar.gz) or run it in the checkout")
