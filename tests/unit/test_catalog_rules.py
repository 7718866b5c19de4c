"""A knob's validation rules live in its catalog entry, as data naming validation's rule makers."""
import pytest

from infertune import rules, specs, validation


def problems(rule, value):
    found = []
    rule.check(value, lambda text, sub="", value=None: found.append(text + sub))
    return found


def test_rule_forms():
    assert rules.make_rule("non_empty").doc == "non-empty"
    assert rules.make_rule({"number_range": [0, 10, " s"]}).doc == "0-10 s"
    hex4 = rules.make_rule({"each": {"pattern": ["0x[0-9a-f]{4}", "hex"]}})
    assert hex4.doc == "each hex" and problems(hex4, ["0x10de", "10de"]) == ["must be hex[1]"]
    assert problems(rules.make_rule({"each": "cmdline_remove_key"}), ["root"]) == [
        "must not remove root (the host would not boot)[0]"]


@pytest.mark.parametrize("spec, message", [
    ("no_such", "x: no rule maker 'no_such'"),
    ({"a": [], "b": []}, r"x: a rule is a maker's name or \{maker: \[arguments\]\}, got a mapping"),
    ({"number_range": 5}, "x: the arguments of number_range must be a list"),
    ({"file_suffix": []}, r"x: file_suffix\(\): "),
    ({"pattern": ["(", "doc"]}, r"x: pattern\('\(', 'doc'\): "),
])
def test_bad_rules_name_where_they_are(spec, message):
    with pytest.raises(ValueError, match=message):
        rules.make_rule(spec, "x")


def test_catalog_rules_are_applied():
    lines = validation.report({"pcie_mrrs_classes": ["0x0302", "VGA"], "sysctl_file": "/etc/x.txt",
                               "kernel_cmdline_remove": ["ro"]})
    assert sorted(lines) == ["kernel_cmdline_remove[0]: must not remove ro (the host would not boot), got 'ro'",
                             "pcie_mrrs_classes[1]: must be hex, 0x and 4 digits, got 'VGA'",
                             "sysctl_file: must be a *.conf file (other names are ignored), got '/etc/x.txt'"]


def test_a_variable_has_its_rules_in_one_place(tmp_path):
    catalog = tmp_path / specs.CATALOG
    catalog.parent.mkdir(parents=True)
    catalog.write_text("infertune_knobs:\n  - name: k\n    rules: {sglang_port: [non_empty]}\n")
    with pytest.raises(ValueError, match="k rules of sglang_port: sglang_port has rules elsewhere already"):
        rules.rules(str(tmp_path))


def test_a_catalog_rule_that_cannot_be_built_stops_the_validation(tmp_path):
    catalog = tmp_path / specs.CATALOG
    catalog.parent.mkdir(parents=True)
    catalog.write_text("infertune_knobs:\n  - name: k\n    rules: {rollout_allow_single_batch: [{no_such: []}]}\n")
    assert [str(p) for p in validation.validate({"rollout_batches": ["0%"]}, root=str(tmp_path))] == [
        "infertune_knobs: %s: k rules of rollout_allow_single_batch: no rule maker 'no_such' (known: batch, cmdline_param,"
        " cmdline_remove_key, count_or_percent, each, environment, file_mode, file_suffix, fraction_or_zero,"
        " hook_command, host_address, http_url, model_path, module_options, no_secret_flags, non_empty,"
        " number_range, pattern, sysctl_settings, sysfs_settings, unit_text)" % specs.CATALOG]
