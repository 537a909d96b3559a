"""Slowdown against running alone, contention, compute-power waste and throughput (Savoie et al.;
Jokanovic et al.'s T_contention, Total_contention and Pw)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from qoslab.analysis.confidence import Interval, intervals_separate, mean_interval

BASELINE = "default"


def slowdowns(jobs: pd.DataFrame) -> pd.DataFrame:
    """One row per (repetition, policy, job) of the shared runs: alone_us, shared_us, slowdown =
    shared / alone, contention_us = shared - alone, ranks, and `complete` (both runs finished;
    otherwise slowdown and contention are NaN, never dropped)."""
    alone = jobs[jobs["mode"] == "alone"][["repetition", "job", "runtime_us"]].rename(columns={"runtime_us": "alone_us"})
    shared = jobs[jobs["mode"] == "shared"][["repetition", "policy", "job", "ranks", "runtime_us"]]
    out = shared.rename(columns={"runtime_us": "shared_us"}).merge(alone, on=["repetition", "job"], how="left")
    out["complete"] = out["alone_us"].notna() & out["shared_us"].notna()
    out["slowdown"] = np.where(out["complete"], out["shared_us"] / out["alone_us"], np.nan)
    out["contention_us"] = np.where(out["complete"], out["shared_us"] - out["alone_us"], np.nan)
    return out[["repetition", "policy", "job", "ranks", "alone_us", "shared_us", "slowdown", "contention_us", "complete"]]


def policy_summary(slow: pd.DataFrame, core_second_cost: float = 1.0) -> pd.DataFrame:
    """Per policy, in the order policies first appear, averaged over repetitions:

    - total_contention_us: sum over jobs of T_shared - T_alone (mean; min and max over repetitions,
      and the 95% Student-t confidence interval of the mean, NaN with one complete repetition);
    - pw_core_seconds: compute-power waste, C x sum over jobs of ranks x T_contention (seconds);
    - mean_slowdown, geomean_slowdown, worst_slowdown (and worst_job) over jobs, each job's
      slowdown averaged over the repetitions in which every job completed (those total contention
      rests on): NaN when there is none, so a policy that starves a job never ranks by the others;
    - throughput_jobs_per_hour: 3600 s x sum over jobs of 1 / T_shared, each job rerun back to
      back; throughput_vs_alone divides it by the same sum over alone runtimes;
    - vs_default_pct: change of total contention against the "default" policy (negative = less).

    A repetition in which some job of the policy did not complete gives NaN for that repetition;
    `complete_repetitions` counts the others. `identical_repetitions`: two or more of them, every
    job's shared runtime the same in each (nothing the policy's runs did drew from the seed: a
    fixed placement and no random traffic), so they are one sample, and the interval's zero
    width says nothing about run-to-run variation."""
    rows = []
    for policy, group in slow.groupby("policy", sort=False):
        per_rep = []
        complete_reps = []
        for repetition, g in group.groupby("repetition"):
            complete = bool(g["complete"].all())
            if complete:
                complete_reps.append(repetition)
            per_rep.append({
                "total": g["contention_us"].sum() if complete else np.nan,
                "pw": core_second_cost * (g["ranks"] * g["contention_us"]).sum() / 1e6 if complete else np.nan,
                "throughput": 3600e6 * (1.0 / g["shared_us"]).sum() if complete else np.nan,
                "alone_throughput": 3600e6 * (1.0 / g["alone_us"]).sum() if complete else np.nan,
            })
        reps = pd.DataFrame(per_rep)
        runtimes = group[group["repetition"].isin(complete_reps)].pivot_table(
            index="repetition", columns="job", values="shared_us", aggfunc="first")
        identical = len(complete_reps) >= 2 and bool((runtimes.nunique() <= 1).all())
        total = mean_interval(reps["total"])
        jobs = group["job"].unique()
        by_job = group[group["repetition"].isin(complete_reps)].groupby("job", sort=False)["slowdown"].mean().reindex(jobs)
        every_job = bool(len(by_job)) and bool(by_job.notna().all())
        worst_job = by_job.idxmax() if every_job else None
        rows.append({
            "policy": policy,
            "total_contention_us": reps["total"].mean(),
            "total_contention_min_us": reps["total"].min(),
            "total_contention_max_us": reps["total"].max(),
            "total_contention_ci95_low_us": total.low,
            "total_contention_ci95_high_us": total.high,
            "pw_core_seconds": reps["pw"].mean(),
            "mean_slowdown": by_job.mean() if every_job else np.nan,
            "geomean_slowdown": float(np.exp(np.log(by_job).mean())) if every_job else np.nan,
            "worst_slowdown": by_job.max() if every_job else np.nan,
            "worst_job": worst_job,
            "throughput_jobs_per_hour": reps["throughput"].mean(),
            "throughput_vs_alone": (reps["throughput"] / reps["alone_throughput"]).mean(),
            "complete_repetitions": int(reps["total"].notna().sum()),
            "identical_repetitions": identical,
        })
    out = pd.DataFrame(rows)
    if out.empty:
        return out
    base = out.loc[out["policy"] == BASELINE, "total_contention_us"]
    if len(base) and base.iloc[0] > 0:
        out["vs_default_pct"] = 100.0 * (out["total_contention_us"] / base.iloc[0] - 1.0)
    else:
        out["vs_default_pct"] = np.nan
    return out


def slowdown_intervals(slow: pd.DataFrame) -> pd.DataFrame:
    """Per (policy, job), in the order they first appear: slowdown_mean over the repetitions in
    which both runs completed, its 95% Student-t interval (slowdown_ci95_low, slowdown_ci95_high;
    NaN with fewer than two) and slowdown_repetitions, how many repetitions it rests on."""
    rows = []
    for (policy, job), group in slow.groupby(["policy", "job"], sort=False):
        interval = mean_interval(group["slowdown"])
        rows.append({"policy": policy, "job": job, "slowdown_mean": interval.mean, "slowdown_ci95_low": interval.low,
                     "slowdown_ci95_high": interval.high, "slowdown_repetitions": interval.n})
    return pd.DataFrame(rows, columns=["policy", "job", "slowdown_mean", "slowdown_ci95_low", "slowdown_ci95_high",
                                       "slowdown_repetitions"])


def with_slowdown_intervals(slow: pd.DataFrame) -> pd.DataFrame:
    """`slow` (one row per repetition) with its (policy, job)'s slowdown_intervals beside each
    row: the columns slowdown.parquet adds to the per-repetition ones."""
    return slow.merge(slowdown_intervals(slow), on=["policy", "job"], how="left")


def total_contention_interval(summary_row: pd.Series) -> Interval:
    return Interval(summary_row["total_contention_us"], summary_row["total_contention_ci95_low_us"],
                    summary_row["total_contention_ci95_high_us"], int(summary_row["complete_repetitions"]))


def best_policy_leads(summary: pd.DataFrame) -> pd.DataFrame:
    """The best policy by total contention against the default and against the runner-up (one
    row when they are the same policy): lead_us (how much less contention the best has),
    `distinguishable` (True: the 95% intervals do not overlap; False: they do; None: a side has
    fewer than two complete repetitions, or its repetitions are identical, so no interval), the
    repetitions of each side and `identical_repetitions` (either side's, policy_summary)."""
    columns = ["best", "other", "against", "lead_us", "distinguishable", "best_repetitions", "other_repetitions",
               "identical_repetitions"]
    ranked = ranking(summary)
    ranked = ranked[ranked["total_contention_us"].notna()].reset_index(drop=True)
    if ranked.empty:
        return pd.DataFrame(columns=columns)
    best = ranked.iloc[0]
    others: dict[str, list[str]] = {}
    baseline = ranked[ranked["policy"] == BASELINE]
    if best["policy"] != BASELINE and len(baseline):
        others.setdefault(BASELINE, []).append("default")
    if len(ranked) > 1:
        others.setdefault(ranked.iloc[1]["policy"], []).append("runner-up")
    rows = []
    for name, roles in others.items():
        other = ranked[ranked["policy"] == name].iloc[0]
        identical = bool(best.get("identical_repetitions", False) or other.get("identical_repetitions", False))
        separate = intervals_separate(total_contention_interval(best), total_contention_interval(other))
        rows.append({"best": best["policy"], "other": name, "against": " and ".join(roles),
                     "lead_us": other["total_contention_us"] - best["total_contention_us"],
                     "distinguishable": None if identical else separate,
                     "best_repetitions": int(best["complete_repetitions"]),
                     "other_repetitions": int(other["complete_repetitions"]),
                     "identical_repetitions": identical})
    return pd.DataFrame(rows, columns=columns)


def ranking(summary: pd.DataFrame, metric: str = "total_contention_us") -> pd.DataFrame:
    """Policies best first by `metric` (lower is better; throughput: higher is better)."""
    ascending = not metric.startswith("throughput")
    return summary.sort_values(metric, ascending=ascending, na_position="last", kind="stable").reset_index(drop=True)
