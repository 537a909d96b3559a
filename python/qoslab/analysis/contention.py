"""Slowdown against running alone, contention, compute-power waste and throughput (Savoie et al.;
Jokanovic et al.'s T_contention, Total_contention and Pw)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from qoslab.analysis.confidence import CONFIDENCE, Interval, mean_interval

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
    - vs_default_pct: change of total contention against the "default" policy (negative = less),
      over the repetitions both completed (paired: the same placements and seeds on both sides).

    A repetition in which some job of the policy did not complete gives NaN for that repetition;
    `complete_repetitions` counts the others, of `repetitions` run. A policy with fewer complete
    repetitions than it ran averages over an easier subset (its timed-out runs are often the
    hardest placements): `ranking` puts it after every policy that completed all of them. `identical_repetitions`: two or more of them, every
    job's shared runtime the same in each (nothing the policy's runs did drew from the seed: a
    fixed placement and no random traffic), so they are one sample, and the interval's zero
    width says nothing about run-to-run variation."""
    rows = []
    totals = repetition_totals(slow)
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
            "repetitions": len(reps),
            "identical_repetitions": identical,
        })
    out = pd.DataFrame(rows)
    if out.empty:
        return out
    out["vs_default_pct"] = [_vs_default(totals, policy) for policy in out["policy"]]
    return out


def repetition_totals(slow: pd.DataFrame) -> pd.DataFrame:
    """Total contention per repetition (rows) and policy (columns), NaN where a job of the policy
    did not complete in that repetition: what paired comparisons of two policies read."""
    complete = slow.groupby(["repetition", "policy"], sort=False)["complete"].all()
    total = slow.groupby(["repetition", "policy"], sort=False)["contention_us"].sum()
    return total.where(complete).unstack("policy")


def _vs_default(totals: pd.DataFrame, policy: str) -> float:
    if BASELINE not in totals or policy not in totals:
        return np.nan
    if policy == BASELINE:
        return 0.0 if totals[BASELINE].notna().any() and totals[BASELINE].sum() > 0 else np.nan
    both = totals[[policy, BASELINE]].dropna()
    base = both[BASELINE].sum()
    return 100.0 * (both[policy].sum() / base - 1.0) if len(both) and base > 0 else np.nan


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


def best_policy_leads(summary: pd.DataFrame, slow: pd.DataFrame) -> pd.DataFrame:
    """The best policy by total contention (`ranking`) against the default and against the
    runner-up (one row when they are the same policy): lead_us (how much less contention the best
    has, over the repetitions both completed), its Student-t interval (95% for the choice among the
    K policies compared, `candidates`, so each at 1 - 0.05 / K: `lead_confidence`) from the paired
    per-repetition differences (lead_ci95_low_us, lead_ci95_high_us: every policy of a repetition
    runs on the same placement and seed, so the differences are the sample, not the two policies'
    spreads), `distinguishable` (True: the interval excludes 0, above it or, for a best ranked first
    only because the other did not complete every repetition, below it; False: it includes 0; None:
    fewer than two repetitions both completed, or a side's repetitions are identical), `repetitions` (how
    many both completed), `identical_repetitions` (either side's, policy_summary) and `tied`
    (the same total contention in every such repetition)."""
    columns = ["best", "other", "against", "lead_us", "lead_ci95_low_us", "lead_ci95_high_us", "lead_confidence",
               "candidates", "distinguishable", "repetitions", "identical_repetitions", "tied"]
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
    totals = repetition_totals(slow)
    # The best is picked after the fact among the policies compared, which makes a lead over
    # default look real by chance far more often than 5% (best of 25 equal policies, 3 repetitions:
    # 12%; of 49 at 10: 26%, by simulation): the interval is widened for that choice (Bonferroni,
    # 95% over the candidates together).
    candidates = max(1, int((summary["policy"] != BASELINE).sum()))
    confidence = 1 - (1 - CONFIDENCE) / candidates
    rows = []
    for name, roles in others.items():
        other = ranked[ranked["policy"] == name].iloc[0]
        identical = bool(best.get("identical_repetitions", False) or other.get("identical_repetitions", False))
        both = totals[[name, best["policy"]]].dropna()
        lead = mean_interval(both[name] - both[best["policy"]], confidence)
        rows.append({"best": best["policy"], "other": name, "against": " and ".join(roles),
                     "lead_us": lead.mean, "lead_ci95_low_us": lead.low, "lead_ci95_high_us": lead.high,
                     "lead_confidence": confidence, "candidates": candidates,
                     # Either sign: a best that ranks first only because the other did not complete
                     # every repetition can be clearly behind it over those both completed.
                     "distinguishable": None if identical or lead.n < 2 else bool(lead.low > 0 or lead.high < 0),
                     "repetitions": lead.n, "identical_repetitions": identical,
                     "tied": bool(len(both)) and bool((both[name] == both[best["policy"]]).all())})
    return pd.DataFrame(rows, columns=columns)


def incomplete(summary: pd.DataFrame) -> pd.Series:
    """Per policy of `policy_summary`: some job of it did not complete in every repetition it ran."""
    if "repetitions" not in summary:  # a table written before the column existed
        return pd.Series(False, index=summary.index)
    return summary["complete_repetitions"] < summary["repetitions"]


def ranking(summary: pd.DataFrame, metric: str = "total_contention_us") -> pd.DataFrame:
    """Policies best first by `metric` (lower is better; throughput: higher is better): first
    those that completed every repetition they ran, then those that did not (each policy's mean
    rests on its own complete repetitions, and one that timed out in the hardest placements would
    otherwise rank on the easy ones), then those with no figure. Ties keep the policies' order."""
    ascending = not metric.startswith("throughput")
    keyed = summary.assign(_incomplete=incomplete(summary), _missing=summary[metric].isna())
    ordered = keyed.sort_values(["_missing", "_incomplete", metric], ascending=[True, True, ascending], kind="stable")
    return ordered.drop(columns=["_incomplete", "_missing"]).reset_index(drop=True)
