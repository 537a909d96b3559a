"""Latency-tail analysis (qoslab.analysis.tail) and its figures (qoslab.plots.tail), checked
against closed forms and hand-worked examples. Random samples use fixed seeds; where a test
takes a tolerance, the comment says why it is wide enough and narrow enough to fail."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from qoslab.analysis.tail import (
    BC_THRESHOLD,
    CHOSEN_RULE,
    bimodality,
    bimodality_coefficient,
    compare_groups,
    correlation,
    ecdf,
    histogram,
    tail_prediction,
    tail_summary,
)
from qoslab.plots.tail import plot_cdfs, plot_histograms
from scipy.stats import norm

Z99 = norm.ppf(0.99)  # 2.3263...


def normal_quantiles(m: int) -> np.ndarray:
    """A deterministic 'sample' of N(0, 1): its m quantiles at (i + 0.5) / m. Its moments are the
    normal's up to the clipped extremes, so closed forms hold to a few 1e-3."""
    return norm.ppf((np.arange(m) + 0.5) / m)


def t3_two_sided_p(t: float) -> float:
    """Two-sided p of Student's t with 3 degrees of freedom, closed form:
    F(t) = 1/2 + (1/pi) (u / (1 + u^2) + atan u), u = t / sqrt(3)."""
    u = abs(t) / math.sqrt(3.0)
    return 2.0 * (0.5 - (u / (1.0 + u * u) + math.atan(u)) / math.pi)


# --- tail_summary, histogram, ecdf ------------------------------------------------------------


def test_percentiles_of_1_to_1000_exactly():
    # numpy's linear interpolation: the q-th percentile of 1..1000 sits at 1 + q/100 x 999.
    s = tail_summary(np.arange(1, 1001))
    assert s["count"] == 1000 and s["mean"] == 500.5 and s["max"] == 1000.0
    assert s["p50"] == 500.5
    assert s["p90"] == pytest.approx(900.1, abs=1e-9)
    assert s["p99"] == pytest.approx(990.01, abs=1e-9)
    assert s["p999"] == pytest.approx(999.001, abs=1e-9)
    assert s["p99_over_p50"] == pytest.approx(990.01 / 500.5, rel=1e-12)
    assert s["p999_over_p50"] == pytest.approx(999.001 / 500.5, rel=1e-12)
    assert s["skewness"] == pytest.approx(0.0, abs=1e-12)  # symmetric


def test_skewness_is_the_adjusted_sample_skewness():
    # [0, 0, 0, 1]: mean 1/4, m2 = 3/16, m3 = 3/32, g1 = m3 / m2^1.5 = 2/sqrt(3);
    # G1 = g1 sqrt(n (n-1)) / (n-2) = (2/sqrt(3)) sqrt(12) / 2 = 2.
    assert tail_summary([0, 0, 0, 1])["skewness"] == pytest.approx(2.0, rel=1e-12)
    assert math.isnan(tail_summary([5.0, 5.0, 5.0])["skewness"])  # constant: undefined
    assert math.isnan(tail_summary([1.0, 2.0])["skewness"])  # fewer than 3
    assert tail_summary([1.0, np.nan, 3.0, 2.0])["count"] == 3  # NaN ignored


def test_lognormal_p99_over_p50_matches_the_closed_form():
    # For log-normal(mu, sigma): p50 = e^mu, p99 = e^(mu + z99 sigma), so p99/p50 = e^(z99 sigma).
    # Tolerance: with n = 100000 the sample quantiles of the underlying normal have standard
    # deviations sqrt(p(1-p)/n)/phi(z_p) = 0.0118 (p99) and 0.0040 (p50); the log of the ratio
    # thus errs by at most about sigma x 0.0125 = 0.0063 sd (sigma = 0.5; the two are positively
    # correlated, which only lowers it). 3% relative is over 4 sd; a p90 or p999 in place of p99
    # would be off by 40% or more.
    sigma = 0.5
    sample = np.random.default_rng(20240601).lognormal(mean=math.log(1000.0), sigma=sigma, size=100_000)
    s = tail_summary(sample)
    assert s["p99_over_p50"] == pytest.approx(math.exp(Z99 * sigma), rel=0.03)
    assert s["p50"] == pytest.approx(1000.0, rel=0.01)  # sd of log p50: 0.5 x 0.004 = 0.2%
    assert s["skewness"] > 1.0  # population skewness (e^s2 + 2) sqrt(e^s2 - 1) = 1.75


def test_histogram_and_ecdf_by_hand():
    h = histogram([1, 2, 2, 3, 3, 3], bins=3)  # edges 1, 5/3, 7/3, 3
    assert h["count"].tolist() == [1, 2, 3]
    assert h["left"].tolist() == pytest.approx([1.0, 5 / 3, 7 / 3])
    assert h["right"].iloc[-1] == 3.0
    assert h["fraction"].tolist() == pytest.approx([1 / 6, 2 / 6, 3 / 6])
    assert h["density"].tolist() == pytest.approx([(1 / 6) / (2 / 3), (2 / 6) / (2 / 3), (3 / 6) / (2 / 3)])
    assert histogram([np.nan, np.inf]).empty
    values, fraction = ecdf([3, 1, np.nan, 2, 2])
    assert values.tolist() == [1, 2, 2, 3]
    assert fraction.tolist() == [0.25, 0.5, 0.75, 1.0]


# --- bimodality -----------------------------------------------------------------------------


def test_bimodality_coefficient_closed_forms():
    # Two-point sample, m zeros and m ones (n = 2m): G1 = 0 and g2 = -2, so
    # G2 = ((n+1) g2 + 6)(n-1)/((n-2)(n-3)) = -2 (n-1)/(n-3) and
    # BC = 1 / (G2 + 3 (n-1)^2/((n-2)(n-3))) = (n-2)(n-3) / ((n-1)(n+1)).
    # n = 10: 56/99 (without the small-sample correction it would be 1).
    assert bimodality_coefficient([0] * 5 + [1] * 5) == pytest.approx(56 / 99, rel=1e-12)
    assert bimodality_coefficient([0] * 500 + [1] * 500) == pytest.approx(998 * 997 / (999 * 1001), rel=1e-12)
    # [-3, -2, -1, 1, 2, 3]: m2 = 14/3, m4 = 98/3, g2 = m4/m2^2 - 3 = -3/2,
    # G2 = (7 (-3/2) + 6) 5 / (4 x 3) = -15/8, BC = 1 / (-15/8 + 3 x 25/12) = 8/35.
    assert bimodality_coefficient([-3, -2, -1, 1, 2, 3]) == pytest.approx(8 / 35, rel=1e-12)
    # Population values: a normal has BC = 1/3. Two equal normals at +-d with sigma = 1 have
    # excess kurtosis -2 d^4 / (d^2 + 1)^2: d = 3 gives BC = 1 / (3 - 1.62) = 0.72464.
    # The quantile 'samples' (n = 5000 and 10000) miss only the extreme tails: 0.005 is ample
    # and far below the gap between the two.
    z = normal_quantiles(5000)
    assert bimodality_coefficient(z) == pytest.approx(1 / 3, abs=0.005)
    assert bimodality_coefficient(np.concatenate([z - 3, z + 3])) == pytest.approx(1 / 1.38, abs=0.005)
    assert math.isnan(bimodality_coefficient([1.0, 2.0, 3.0]))  # fewer than 4
    assert math.isnan(bimodality_coefficient([2.0] * 10))  # constant


def test_two_separated_normals_are_bimodal_with_modes_in_place():
    rng = np.random.default_rng(7)
    sample = np.concatenate([rng.normal(0.0, 1.0, 600), rng.normal(8.0, 1.0, 400)])
    r = bimodality(sample)
    assert r.bimodal and r.modes == 2 and r.coefficient > BC_THRESHOLD
    # KDE peaks of 400-600 points per unit-sigma component sit within a few tenths of sigma of
    # the true means (the smoothing itself moves nothing here: the components are 8 sigma apart).
    assert r.mode_locations[0] == pytest.approx(0.0, abs=0.4)
    assert r.mode_locations[1] == pytest.approx(8.0, abs=0.4)
    # The valley at ~4 has next to no mass, so each basin holds its component's share.
    assert r.mode_masses == pytest.approx((0.6, 0.4), abs=0.01)
    assert bimodality(sample) == r  # deterministic


@pytest.mark.parametrize("name", ["normal", "lognormal 0.5", "lognormal 1.0"])
def test_unimodal_samples_are_not_bimodal(name):
    rng = np.random.default_rng(11)
    sample = {
        "normal": rng.normal(10.0, 2.0, 1000),
        "lognormal 0.5": rng.lognormal(0.0, 0.5, 1000),
        "lognormal 1.0": rng.lognormal(0.0, 1.0, 1000),  # long tail; its BC can pass 5/9
    }[name]
    r = bimodality(sample)
    assert r.modes == 1 and not r.bimodal
    assert len(r.mode_locations) == 1 and r.mode_masses[0] == pytest.approx(1.0)


def test_the_lognormal_mode_is_where_the_density_peaks():
    # Log-normal(0, 0.25): mode e^(mu - sigma^2) = e^-0.0625 = 0.939; the KDE (h ~ 0.06)
    # flattens the peak a little and the sample's own peak wanders by a few hundredths.
    r = bimodality(np.random.default_rng(3).lognormal(0.0, 0.25, 5000))
    assert r.mode_locations[0] == pytest.approx(math.exp(-0.0625), abs=0.05)


def test_bimodal_needs_both_criteria_and_the_options_act():
    z = normal_quantiles(2000)
    # Equal normals 3.5 sigma apart: BC = 1 / (3 - 2 d^4 / (d^2 + 1)^2) = 0.537 < 5/9 (d = 1.75).
    close = np.concatenate([z - 1.75, z + 1.75])
    loose = bimodality(close, dip_ratio=0.7)  # the KDE valley is ~0.55 of the peaks
    assert loose.modes == 2 and loose.coefficient < BC_THRESHOLD and not loose.bimodal
    assert loose.mode_locations == pytest.approx((-1.75, 1.75), abs=0.1)
    assert bimodality(close).modes == 1  # default dip_ratio 0.5: one mode
    # A 3% bump 10 sigma away: BC is high (0.73) but the bump holds under min_mass = 5%.
    bump = np.concatenate([normal_quantiles(970), 10.0 + 0.5 * normal_quantiles(30)])
    strict = bimodality(bump)
    assert strict.coefficient > BC_THRESHOLD and strict.modes == 1 and not strict.bimodal
    lenient = bimodality(bump, min_mass=0.01)
    assert lenient.modes == 2 and lenient.bimodal
    assert lenient.mode_masses == pytest.approx((0.97, 0.03), abs=0.002)
    assert lenient.mode_locations[1] == pytest.approx(10.0, abs=0.1)


def test_bimodality_edge_cases():
    flat = bimodality([7.0] * 20)
    assert flat.modes == 1 and flat.mode_locations == (7.0,) and not flat.bimodal and math.isnan(flat.coefficient)
    two_values = bimodality([10.0] * 500 + [20.0] * 500)  # e.g. minimal vs diverted, nothing else
    assert two_values.bimodal and two_values.mode_locations == pytest.approx((10.0, 20.0), abs=0.05)
    with pytest.raises(ValueError, match="at least 4"):
        bimodality([1.0, 2.0, np.nan, 3.0])
    with pytest.raises(ValueError, match="bandwidth"):
        bimodality(normal_quantiles(100), bandwidth=-1.0)
    # Thinning large samples to evenly spaced order statistics keeps the answer.
    rng = np.random.default_rng(5)
    big = np.concatenate([rng.normal(0.0, 1.0, 30_000), rng.normal(8.0, 1.0, 20_000)])
    r = bimodality(big)
    assert r.n == 50_000 and r.bimodal and r.mode_locations == pytest.approx((0.0, 8.0), abs=0.3)


# --- correlation ----------------------------------------------------------------------------


def test_correlation_by_hand():
    # x = 1..5, y = 2, 4, 5, 4, 5: dx = -2..2, dy = -2, 0, 1, 0, 1; sum dx dy = 6, sum dx^2 = 10,
    # sum dy^2 = 6, r = 6 / sqrt(60) = sqrt(0.6). Ranks of y: 1, 2.5, 4.5, 2.5, 4.5, so
    # rho = 7 / sqrt(10 x 9). p-values: t = r sqrt(n-2) / sqrt(1 - r^2) with 3 degrees of freedom.
    c = correlation([1, 2, 3, 4, 5], [2, 4, 5, 4, 5])
    assert c.n == 5
    assert c.pearson_r == pytest.approx(math.sqrt(0.6), rel=1e-12)
    assert c.spearman_rho == pytest.approx(7 / math.sqrt(90), rel=1e-12)
    t_r = math.sqrt(0.6) * math.sqrt(3) / math.sqrt(0.4)  # = sqrt(4.5)
    assert c.pearson_p == pytest.approx(t3_two_sided_p(t_r), rel=1e-9)
    assert c.pearson_p == pytest.approx(0.12403, abs=1e-5)
    rho = 7 / math.sqrt(90)
    assert c.spearman_p == pytest.approx(t3_two_sided_p(rho * math.sqrt(3 / (1 - rho**2))), rel=1e-9)


def test_monotone_nonlinear_relation():
    b = np.arange(1.0, 21.0)
    c = correlation(b, np.exp(b))
    assert c.spearman_rho == pytest.approx(1.0, abs=1e-12)
    assert 0.0 < c.pearson_r < 0.9  # exp is far from a line over 1..20
    assert correlation(b, -(b**3)).spearman_rho == pytest.approx(-1.0, abs=1e-12)


def test_correlation_refuses_what_it_cannot_compute():
    with pytest.raises(ValueError, match="at least 3"):
        correlation([1, 2], [3, 4])
    with pytest.raises(ValueError, match="at least 3"):
        correlation([1, 2, np.nan, 4], [1, 2, 3, np.inf])  # only 2 finite pairs
    with pytest.raises(ValueError, match="b is constant"):
        correlation([2, 2, 2, 2], [1, 2, 3, 4])
    with pytest.raises(ValueError, match="latency is constant"):
        correlation([1, 2, 3, 4], [5, 5, 5, 5])
    with pytest.raises(ValueError, match="length"):
        correlation([1, 2, 3], [1, 2, 3, 4])
    assert correlation([1, 2, np.nan, 3, 4], [1, 3, 7, 2, 5]).n == 4  # the NaN pair is left out


# --- tail_prediction ------------------------------------------------------------------------

B10 = np.arange(1.0, 11.0)
# Sorted latencies 10..16, 50, 60, 70: the 0.7 quantile is 16 + 0.3 (50 - 16) = 26.2, so the
# tail is the runs with latency 50 (b = 7), 60 (b = 9) and 70 (b = 10).
LAT10 = np.array([10.0, 11.0, 12.0, 13.0, 14.0, 15.0, 50.0, 16.0, 60.0, 70.0])


def test_tail_prediction_with_a_given_threshold():
    r = tail_prediction(B10, LAT10, tail_quantile=0.7, threshold=6.0)
    assert r.latency_cutoff == pytest.approx(26.2)
    assert (r.n, r.tail, r.flagged, r.true_positives) == (10, 3, 5, 3)  # b >= 6: b = 6..10
    assert r.precision == pytest.approx(3 / 5) and r.recall == 1.0 and r.f1 == pytest.approx(0.75)
    assert r.threshold_rule == "given"
    r9 = tail_prediction(B10, LAT10, tail_quantile=0.7, threshold=9.0)  # b = 9, 10: both in the tail
    assert (r9.flagged, r9.true_positives, r9.precision) == (2, 2, 1.0)
    assert r9.recall == pytest.approx(2 / 3) and r9.f1 == pytest.approx(0.8)
    none = tail_prediction(B10, LAT10, tail_quantile=0.7, threshold=11.0)
    assert none.flagged == 0 and math.isnan(none.precision) and none.recall == 0.0 and none.f1 == 0.0


def test_tail_prediction_chooses_the_threshold_by_f1():
    # F1 = 2 tp / (flagged + tail), tail = 3: threshold 6 -> 6/8, 7 -> 6/7 (b = 7..10, tp 3),
    # 8 -> 4/6, 9 -> 4/5, 10 -> 2/4; lower thresholds flag more and catch no more. Best: 7.
    r = tail_prediction(B10, LAT10, tail_quantile=0.7)
    assert r.threshold == 7.0 and r.threshold_rule == CHOSEN_RULE
    assert (r.flagged, r.true_positives) == (4, 3)
    assert r.precision == 0.75 and r.recall == 1.0 and r.f1 == pytest.approx(6 / 7)


def test_tail_prediction_ties_go_to_the_highest_threshold():
    # Latencies sorted 1, 2, 3, 4, 10, 11: the 0.6 quantile is 4, the tail is b = 3 and b = 6.
    # Threshold 3 flags 3..6 (tp 2): F1 = 4/6; threshold 6 flags 6 (tp 1): F1 = 2/3, a tie; the
    # others: 1 -> 4/8, 2 -> 4/7, 4 -> 2/5, 5 -> 2/4.
    b = [1, 2, 3, 4, 5, 6]
    latency = [1, 2, 10, 3, 4, 11]
    r = tail_prediction(b, latency, tail_quantile=0.6)
    assert r.tail == 2 and r.threshold == 6.0 and r.f1 == pytest.approx(2 / 3)
    assert tail_prediction(b, latency, tail_quantile=0.6, threshold=3).f1 == pytest.approx(r.f1)


def test_tail_prediction_errors():
    with pytest.raises(ValueError, match="no run lies above"):
        tail_prediction([1, 2, 3], [5, 5, 5])
    with pytest.raises(ValueError, match="tail_quantile"):
        tail_prediction([1, 2, 3], [1, 2, 3], tail_quantile=1.0)
    with pytest.raises(ValueError, match="length"):
        tail_prediction([1, 2, 3], [1, 2])


# --- groups and figures -----------------------------------------------------------------------


def group_frame() -> pd.DataFrame:
    z = normal_quantiles(500)
    parts = [
        ("same-group", "minimal", 1000.0 + 10.0 * np.arange(1, 101)),  # 1010..2000
        ("spread", "adaptive", np.concatenate([5000.0 + 100.0 * z, 9000.0 + 100.0 * z])),
        ("spread", "minimal", np.array([1.0, 2.0, 3.0])),  # too few for bimodality
    ]
    return pd.concat([pd.DataFrame({"locality": loc, "routing": rt, "latency_ns": v}) for loc, rt, v in parts], ignore_index=True)


def test_compare_groups():
    out = compare_groups(group_frame())
    assert list(zip(out["locality"], out["routing"])) == [("same-group", "minimal"), ("spread", "adaptive"), ("spread", "minimal")]
    first = out.iloc[0]
    assert first["count"] == 100 and first["p50"] == pytest.approx(1505.0)  # 1010 + 0.5 x 99 x 10
    assert first["p99"] == pytest.approx(1990.1)  # 1010 + 0.99 x 99 x 10
    assert first["modes"] == 1 and not first["bimodal"]
    second = out.iloc[1]
    assert second["modes"] == 2 and second["bimodal"] and second["p50"] == pytest.approx(7000.0, abs=1.0)
    third = out.iloc[2]
    assert third["count"] == 3 and math.isnan(third["modes"]) and pd.isna(third["bimodal"])
    for column in ("p999_over_p50", "skewness", "bimodality_coefficient", "cv"):
        assert column in out.columns
    assert compare_groups(group_frame(), by="routing")["routing"].tolist() == ["minimal", "adaptive"]
    with pytest.raises(ValueError, match="not in the frame"):
        compare_groups(group_frame(), value="time_ns")


@pytest.mark.parametrize("suffix", [".png", ".svg"])
def test_figures_are_written(tmp_path, suffix):
    frame = group_frame()
    hist = plot_histograms(frame, ("locality", "routing"), "latency_ns", tmp_path / f"sub/hist{suffix}", log_y=True)
    cdfs = plot_cdfs(frame, ("locality", "routing"), "latency_ns", tmp_path / f"cdfs{suffix}")
    for path in (hist, cdfs):
        data = path.read_bytes()
        assert path.suffix == suffix and len(data) > 1000
        assert data.startswith(b"\x89PNG") if suffix == ".png" else b"<svg" in data[:2000]
    again = plot_cdfs(frame, ("locality", "routing"), "latency_ns", tmp_path / f"again{suffix}")
    assert again.read_bytes() == cdfs.read_bytes()  # deterministic files


def test_figure_path_must_be_png_or_svg(tmp_path):
    with pytest.raises(ValueError, match=r"\.png or \.svg"):
        plot_cdfs(group_frame(), "routing", "latency_ns", tmp_path / "cdfs.pdf")


def test_localities_are_compared_over_the_snapshots_both_ran():
    # Same-group could not be placed on snapshot 2 (the busiest): pooled, spread's figures include a
    # background same-group never met.
    from qoslab.analysis.tail import common_snapshots, compare_groups

    rows = [{"snapshot": snap, "locality": loc, "routing": "minimal", "iteration": i, "latency_ns": lat}
            for snap, loc, lat in [(-1, "same-group", 1.0), (-1, "spread-groups", 1.0), (0, "same-group", 2.0),
                                   (0, "spread-groups", 3.0), (1, "same-group", 2.0), (1, "spread-groups", 3.0),
                                   (2, "spread-groups", 30.0)]
            for i in range(4)]
    frame = pd.DataFrame(rows)
    pooled = compare_groups(frame[frame["snapshot"] >= 0], by=["locality", "routing"]).set_index("locality")
    assert pooled.loc["same-group", "snapshots"] == 2 and pooled.loc["spread-groups", "snapshots"] == 3
    common = common_snapshots(frame)
    assert sorted(common["snapshot"].unique()) == [-1, 0, 1]
    paired = compare_groups(common[common["snapshot"] >= 0], by=["locality", "routing"]).set_index("locality")
    assert paired.loc["spread-groups", "max"] == 3.0 and pooled.loc["spread-groups", "max"] == 30.0
