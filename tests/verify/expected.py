"""How the checks read the values a host was tuned to.

The values themselves come from the run (`python -m infertune.verify` writes what Ansible
resolved for each host); nothing here reads the roles' files.
"""


def truthy(value):
    """A boolean variable as Ansible's bool filter reads it (-e passes "false" as a string)."""
    return str(value).strip().lower() in ("true", "yes", "on", "1", "y", "t")
