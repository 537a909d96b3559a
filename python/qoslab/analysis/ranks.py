"""Per-rank time distributions: which ranks are slow, and how unevenly a job's ranks fare."""

from __future__ import annotations

import math

import pandas as pd


def rank_times(iterations: pd.DataFrame) -> pd.DataFrame:
    """Per (policy, job, rank): mean iteration time and mean MPI wait over iterations and
    repetitions (ns), and the rank's share of its time spent waiting."""
    grouped = iterations.groupby(["policy", "job", "rank"], sort=False)
    out = grouped.agg(mean_time_ns=("time_ns", "mean"), mean_wait_ns=("mpi_wait_ns", "mean")).reset_index()
    out["wait_fraction"] = out["mean_wait_ns"] / out["mean_time_ns"]
    return out


def slowest_ranks(iterations: pd.DataFrame, fraction: float = 0.1) -> pd.DataFrame:
    """Per (policy, job): the spread of per-rank mean times (min, median, max, max/median) and the
    slowest ceil(fraction x ranks) ranks, slowest first."""
    per_rank = rank_times(iterations)
    rows = []
    for (policy, job), group in per_rank.groupby(["policy", "job"], sort=False):
        ordered = group.sort_values(["mean_time_ns", "rank"], ascending=[False, True])
        count = max(1, math.ceil(len(group) * fraction - 1e-9))
        median = float(group["mean_time_ns"].median())
        rows.append({
            "policy": policy, "job": job, "ranks": len(group),
            "min_ns": float(group["mean_time_ns"].min()), "median_ns": median,
            "max_ns": float(group["mean_time_ns"].max()),
            "max_over_median": float(group["mean_time_ns"].max()) / median if median else float("nan"),
            "slowest": [int(r) for r in ordered["rank"].head(count)],
        })
    return pd.DataFrame(rows)
