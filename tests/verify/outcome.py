"""How a knob check ends: a mismatch that names host, knob, expected and found, or
"not applicable" when the host lacks the interface. No tracebacks: the message is the
whole story, in pytest's output and in the JUnit XML that the fleet report reads."""
import pytest

NOT_APPLICABLE = "not applicable on this host: "


def mismatch(host, knob, expected, found):
    pytest.fail(f"{host}: {knob}: expected {expected}, found {found}", pytrace=False)


def not_applicable(host, knob, why):
    pytest.skip(f"{host}: {knob}: {NOT_APPLICABLE}{why}")
