"""Boolean variables: -e gives them as strings ("false" is a non-empty string, so true to Jinja,
and ansible-core 2.19 refuses a string as a conditional). Validation accepts exactly what
Ansible's bool filter maps, and every condition or expression that reads one goes through
`| bool`, so a string never decides anything and never fails a host after its drain."""
import warnings

import jinja2
import pytest
import yaml

from fakehost import REPO
from infertune import rules, specs, validation

# The declarations, read here from the files themselves rather than through validation.
SPEC_FILES = sorted(REPO.glob("roles/*/meta/argument_specs.yml")) + [REPO / "playbooks" / "meta" / "argument_specs.yml"]


def declared_booleans():
    names = set()
    for path in SPEC_FILES:
        for entry in (yaml.safe_load(path.read_text())["argument_specs"] or {}).values():
            names.update(name for name, spec in (entry.get("options") or {}).items()
                         if (spec or {}).get("type") == "bool")
    return sorted(names)


BOOLEANS = declared_booleans()
ACCEPTED = {"true": True, "false": False, "yes": True, "0": False, "TRUE": True, "Off": False, "on": True,
            "No": False, "1": True, 1: True, 0: False, True: True, False: False}
# Values the bool filter would only coerce with a deprecation warning, or not at all.
REFUSED = ["maybe", "y", "t", "n", " true", "true ", "2", "", 2, -1, 0.0, [], {}]


def test_the_booleans_are_found():
    assert "sglang_service_started" in BOOLEANS and "rollout_allow_single_batch" in BOOLEANS
    assert len(BOOLEANS) >= 20


@pytest.mark.parametrize("name", BOOLEANS)
def test_every_boolean_takes_what_the_bool_filter_maps(name):
    for value, meaning in ACCEPTED.items():
        found = []
        converted = validation._check_one(name, specs.declared()[name], value, found, rules.rules())
        assert found == [] and converted is meaning, (name, value, found)
        assert validation.report({name: value}) == [], (name, value)


@pytest.mark.parametrize("name", BOOLEANS)
def test_every_boolean_refuses_anything_else_naming_host_variable_and_rule(name):
    for value in REFUSED:
        lines = validation.report({name: value}, host="gpu-07")
        assert lines == ["host gpu-07: %s: %s, got %s" % (name, validation.BOOL_RULE, rules.show(value))], value


# ---------------------------------------------------------------------------- static scan

CONDITION_KEYS = ("when", "failed_when", "changed_when", "until", "that")
YAML_FILES = sorted(set(REPO.glob("roles/*/*/*.yml")) - set(REPO.glob("roles/*/meta/*.yml"))
                    | set(REPO.glob("playbooks/**/*.yml")) | set(REPO.glob("*.yml")))
TEMPLATES = sorted(REPO.glob("roles/*/templates/*.j2"))
_LEXER = jinja2.Environment(extensions=["jinja2.ext.do", "jinja2.ext.loopcontrols"]).lexer


def expressions(node, where):
    """(where, template text) of every string in a YAML tree; conditions are bare expressions."""
    stack = [(node, where, False)]
    while stack:
        item, path, condition = stack.pop()
        if isinstance(item, str):
            yield path, "{{ %s }}" % item if condition else item
        elif isinstance(item, list):
            stack.extend((sub, "%s[%d]" % (path, i), condition) for i, sub in enumerate(item))
        elif isinstance(item, dict):
            stack.extend((sub, "%s.%s" % (path, key), key in CONDITION_KEYS) for key, sub in item.items())


def bare_uses(text, template_file=False):
    """Boolean variables read without `| bool` somewhere in their filter chain."""
    # Plain Jinja decodes a string constant's backslash escapes. In a YAML string Ansible doubles
    # the backslashes of its {{ }} constants first (a regex's `\{` stays `\{`), so the escape
    # plain Jinja warns about there is none in a play; a template file's it decodes as Jinja does.
    with warnings.catch_warnings():
        if not template_file:
            warnings.simplefilter("ignore", DeprecationWarning)
        tokens = [t for t in _LEXER.tokenize(text) if t.type not in ("data",)]
    found = []
    for index, token in enumerate(tokens):
        if token.type != "name" or token.value not in BOOLEANS:
            continue
        before = tokens[index - 1].type if index else None
        after = tokens[index + 1].type if index + 1 < len(tokens) else None
        if before == "dot" or after == "assign":  # an attribute, or a keyword argument's name
            continue
        if not _filtered_to_bool(tokens, index + 1):
            found.append(token.value)
    return found


def _filtered_to_bool(tokens, index):
    while index < len(tokens) and tokens[index].type == "pipe":
        index += 1
        name = tokens[index].value if index < len(tokens) else None
        index += 1
        while index + 1 < len(tokens) and tokens[index].type == "dot":  # ansible.builtin.bool
            name, index = tokens[index + 1].value, index + 2
        if name == "bool":
            return True
        if index < len(tokens) and tokens[index].type == "lparen":
            depth = 0
            while index < len(tokens):
                depth += {"lparen": 1, "rparen": -1}.get(tokens[index].type, 0)
                index += 1
                if depth == 0:
                    break
    return False


def test_the_scan_finds_a_bare_boolean():
    assert bare_uses("{{ sglang_service_started }}") == ["sglang_service_started"]
    assert bare_uses("{{ 'x' if not sglang_enable_metrics | default(true) else 'y' }}") == ["sglang_enable_metrics"]
    tree = {"when": ["x is defined", "sglang_service_started"], "msg": "sglang_service_started is a name here"}
    assert sorted((where, bare_uses(text)) for where, text in expressions(tree, "t")) == [
        ("t.msg", []), ("t.when[0]", []), ("t.when[1]", ["sglang_service_started"])]
    assert bare_uses("{{ not sglang_service_started | default(false) | bool and a.sglang_service_started }}") == []
    assert bare_uses("{% if sglang_enable_metrics | ansible.builtin.bool %}x{% endif %}") == []


def test_every_boolean_is_read_through_the_bool_filter():
    offenders = []
    for path in YAML_FILES:
        for where, text in expressions(yaml.safe_load(path.read_text()), path.relative_to(REPO).as_posix()):
            offenders += ["%s: %s" % (where, name) for name in bare_uses(text)]
    for path in TEMPLATES:
        offenders += ["%s: %s" % (path.relative_to(REPO), name)
                      for name in bare_uses(path.read_text(), template_file=True)]
    assert offenders == [], "add | bool where these read a boolean variable"
