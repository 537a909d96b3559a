"""Metrics on hand-made tables, every expected value worked out by hand."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from qoslab.analysis import (
    best_policy_leads,
    congestion_impact,
    cross_job_changes,
    harm_shift,
    interference_matrix,
    iteration_stats,
    mean_interval,
    policy_summary,
    sample_stats,
    slowdown_intervals,
    slowdowns,
    slowest_ranks,
    vl_utilisation,
    with_slowdown_intervals,
)
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
    # Slowdowns over the same repetitions as total contention (rep 0 only): a 1.1, b 2.0.
    assert p["mean_slowdown"] == pytest.approx(1.55) and p["worst_slowdown"] == 2.0 and p["worst_job"] == "b"
    assert p["geomean_slowdown"] == pytest.approx(math.sqrt(1.1 * 2.0))
    # Against default over the repetitions both completed (rep 0: 210 against 150), not against
    # default's mean over repetitions prio-a did not complete (125: +68%).
    assert p["vs_default_pct"] == pytest.approx(100 * (210 / 150 - 1))
    assert d["vs_default_pct"] == 0.0 and p["repetitions"] == 2 and d["repetitions"] == 2


def test_a_policy_that_did_not_complete_every_repetition_ranks_after_those_that_did():
    # "fast" finishes only the easy repetition (rep 1) and would rank first on it alone.
    jobs = jobs_table([
        (0, "alone", "a", 10, 100.0), (0, "default", "a", 10, 200.0), (0, "fast", "a", 10, float("nan")),
        (1, "alone", "a", 10, 100.0), (1, "default", "a", 10, 150.0), (1, "fast", "a", 10, 101.0)])
    slow = slowdowns(jobs)
    summary = policy_summary(slow)
    assert list(ranking(summary)["policy"]) == ["default", "fast"]
    fast = summary.set_index("policy").loc["fast"]
    assert (fast["complete_repetitions"], fast["repetitions"]) == (1, 2) and fast["total_contention_us"] == 1.0
    assert fast["vs_default_pct"] == pytest.approx(100 * (1 / 50 - 1))  # rep 1 only, both sides


def test_a_policy_that_starves_a_job_has_no_mean_or_worst_slowdown():
    # Under "starve", b never completes: mean and worst slowdown over a alone (1.1, which looks
    # better than default's worst 2.0) would rank it by the job it let finish.
    jobs = jobs_table([(r, *row) for r in (0, 1) for row in [
        ("alone", "a", 10, 100.0), ("alone", "b", 10, 100.0),
        ("default", "a", 10, 150.0), ("default", "b", 10, 200.0),
        ("starve", "a", 10, 110.0), ("starve", "b", 10, float("nan"))]])
    starve = policy_summary(slowdowns(jobs)).set_index("policy").loc["starve"]
    for key in ("mean_slowdown", "geomean_slowdown", "worst_slowdown", "total_contention_us"):
        assert math.isnan(starve[key]), key
    assert pd.isna(starve["worst_job"]) and starve["complete_repetitions"] == 0


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
    """samples: {(mode, policy, job): [(rank, time_ns, wait_ns), ...]}, or rows of
    (rank, iteration, time_ns, wait_ns, sends, send_latency_ns)."""
    rows = []
    for (mode, policy, job), values in samples.items():
        for i, value in enumerate(values):
            if len(value) == 3:
                rank, t, w = value
                extra = {"iteration": i}
            else:
                rank, iteration, t, w, sends, latency = value
                extra = {"iteration": iteration, "sends": sends, "send_latency_ns": float(latency)}
            rows.append({"repetition": 0, "mode": mode, "policy": policy, "job": job, "rank": rank,
                         "time_ns": float(t), "mpi_wait_ns": float(w), **extra})
    return pd.DataFrame(rows)


def test_iteration_stats_and_slowest_ranks():
    # Four ranks that synchronise: each rank's two iterations add up to 60 ns, so every rank's
    # mean iteration time is 30 (the old per-rank-mean spread was 1 by construction).
    it = iterations_table({
        ("shared", "default", "x"): [
            (0, 0, 10, 1, 1, 100), (1, 0, 40, 2, 2, 800), (2, 0, 20, 3, 1, 200), (3, 0, 30, 4, 1, 300),
            (0, 1, 50, 1, 1, 100), (1, 1, 20, 2, 2, 800), (2, 1, 40, 3, 1, 200), (3, 1, 30, 4, 0, 0),
        ],
    })
    stats = iteration_stats(it).iloc[0]
    assert stats["count"] == 8 and stats["p50"] == 30.0
    slow = slowest_ranks(it, fraction=0.5).iloc[0]
    # per iteration (min, median, max): (10, 25, 40) and (20, 35, 50) -> means 15, 30, 45
    assert (slow["min_ns"], slow["median_ns"], slow["max_ns"]) == (15.0, 30.0, 45.0)
    assert slow["max_over_median"] == 1.5
    # mean latency per message: rank 0: 200 / 2 = 100, 1: 1600 / 4 = 400, 2: 200, 3: 300 / 1
    assert slow["slowest"] == [1, 3]
    assert slow["send_latency_max_over_median"] == pytest.approx(400 / 250)


def test_slowest_ranks_keeps_repetitions_apart():
    one = iterations_table({("shared", "p", "x"): [(0, 0, 10, 0, 1, 10), (1, 0, 20, 0, 1, 90)]})
    two = one.assign(repetition=1, send_latency_ns=one["send_latency_ns"][::-1].to_numpy())
    slow = slowest_ranks(pd.concat([one, two]), fraction=0.5)
    # Each repetition places the ranks elsewhere: the slow rank is 1, then 0, not a blend.
    assert list(slow["repetition"]) == [0, 1] and list(slow["slowest"]) == [[1], [0]]


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


# -- confidence intervals over repetitions ---------------------------------------------------

T_975_1, T_975_2 = 12.706, 4.303  # Student t quantiles from any textbook table (1 and 2 degrees of freedom)


def test_mean_interval_is_student_t_and_absent_with_one_value():
    interval = mean_interval([1.0, 2.0, 3.0])  # mean 2, sample sd 1
    assert interval.mean == 2.0 and interval.n == 3
    assert interval.half_width == pytest.approx(T_975_2 / math.sqrt(3), rel=1e-3)
    single = mean_interval([5.0, float("nan")])  # NaN is not a repetition
    assert single.mean == 5.0 and single.n == 1 and math.isnan(single.low) and math.isnan(single.high)


def test_policy_summary_and_slowdowns_carry_their_intervals():
    summary = policy_summary(slowdowns(JOBS)).set_index("policy")
    d = summary.loc["default"]
    half = T_975_1 * np.std([150.0, 100.0], ddof=1) / math.sqrt(2)  # totals 150 and 100
    assert d["total_contention_ci95_low_us"] == pytest.approx(125.0 - half, rel=1e-3)
    assert d["total_contention_ci95_high_us"] == pytest.approx(125.0 + half, rel=1e-3)
    assert math.isnan(summary.loc["prio-a", "total_contention_ci95_low_us"])  # one complete repetition
    slow = slowdowns(JOBS)
    intervals = slowdown_intervals(slow).set_index(["policy", "job"])
    a = intervals.loc[("default", "a")]  # slowdowns 1.5 and 2.0
    assert a["slowdown_mean"] == 1.75 and a["slowdown_repetitions"] == 2
    assert a["slowdown_ci95_high"] == pytest.approx(1.75 + T_975_1 * np.std([1.5, 2.0], ddof=1) / math.sqrt(2), rel=1e-3)
    b = intervals.loc[("prio-a", "b")]  # b did not finish in repetition 1
    assert b["slowdown_repetitions"] == 1 and math.isnan(b["slowdown_ci95_low"])
    table = with_slowdown_intervals(slow)
    assert list(table.columns[:len(slow.columns)]) == list(slow.columns) and len(table) == len(slow)
    assert set(table.loc[(table["policy"] == "default") & (table["job"] == "a"), "slowdown_mean"]) == {1.75}


def slow_of(totals: dict[str, list[float]]) -> pd.DataFrame:
    """slowdowns() from per-repetition total contentions: one job, alone runtime 100."""
    rows = []
    for rep in range(max(len(v) for v in totals.values())):
        rows.append((rep, "alone", "j", 1, 100.0))
        rows += [(rep, policy, "j", 1, 100.0 + values[rep]) for policy, values in totals.items() if rep < len(values)]
    return slowdowns(jobs_table(rows))


def leads_of(totals: dict[str, list[float]]) -> pd.DataFrame:
    slow = slow_of(totals)
    return best_policy_leads(policy_summary(slow), slow)


def test_best_policy_leads_are_paired_over_the_repetitions_both_completed():
    clear = leads_of({"default": [100, 102, 98], "good": [50, 51, 49], "fair": [80, 82, 78]})
    assert list(clear["other"]) == ["default", "fair"] and list(clear["against"]) == ["default", "runner-up"]
    assert list(clear["distinguishable"]) == [True, True]
    assert clear["lead_us"].tolist() == pytest.approx([50.0, 30.0])
    # The repetitions vary a lot, the lead in each very little: each repetition runs every policy on
    # the same placement and seed, so the differences are the sample. The two unpaired intervals
    # overlapped (Welch p = 0.86) and called it indistinguishable; paired it is not (t = 5.0).
    steady = leads_of({"default": [100, 60, 140], "good": [99, 59, 139.5]})
    assert list(steady["against"]) == ["default and runner-up"] and list(steady["distinguishable"]) == [True]
    d = np.array([1, 1, 0.5])
    half = 4.302652729911275 * d.std(ddof=1) / math.sqrt(3)  # t(0.975, 2)
    assert steady[["lead_ci95_low_us", "lead_ci95_high_us"]].iloc[0].tolist() == pytest.approx([d.mean() - half,
                                                                                               d.mean() + half])
    # Picking the best among many: the interval widens (Bonferroni), so the same differences that
    # separate from default beside one other policy do not beside 24 (a lead that looks real by
    # chance: 12% of the time for the best of 25 equal policies at 3 repetitions, unadjusted).
    few = leads_of({"default": [100, 60, 140], "good": [92, 52, 135], "bad": [200, 200, 200]})
    many = leads_of({"default": [100, 60, 140], "good": [92, 52, 135],
                     **{f"bad{i}": [200, 200, 200] for i in range(23)}})
    assert few.iloc[0]["distinguishable"] and not many.iloc[0]["distinguishable"]
    assert many.iloc[0]["lead_confidence"] == pytest.approx(1 - 0.05 / 24)
    mixed = leads_of({"default": [100, 60, 140], "good": [99, 62, 138]})
    assert mixed["distinguishable"].tolist() == [False]
    single = leads_of({"default": [100], "good": [10]})
    assert single["distinguishable"].tolist() == [None] and single["repetitions"].tolist() == [1]
    tie = leads_of({"default": [100, 90], "b": [50, 40], "c": [50, 40]})
    assert tie.set_index("other").loc["c", "tied"] and not tie.set_index("other").loc["default", "tied"]


# -- who delayed whom, utilisation ------------------------------------------------------------


def interference_rows(rows):
    """rows: (run_id, policy, kind, victim, culprit, wait_ns), spread over two links of the run."""
    out = []
    for run_id, policy, kind, victim, culprit, wait in rows:
        for level in (1, 2):  # the same wait split over two levels: the matrix sums them
            out.append({"run_id": run_id, "repetition": int(run_id[1]), "policy": policy, "mode": "shared", "kind": kind,
                        "victim": victim, "culprit": culprit, "level": level, "direction": "up", "vl": 0,
                        "wait_ns": wait / 2})
    return pd.DataFrame(out)


RUNS = pd.DataFrame([
    {"run_id": f"r{rep}-{policy}", "repetition": rep, "policy": policy, "mode": "shared",
     "status": "completed" if (rep, policy) != (2, "p") else "deadlock", "sim_time_ns": 1000.0 * (rep + 1)}
    for rep in (0, 1, 2) for policy in ("default", "p")
])


def test_interference_matrix_averages_over_completed_runs_counting_absent_pairs_as_zero():
    inter = interference_rows([
        ("r0-default", "default", "output", "a", "b", 100.0), ("r1-default", "default", "output", "a", "b", 200.0),
        ("r0-default", "default", "buffer", "a", "b", 30.0),  # only in one of three repetitions
        ("r0-p", "p", "output", "a", "b", 10.0), ("r1-p", "p", "output", "b", "a", 40.0),
        ("r2-p", "p", "output", "a", "b", 1e9),  # a deadlocked run: left out
    ])
    m = interference_matrix(inter, RUNS, ["a", "b"]).set_index(["policy", "kind", "victim", "culprit"])
    assert m.loc[("default", "output", "a", "b"), "wait_ns"] == pytest.approx(300.0 / 3)
    assert m.loc[("default", "buffer", "a", "b"), "wait_ns"] == pytest.approx(10.0)
    assert m.loc[("default", "output", "b", "a"), "wait_ns"] == 0.0  # every pair, zeros included
    assert m.loc[("p", "output", "a", "b"), "wait_ns"] == pytest.approx(5.0) and m.loc[("p", "output", "a", "b"), "repetitions"] == 2
    assert len(m) == 2 * 2 * 2 * 2  # policies x kinds x victims x culprits
    changes = cross_job_changes(m.reset_index()).set_index(["policy", "victim", "culprit"])
    # default a<-b: 100 + 10 = 110 (output and buffer summed); p: 5
    assert changes.loc[("p", "a", "b"), "baseline_wait_ns"] == pytest.approx(110.0)
    assert changes.loc[("p", "a", "b"), "change_pct"] == pytest.approx(100 * (5 / 110 - 1))
    assert math.isnan(changes.loc[("p", "b", "a"), "change_pct"])  # nothing under default to compare with
    shift = harm_shift(changes.reset_index()).iloc[0]
    # removed 105 from a<-b, added 20 to b<-a: 20 < 25% of 105, so reduced, not moved
    assert shift["verdict"] == "reduced" and shift["removed_ns"] == pytest.approx(105.0) and shift["added_ns"] == pytest.approx(20.0)
    assert shift["largest_fall"][:2] == ("a", "b") and shift["largest_rise"][:2] == ("b", "a")


@pytest.mark.parametrize("p_waits, verdict", [
    ({("a", "b"): 50.0, ("b", "a"): 40.0}, "moved"),        # 50 removed, 40 added
    ({("a", "b"): 99.0, ("b", "a"): 0.0}, "about the same"),  # 1% of 100
    ({("a", "b"): 100.0, ("b", "a"): 100.0}, "increased"),
])
def test_harm_shift_verdicts(p_waits, verdict):
    matrix = pd.DataFrame([
        {"policy": "default", "kind": "output", "victim": "a", "culprit": "b", "wait_ns": 100.0, "repetitions": 1},
        {"policy": "default", "kind": "output", "victim": "b", "culprit": "a", "wait_ns": 0.0, "repetitions": 1},
        *({"policy": "p", "kind": "output", "victim": v, "culprit": c, "wait_ns": w, "repetitions": 1}
          for (v, c), w in p_waits.items()),
    ])
    assert harm_shift(cross_job_changes(matrix)).iloc[0]["verdict"] == verdict


def test_vl_utilisation_is_busy_time_over_links_and_simulated_time():
    vl_levels = pd.DataFrame([
        {"run_id": "r0-default", "policy": "default", "level": 1, "direction": "up", "vl": 0, "bytes": 10, "links": 4, "busy_ns": 2000.0},
        {"run_id": "r1-default", "policy": "default", "level": 1, "direction": "up", "vl": 0, "bytes": 30, "links": 4, "busy_ns": 2000.0},
        {"run_id": "r2-p", "policy": "p", "level": 1, "direction": "up", "vl": 0, "bytes": 30, "links": 4, "busy_ns": 2000.0},
    ])
    u = vl_utilisation(vl_levels, RUNS).set_index("policy")
    # r0: 2000 / (4 x 1000) = 0.5; r1: 2000 / (4 x 2000) = 0.25; the deadlocked r2-p is left out
    assert u.loc["default", "utilisation"] == pytest.approx(0.375) and u.loc["default", "bytes"] == 20
    assert "p" not in u.index


def test_the_policy_table_keeps_a_job_that_never_completed():
    from qoslab.study.results import policy_table

    jobs = jobs_table([(0, "alone", "a", 10, 100.0), (0, "alone", "b", 10, float("nan")),
                       (0, "default", "a", 10, 150.0), (0, "default", "b", 10, float("nan"))])
    tables = {name: pd.DataFrame({"policy": pd.Series(dtype=str)}) for name in ("runs", "levels", "interference", "vl_levels")}
    table = policy_table({**tables, "jobs": jobs})
    assert list(table.columns[:3]) == ["policy", "a slowdown", "b slowdown"]
    assert table.loc[0, "a slowdown"] == 1.5 and math.isnan(table.loc[0, "b slowdown"])


def test_identical_repetitions_are_one_sample_and_claim_nothing():
    # Nothing drew from the seed: both repetitions are the same run, the interval has zero width,
    # and the best policy's lead is not "distinguishable" (it holds for this placement only).
    jobs = jobs_table([(r, *row) for r in (0, 1) for row in [
        ("alone", "a", 10, 100.0), ("alone", "b", 10, 100.0),
        ("default", "a", 10, 150.0), ("default", "b", 10, 200.0),
        ("prio-a", "a", 10, 110.0), ("prio-a", "b", 10, 180.0)]])
    slow = slowdowns(jobs)
    summary = policy_summary(slow)
    assert summary["identical_repetitions"].tolist() == [True, True]
    lead = best_policy_leads(summary, slow).iloc[0]
    assert lead["best"] == "prio-a" and lead["lead_us"] == 60.0
    assert lead["distinguishable"] is None and lead["identical_repetitions"]
    # Repetitions that differ keep their interval and verdict.
    assert not policy_summary(slowdowns(JOBS))["identical_repetitions"].any()
