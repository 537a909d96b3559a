"""Metrics on hand-made tables, every expected value worked out by hand."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from qoslab.analysis import congestion_impact, iteration_stats, policy_summary, sample_stats, slowdowns, slowest_ranks
from qoslab.analysis.contention import ranking


def jobs_table(rows):
    """rows: (repetition, policy, job, ranks, runtime_us); policy "alone" means an alone run."""
    return pd.DataFrame([
        {"repetition": r, "policy": p, "mode": "alone" if p == "alone" else "shared", "job": j, "ranks": n, "runtime_us": t}
        for r, p, j, n, t in rows
    ])


JOBS = jobs_table([
    (0, "alone", "a", 10, 100.0), (0, "alone", "b", 20, 200.0),
    (0, "default", "a", 10, 150.0), (0, "default", "b", 20, 300.0),
    (0, "prio-a", "a", 10, 110.0), (0, "prio-a", "b", 20, 400.0),
    (1, "alone", "a", 10, 100.0), (1, "alone", "b", 20, 100.0),
    (1, "default", "a", 10, 200.0), (1, "default", "b", 20, 100.0),
    (1, "prio-a", "a", 10, 100.0), (1, "prio-a", "b", 20, float("nan")),  # b did not finish
])


def test_slowdown_and_contention_per_job():
    s = slowdowns(JOBS).set_index(["repetition", "policy", "job"])
    assert s.loc[(0, "default", "a"), "slowdown"] == 1.5
    assert s.loc[(0, "prio-a", "b"), "contention_us"] == 200.0
    assert s.loc[(1, "default", "b"), "slowdown"] == 1.0
    unfinished = s.loc[(1, "prio-a", "b")]
    assert not unfinished["complete"] and math.isnan(unfinished["slowdown"])
    assert len(s) == 8  # nothing dropped


def test_policy_summary_by_hand():
    summary = policy_summary(slowdowns(JOBS)).set_index("policy")
    d = summary.loc["default"]
    # rep 0: 50 + 100 = 150; rep 1: 100 + 0 = 100 -> mean 125
    assert d["total_contention_us"] == 125.0 and d["total_contention_min_us"] == 100.0 and d["total_contention_max_us"] == 150.0
    # Pw: rep 0: 10*50 + 20*100 = 2500 core-us; rep 1: 10*100 = 1000 -> mean 1750 core-us
    assert d["pw_core_seconds"] == pytest.approx(1750e-6)
    # per-job mean slowdown: a (1.5+2)/2 = 1.75, b (1.5+1)/2 = 1.25
    assert d["mean_slowdown"] == pytest.approx(1.5)
    assert d["geomean_slowdown"] == pytest.approx(math.sqrt(1.75 * 1.25))
    assert d["worst_slowdown"] == 1.75 and d["worst_job"] == "a"
    # throughput: rep 0: 3600e6 (1/150 + 1/300); rep 1: 3600e6 (1/200 + 1/100)
    t0, t1 = 3600e6 * (1 / 150 + 1 / 300), 3600e6 * (1 / 200 + 1 / 100)
    assert d["throughput_jobs_per_hour"] == pytest.approx((t0 + t1) / 2)
    alone0, alone1 = 3600e6 * (1 / 100 + 1 / 200), 3600e6 * (2 / 100)
    assert d["throughput_vs_alone"] == pytest.approx((t0 / alone0 + t1 / alone1) / 2)
    p = summary.loc["prio-a"]
    assert p["complete_repetitions"] == 1 and p["total_contention_us"] == 210.0  # rep 1 incomplete: left out
    assert p["vs_default_pct"] == pytest.approx(100 * (210 / 125 - 1))
    assert d["vs_default_pct"] == 0.0


def test_ranking_orders_lower_contention_first_and_higher_throughput_first():
    summary = policy_summary(slowdowns(JOBS))
    assert list(ranking(summary)["policy"]) == ["default", "prio-a"]
    assert list(ranking(summary, "throughput_jobs_per_hour")["policy"])[0] == "default"


def test_sample_stats_by_hand():
    s = sample_stats([1, 2, 3, 4, 100])
    assert s["mean"] == 22.0 and s["p50"] == 3.0 and s["max"] == 100.0
    assert s["p99"] == pytest.approx(4 + 0.96 * 96)  # linear interpolation between 4 and 100
    assert s["std"] == pytest.approx(np.std([1, 2, 3, 4, 100]))
    assert s["p99_over_p50"] == pytest.approx(s["p99"] / 3.0)
    assert math.isnan(sample_stats([])["mean"])


def iterations_table(samples):
    """samples: {(mode, policy, job): [(rank, time_ns, wait_ns), ...]}"""
    rows = []
    for (mode, policy, job), values in samples.items():
        for i, (rank, t, w) in enumerate(values):
            rows.append({"repetition": 0, "mode": mode, "policy": policy, "job": job, "rank": rank,
                         "iteration": i, "time_ns": float(t), "mpi_wait_ns": float(w)})
    return pd.DataFrame(rows)


def test_iteration_stats_and_slowest_ranks():
    it = iterations_table({
        ("shared", "default", "x"): [(0, 10, 1), (1, 40, 2), (2, 20, 3), (3, 30, 4), (0, 10, 1), (1, 60, 2)],
    })
    stats = iteration_stats(it).iloc[0]
    assert stats["count"] == 6 and stats["p50"] == 25.0
    slow = slowest_ranks(it, fraction=0.5).iloc[0]
    # per-rank means: 0:10, 1:50, 2:20, 3:30 -> slowest two: 1, 3; median 25; max/median 2
    assert slow["slowest"] == [1, 3] and slow["max_over_median"] == 2.0


def test_congestion_impact_latency_and_bandwidth():
    it = iterations_table({
        ("alone", "alone", "lat"): [(0, 10, 0), (0, 10, 0), (0, 10, 0), (0, 10, 0)],
        ("shared", "default", "lat"): [(0, 10, 0), (0, 20, 0), (0, 30, 0), (0, 40, 0)],
    })
    cif = congestion_impact(it, "lat").iloc[0]
    assert cif["cif_average"] == 2.5  # mean 25 / 10
    # GPCNeT's 99th percentile of 4 samples is the floor(0.99 x 4) = 3rd from the best: 30.
    assert cif["cif_p99"] == 3.0
    bw = congestion_impact(it, "lat", kind="bandwidth").iloc[0]
    # isolated bandwidth 1/10; congested mean of 1/t = (1/10+1/20+1/30+1/40)/4
    assert bw["cif_average"] == pytest.approx(0.1 / ((0.1 + 0.05 + 1 / 30 + 0.025) / 4))
    # the 3rd highest congested bandwidth is 1/30
    assert bw["cif_p99"] == pytest.approx(0.1 / (1 / 30))
    # GPCNeT averages a ring's bytes over the ring's time: rings (10, 20) and (30, 40)
    rings = congestion_impact(it, "lat", kind="bandwidth", ring_iterations=2).iloc[0]
    assert rings["cif_average"] == pytest.approx((2 / 20) / ((2 / 30 + 2 / 70) / 2))
