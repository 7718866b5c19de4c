"""Role variables as a play sees them, for tests that template them with Ansible's own Templar."""
from ansible.template import trust_as_template


def trusted(value):
    """Role files are trusted templates in a play; yaml.safe_load data is not, so mark it."""
    if isinstance(value, str):
        return trust_as_template(value)
    if isinstance(value, dict):
        return {key: trusted(item) for key, item in value.items()}
    if isinstance(value, list):
        return [trusted(item) for item in value]
    return value
