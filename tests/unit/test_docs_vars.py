"""docs/variables.md's tables are generated from the argument specs, and the specs agree with the defaults."""
import subprocess
import sys

import pytest
import yaml

from fakehost import REPO
from infertune import docs_vars, rules, specs

SPECS = specs.load_specs()


def test_the_variables_page_is_generated():
    text = (REPO / "docs" / "variables.md").read_text()
    assert docs_vars.DOC == REPO / "docs" / "variables.md"
    assert docs_vars.START in text and docs_vars.END in text
    assert docs_vars.rewrite(text, docs_vars.render()) == text, (
        "docs/variables.md is out of date: run .venv/bin/python -m infertune.docs_vars --write")


def test_check_command(tmp_path):
    doc = tmp_path / "variables.md"
    doc.write_text("# x\n\n## Variables\n\nIntro.\n\n%s\nstale\n%s\n\n## Next\n" % (docs_vars.START, docs_vars.END))
    command = [sys.executable, "-m", "infertune.docs_vars", "--doc", str(doc)]
    assert subprocess.run(command + ["--check"], cwd=REPO, capture_output=True).returncode == 1
    assert subprocess.run(command + ["--write"], cwd=REPO, capture_output=True).returncode == 0
    assert subprocess.run(command + ["--check"], cwd=REPO, capture_output=True).returncode == 0
    text = doc.read_text()
    assert text.startswith("# x\n\n## Variables\n\nIntro.\n\n<!-- variables:start -->") and text.endswith("\n\n## Next\n")
    assert "| `sglang_port` | `30000` | int; 1-65535 |" in text


def test_rewrite_without_markers_is_an_error():
    with pytest.raises(ValueError):
        docs_vars.rewrite("no markers", "x")


@pytest.mark.parametrize("role", sorted(r for r in SPECS if r != "rollout"))
def test_argument_spec_defaults_agree_with_defaults_main(role):
    spec = SPECS[role]
    path = REPO / spec.defaults_file
    defaults = (yaml.safe_load(path.read_text()) or {}) if path.exists() else {}
    undeclared = sorted(set(defaults) - set(spec.options))
    assert not undeclared, "%s sets %s, which %s does not declare" % (spec.defaults_file, undeclared, spec.source)
    for name, option in spec.options.items():
        assert "default" in option.spec, "%s: %s declares no default" % (spec.source, name)
        assert name in defaults, "%s: %s is not in %s" % (spec.source, name, spec.defaults_file)
        assert option.spec["default"] == defaults[name], (
            "%s: default of %s is %r, %s has %r" % (spec.source, name, option.spec["default"], spec.defaults_file,
                                                    defaults[name]))


def test_rollout_declaration_agrees_with_its_vars_file():
    defaults = yaml.safe_load((REPO / specs.ROLLOUT_DEFAULTS).read_text()) or {}
    options = SPECS["rollout"].options
    assert set(defaults) <= set(options), set(defaults) - set(options)
    for name, value in defaults.items():
        assert options[name].spec.get("default") == value, name


def test_every_option_is_documented():
    for role, spec in SPECS.items():
        for name, option in spec.options.items():
            assert option.spec.get("type"), "%s: %s has no type" % (spec.source, name)
            assert option.spec.get("description"), "%s: %s has no description" % (spec.source, name)
            assert name.startswith(role + "_"), "%s: %s lacks the role's prefix" % (spec.source, name)
            if option.type == "list":
                assert option.spec.get("elements"), "%s: %s has no elements" % (spec.source, name)


def test_every_rule_belongs_to_a_declared_variable():
    assert sorted(set(rules.rules()) - set(specs.declared())) == []


def test_table_shows_rules_choices_and_secrets():
    text = docs_vars.render()
    assert "| `gpu_gate_expected_count` | `8` | int; 1-1024 |" in text
    assert "| `kernel_reboot_strategy` | `when_needed` | str; one of `when_needed`, `never`, `always` |" in text
    assert "`sglang_api_key` | `\"\"` | str; secret (never logged or shown) |" in text
    assert "## rollout" in text
