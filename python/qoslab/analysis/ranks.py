"""Per-rank time distributions: which ranks are slow, and how unevenly a job's ranks fare.

A rank's iterations tile the span from its start to its last iteration's end, and the ranks of a
job that synchronises (a collective, a halo exchange) end together, so every rank's *mean*
iteration time is the same, whatever happened inside the iterations. The spread is therefore
measured within each iteration (across the ranks of one iteration of one run), and the slow
ranks are found by what does differ between ranks: how late their messages arrive."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd


def rank_times(iterations: pd.DataFrame) -> pd.DataFrame:
    """Per (policy, job, rank): mean iteration time and mean MPI wait over iterations and
    repetitions (ns), the rank's share of its time spent waiting and, where the table has the
    send columns, mean_send_latency_ns: the mean latency of its delivered messages."""
    grouped = iterations.groupby(["policy", "job", "rank"], sort=False)
    out = grouped.agg(mean_time_ns=("time_ns", "mean"), mean_wait_ns=("mpi_wait_ns", "mean")).reset_index()
    out["wait_fraction"] = out["mean_wait_ns"] / out["mean_time_ns"]
    if {"sends", "send_latency_ns"} <= set(iterations.columns):
        sums = grouped.agg(sends=("sends", "sum"), latency=("send_latency_ns", "sum")).reset_index(drop=True)
        out["mean_send_latency_ns"] = np.where(sums["sends"] > 0, sums["latency"] / sums["sends"].clip(lower=1), np.nan)
    return out


def slowest_ranks(iterations: pd.DataFrame, fraction: float = 0.1) -> pd.DataFrame:
    """Per (policy, job, repetition): how unevenly the ranks fare within an iteration, and the
    slowest ceil(fraction x ranks) ranks, slowest first.

    min_ns, median_ns and max_ns: per iteration, the fastest, median and slowest rank's time,
    averaged over the iterations; max_over_median = max_ns / median_ns. `slowest`: the ranks
    whose delivered messages have the highest mean latency (the ranks the others receive from
    late, the per-rank policy's "slowest-sends"); send_latency_max_over_median: the slowest
    rank's mean message latency over the median rank's. Repetitions are kept apart: each places
    the ranks on other hosts."""
    rows = []
    for (policy, job, repetition), group in iterations.groupby(["policy", "job", "repetition"], sort=False):
        per_iteration = group.groupby("iteration")["time_ns"].agg(["min", "median", "max"]).mean()
        median = float(per_iteration["median"])
        latency = rank_times(group)
        ranks = len(latency)
        count = max(1, math.ceil(ranks * fraction - 1e-9))
        if "mean_send_latency_ns" in latency.columns and latency["mean_send_latency_ns"].notna().any():
            ordered = latency.sort_values(["mean_send_latency_ns", "rank"], ascending=[False, True], na_position="last")
            slowest = [int(r) for r in ordered["rank"].head(count)]
            latency_median = float(latency["mean_send_latency_ns"].median())
            latency_spread = float(latency["mean_send_latency_ns"].max()) / latency_median if latency_median else math.nan
        else:
            slowest, latency_spread = [], math.nan
        rows.append({
            "policy": policy, "job": job, "repetition": repetition, "ranks": ranks,
            "min_ns": float(per_iteration["min"]), "median_ns": median, "max_ns": float(per_iteration["max"]),
            "max_over_median": float(per_iteration["max"]) / median if median else math.nan,
            "send_latency_max_over_median": latency_spread,
            "slowest": slowest,
        })
    return pd.DataFrame(rows)
