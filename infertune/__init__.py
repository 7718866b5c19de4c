"""infertune's control-node package.

Code that runs on the hosts lives in module_utils/infertune_node, where Ansible ships it from;
the few readers the control node shares with it are imported from there, so each exists once.
"""
import sys
from pathlib import Path

_MODULE_UTILS = str(Path(__file__).resolve().parent.parent / "module_utils")
if _MODULE_UTILS not in sys.path:
    sys.path.append(_MODULE_UTILS)
