"""The study's headline table for the terminal: per policy, each job's slowdown against running
alone and the total contention (mean over repetitions)."""

from __future__ import annotations

import pandas as pd

from qoslab.study.runner import is_candidate


def policy_table(tables: dict[str, pd.DataFrame]) -> pd.DataFrame:
    jobs = tables["jobs"]
    if jobs.empty:
        return pd.DataFrame()
    alone = jobs[jobs["mode"] == "alone"][["repetition", "job", "runtime_us"]].rename(columns={"runtime_us": "alone_us"})
    shared = jobs[(jobs["mode"] == "shared") & ~jobs["policy"].map(is_candidate)]
    joined = shared.merge(alone, on=["repetition", "job"], how="left")
    joined["slowdown"] = joined["runtime_us"] / joined["alone_us"]
    joined["contention_us"] = joined["runtime_us"] - joined["alone_us"]
    order = list(dict.fromkeys(joined["policy"]))
    slowdown = joined.pivot_table(index="policy", columns="job", values="slowdown", aggfunc="mean", sort=False)
    total = joined.groupby(["policy", "repetition"], sort=False)["contention_us"].sum(min_count=len(alone["job"].unique()))
    slowdown["total contention us"] = total.groupby("policy", sort=False).mean()
    slowdown = slowdown.reindex(order)
    slowdown.columns = [c if c == "total contention us" else f"{c} slowdown" for c in slowdown.columns]
    return slowdown.reset_index()
