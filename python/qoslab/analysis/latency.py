"""Iteration-time (latency) distributions: percentiles and predictability. Percentiles use
numpy's default linear interpolation."""

from __future__ import annotations

import numpy as np
import pandas as pd

PERCENTILES = {"p50": 50, "p90": 90, "p99": 99, "p999": 99.9}


def sample_stats(samples) -> dict[str, float]:
    """mean, p50, p90, p99, p999, max, std (population), cv = std / mean, p99_over_p50."""
    values = np.asarray(samples, dtype=float)
    values = values[~np.isnan(values)]
    if values.size == 0:
        return dict.fromkeys(("count", "mean", *PERCENTILES, "max", "std", "cv", "p99_over_p50"), np.nan)
    out = {"count": float(values.size), "mean": float(values.mean())}
    out.update({name: float(np.percentile(values, q)) for name, q in PERCENTILES.items()})
    out["max"] = float(values.max())
    out["std"] = float(values.std())
    out["cv"] = out["std"] / out["mean"] if out["mean"] else np.nan
    out["p99_over_p50"] = out["p99"] / out["p50"] if out["p50"] else np.nan
    return out


def iteration_stats(iterations: pd.DataFrame) -> pd.DataFrame:
    """sample_stats of time_ns per (mode, policy, job), all ranks, iterations and repetitions
    pooled. Alone runs appear as policy "alone"."""
    rows = []
    for (mode, policy, job), group in iterations.groupby(["mode", "policy", "job"], sort=False):
        rows.append({"mode": mode, "policy": policy, "job": job, **sample_stats(group["time_ns"])})
    return pd.DataFrame(rows)
