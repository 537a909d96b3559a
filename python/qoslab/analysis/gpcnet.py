"""GPCNeT's congestion impact factor (CIF) for a canary job: its isolated samples are its alone
runs, its congested samples a policy's shared runs (science.md 1.1).

Latency-type canaries (iteration time is a latency): CIF = congested / isolated.
Bandwidth-type canaries: the samples are iteration times of a fixed amount of data, so bandwidth
is proportional to 1 / time, and CIF = isolated bandwidth / congested bandwidth; for the average
that is mean(1/t_isolated) / mean(1/t_congested), for p99 the ratio of the 1st percentiles of
bandwidth (the p99 of slowness)."""

from __future__ import annotations

from typing import Literal

import numpy as np
import pandas as pd


def congestion_impact(iterations: pd.DataFrame, job: str, kind: Literal["latency", "bandwidth"] = "latency") -> pd.DataFrame:
    """Per policy: cif_average and cif_p99 of `job` (> 1: congestion hurts), from time_ns."""
    rows = iterations[iterations["job"] == job]
    isolated = rows[rows["mode"] == "alone"]["time_ns"].to_numpy(dtype=float)
    out = []
    if isolated.size == 0:
        return pd.DataFrame(columns=["policy", "job", "kind", "cif_average", "cif_p99"])
    for policy, group in rows[rows["mode"] == "shared"].groupby("policy", sort=False):
        congested = group["time_ns"].to_numpy(dtype=float)
        if kind == "latency":
            average = congested.mean() / isolated.mean()
            p99 = np.percentile(congested, 99) / np.percentile(isolated, 99)
        else:
            bw_iso, bw_con = 1.0 / isolated, 1.0 / congested
            average = bw_iso.mean() / bw_con.mean()
            p99 = np.percentile(bw_iso, 1) / np.percentile(bw_con, 1)
        out.append({"policy": policy, "job": job, "kind": kind, "cif_average": float(average), "cif_p99": float(p99)})
    return pd.DataFrame(out)
