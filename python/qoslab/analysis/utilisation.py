"""Link utilisation per tree level, direction and VL (vl_levels.parquet): which VLs carry the
load where, under each policy (docs/metrics.md, "Link utilisation per level and VL")."""

from __future__ import annotations

import pandas as pd

from qoslab.analysis.interference import completed_shared_runs

COLUMNS = ["policy", "level", "direction", "vl", "utilisation", "bytes", "repetitions"]


def vl_utilisation(vl_levels: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """Per (policy, level, direction, vl) of the completed shared runs: utilisation = busy_ns /
    (links x the run's sim_time_ns), the share of the run the level's links spent sending that
    VL's packets, averaged over links and then over repetitions; bytes likewise averaged."""
    done = completed_shared_runs(runs)
    if vl_levels is None or vl_levels.empty or done.empty or "sim_time_ns" not in runs.columns:
        return pd.DataFrame(columns=COLUMNS)
    rows = vl_levels[vl_levels["run_id"].isin(done["run_id"])].merge(runs[["run_id", "sim_time_ns"]], on="run_id")
    rows = rows[(rows["links"] > 0) & (rows["sim_time_ns"] > 0)]
    if rows.empty:
        return pd.DataFrame(columns=COLUMNS)
    rows = rows.assign(utilisation=rows["busy_ns"] / (rows["links"] * rows["sim_time_ns"]))
    out = rows.groupby(["policy", "level", "direction", "vl"], sort=False).agg(
        utilisation=("utilisation", "mean"), bytes=("bytes", "mean"), repetitions=("run_id", "nunique")).reset_index()
    return out.sort_values(["level", "direction", "vl"], kind="stable", ascending=[True, False, True])[COLUMNS] \
        .reset_index(drop=True)
