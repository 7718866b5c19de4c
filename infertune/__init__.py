"""infertune's control-node package.

It ships at the root of the collection infertune.fleet, beside the roles and plugins it
reads (the knob catalog, sglang's defaults, tests/verify). Code that runs on the hosts
lives in plugins/module_utils/infertune_node, where Ansible ships it from; the few readers
the control node shares with it are imported from there, so each exists once.
"""
import sys
from pathlib import Path


def _collection_root() -> Path:
    """The collection this package belongs to: its own parent in a checkout or an installed
    collection; for a pip-installed console script, infertune.fleet on Ansible's collections path."""
    here = Path(__file__).resolve().parent.parent
    if (here / "galaxy.yml").is_file() or (here / "MANIFEST.json").is_file():
        return here
    from ansible import constants as C  # only here: a second of imports the other cases skip

    for base in C.COLLECTIONS_PATHS:
        candidate = Path(base).expanduser() / "ansible_collections" / "infertune" / "fleet"
        if (candidate / "MANIFEST.json").is_file() or (candidate / "galaxy.yml").is_file():
            return candidate
    return here


COLLECTION = _collection_root()
# Inside the collection this package is the collection's own copy: a checkout, not an install.
IN_COLLECTION = COLLECTION == Path(__file__).resolve().parent.parent

_MODULE_UTILS = str(COLLECTION / "plugins" / "module_utils")
if _MODULE_UTILS not in sys.path:
    sys.path.append(_MODULE_UTILS)
