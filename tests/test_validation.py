"""The engine against closed-form results (the same checks docs/validation.md publishes)."""

import pytest
from qoslab import validation


@pytest.mark.parametrize("group", validation.ALL, ids=lambda g: g.__name__)
def test_closed_form(group):
    failures = [c for c in group() if not c.ok]
    assert not failures, "\n".join(
        f"{c.name}: expected {c.expected:.4f} {c.unit} ({c.relation} ±{c.tolerance}), measured {c.measured:.4f}"
        for c in failures
    )


def test_a_check_can_fail():
    wrong = validation.Check("x", "y", expected=1.0, measured=1.2, tolerance=0.1, unit="")
    assert not wrong.ok
    assert not validation.Check("x", "y", 1.0, float("nan"), 0.1, "").ok
    assert not validation.Check("x", "y", 1.0, 0.8, 0.1, "", "ge").ok
    assert not validation.Check("x", "y", 1.0, 1.2, 0.1, "", "le").ok


def test_port_buffer_division_discriminates():
    """The four VL counts must expect different shares of the link, so an engine that did not
    divide the port buffer (or divided it wrongly) fails at least three of the checks."""
    checks = validation.port_buffer_division()
    expected = [c.expected for c in checks]
    assert expected == sorted(expected, reverse=True) and len({round(e, 3) for e in expected}) == 4
    assert expected[0] == 1.0 and expected[-1] < 0.5  # from a full link to a credit-bound one
    assert all(c.ok for c in checks), [(c.name, c.expected, c.measured) for c in checks]
