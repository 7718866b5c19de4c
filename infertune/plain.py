"""Values from Ansible's templar as plain Python types, for the action plugins."""


def plain(value, depth=0):
    """Tagged/unsafe strings, lazy lists and mappings as str, int, float, bool, None, list and dict."""
    if depth > 40:
        return value
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, str):
        return str(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, dict):
        return {plain(k, depth + 1): plain(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v, depth + 1) for v in value]
    return value
