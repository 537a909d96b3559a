"""The engine against closed-form results (the same checks docs/validation.md publishes)."""

import dataclasses

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


# -- congestion control: the checks tell the spec's closed forms from plausible wrong ones --------

def _fails_with(check: validation.Check, expected: float) -> bool:
    return not dataclasses.replace(check, expected=expected).ok


def test_the_injection_delay_check_tells_the_spec_formula_from_wrong_readings():
    """IRD = (T >> shift) x multiplier, counted from the end of the previous packet. Reading the
    shift as a left shift (coarser steps), or the gap as start-to-start (max(T, IRD)), fails."""
    spacing = [c for c in validation.cc_injection_delay() if "spacing" in c.name]
    assert len(spacing) == len(validation.IRD_CCT) - 1 and all(c.ok for c in spacing)
    for check, (shift, multiplier) in zip(spacing, validation.IRD_CCT[1:]):
        start_to_start = max(validation.T_PS, validation.ird_ps(shift, multiplier)) / 1000
        assert _fails_with(check, start_to_start), check.name
        if shift:
            assert _fails_with(check, (validation.T_PS + (validation.T_PS << shift) * multiplier) / 1000), check.name


def test_the_becn_check_catches_the_design_notes_first_miscount():
    """Section 6 first wrote T + 2L + T_c for a single switch (the CNP's switch left out)."""
    single, tree = validation.cc_becn_round_trip()
    assert single.ok and tree.ok
    assert _fails_with(single, (validation.T_PS + 2 * 20_000 + validation.CNP_PS) / 1000)
    assert _fails_with(tree, single.expected)  # the path's length matters


def test_the_marking_checks_count_exactly():
    checks = validation.cc_marking()
    assert all(c.ok for c in checks), [(c.name, c.expected, c.measured) for c in checks]
    exempt = next(c for c in checks if c.name.startswith("marking, packet_size 6 credits: 5-credit"))
    eligible = next(c for c in checks if c.name.startswith("marking, packet_size 5"))
    assert _fails_with(exempt, eligible.expected)  # packet_size read as "at most", not "less than"
    for m in (1, 7):
        rate = next(c for c in checks if c.name.startswith(f"marking, marking_rate {m}:"))
        assert _fails_with(rate, eligible.expected // m)  # every m-th instead of every (m + 1)-th


def test_the_recovery_check_needs_the_1024_ns_unit():
    steps = [c for c in validation.cc_recovery() if "one step down per period" in c.name]
    assert len(steps) == 2 and all(c.ok for c in steps)
    for check in steps:
        timer = int(check.name.split("ccti_timer ")[1].split(":")[0])
        assert _fails_with(check, timer * 1000.0)  # microseconds instead of 1.024 µs units


def test_the_n_to_1_checks_would_fail_with_the_victim_or_the_shares_wrong():
    fair_low, fair_high, busy, victim_off, victim_on = validation.cc_n_to_1()
    assert all(c.ok for c in (fair_low, fair_high, busy, victim_off, victim_on))
    assert _fails_with(fair_low, 0.9 / 7)  # shares of N - 1 senders
    assert _fails_with(fair_high, 1.1 / 9)  # shares of N + 1 senders
    assert not dataclasses.replace(victim_off, measured=victim_on.measured).ok  # CC off is not CC on
    assert not dataclasses.replace(victim_on, measured=victim_off.measured).ok


def test_the_md1_tolerance_is_the_run_s_statistical_error_and_tells_a_wait_ten_percent_off():
    """The M/D/1 tolerance is a few standard errors of the mean wait (the 16 HCA queues are
    independent replicas), not a share of the whole latency: a wait 10% off fails, which 3% of
    the latency (23% of the wait at load 0.3) let through."""
    service = validation.serialization_ns(4096 + validation.HEADER)
    for check, rho in zip(validation.md1_queue(), (0.3, 0.6)):
        wait = rho * service / (2 * (1 - rho))
        assert check.ok and not check.from_measurement
        assert 0 < check.tolerance < 0.1 * wait, (check.name, check.tolerance, wait)
        assert _fails_with(check, check.expected + 0.1 * wait) and _fails_with(check, check.expected - 0.1 * wait)


def test_thresholds_set_from_measurement_say_so_where_they_are_printed():
    marked = [c for group in (validation.cc_n_to_1, validation.collectives_against_bounds,
                              validation.placement_effects, validation.vl_arbitration) for c in group()
              if c.from_measurement]
    names = " | ".join(c.name for c in marked)
    for words in ("victim flow, of its rate alone", "reaches 60%", "no lock-out", "runtime spread over 5 placements"):
        assert words in names, words
    table = validation.markdown(marked[:1] + [validation.Check("x", "y", 1.0, 1.0, 0.1, "")])
    assert "| set from measurement | pass |" in table and "| closed form | pass |" in table
