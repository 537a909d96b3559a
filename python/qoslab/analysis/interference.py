"""Who delayed whom (interference.parquet, docs/metrics.md "Who delayed whom"): per policy the
victim x culprit matrix of waiting time, and how a policy moved or removed the harm the jobs
did to each other under the default policy."""

from __future__ import annotations

import numpy as np
import pandas as pd

from qoslab.analysis.contention import BASELINE

KINDS = ("output", "buffer")
MATRIX_COLUMNS = ["policy", "kind", "victim", "culprit", "wait_ns", "repetitions"]
# A policy "moved" the harm when what it added to some pairs is at least this share of what it
# took from others; below it the harm was reduced (or, the other way round, increased).
MOVED_SHARE = 0.25
# Changes smaller than this share of the default's cross-job waiting leave it "about the same".
UNCHANGED_SHARE = 0.05
# A pair's change is named (largest fall, largest rise) from this share of that waiting on.
NOTABLE_SHARE = 0.01


def completed_shared_runs(runs: pd.DataFrame) -> pd.DataFrame:
    """run_id and policy of the shared runs that completed: the repetitions a mean is over."""
    if runs.empty or "mode" not in runs.columns:
        return pd.DataFrame(columns=["run_id", "policy"])
    done = runs[(runs["mode"] == "shared") & (runs["status"] == "completed")]
    return done[["run_id", "policy"]].reset_index(drop=True)


def class_order(jobs: list[str], classes: set[str]) -> list[str]:
    """Jobs in the given order, then any other class (open-loop traffic, "traffic[i]") sorted."""
    return [j for j in jobs if j in classes] + sorted(c for c in classes if c not in jobs)


def interference_matrix(interference: pd.DataFrame, runs: pd.DataFrame, classes: list[str] | None = None) -> pd.DataFrame:
    """Per (policy, kind, victim, culprit): wait_ns, the waiting summed over the fabric's levels,
    directions and VLs, then averaged over the policy's completed shared runs (a run with no row
    for a pair counts as zero); `repetitions` is how many runs that is. Every pair of `classes`
    (default: every class seen) appears, zeros included, for each kind and policy."""
    done = completed_shared_runs(runs)
    if interference is None or interference.empty or done.empty:
        return pd.DataFrame(columns=MATRIX_COLUMNS)
    rows = interference[interference["run_id"].isin(done["run_id"])]
    if classes is None:
        classes = sorted(set(rows["victim"]) | set(rows["culprit"]))
    summed = rows.groupby(["policy", "kind", "victim", "culprit"], sort=False)["wait_ns"].sum()
    counts = done.groupby("policy", sort=False).size()
    grid = pd.MultiIndex.from_product([list(counts.index), list(KINDS), classes, classes],
                                      names=["policy", "kind", "victim", "culprit"])
    out = summed.reindex(grid, fill_value=0.0).reset_index()
    out["repetitions"] = out["policy"].map(counts).astype(int)
    out["wait_ns"] = out["wait_ns"] / out["repetitions"]
    return out[MATRIX_COLUMNS]


def cross_job_changes(matrix: pd.DataFrame, baseline: str = BASELINE) -> pd.DataFrame:
    """Per (policy, victim, culprit) with victim != culprit: wait_ns with output and buffer waits
    summed (for one packet they are disjoint spans: behind others in its queue, then waiting at
    the output), the baseline's (`baseline_wait_ns`), change_ns and change_pct (NaN where the
    baseline had none)."""
    columns = ["policy", "victim", "culprit", "wait_ns", "baseline_wait_ns", "change_ns", "change_pct"]
    cross = matrix[matrix["victim"] != matrix["culprit"]]
    total = cross.groupby(["policy", "victim", "culprit"], sort=False)["wait_ns"].sum().reset_index()
    base = total[total["policy"] == baseline][["victim", "culprit", "wait_ns"]].rename(columns={"wait_ns": "baseline_wait_ns"})
    if base.empty:
        return pd.DataFrame(columns=columns)
    out = total.merge(base, on=["victim", "culprit"], how="left")
    out["baseline_wait_ns"] = out["baseline_wait_ns"].fillna(0.0)
    out["change_ns"] = out["wait_ns"] - out["baseline_wait_ns"]
    with np.errstate(divide="ignore", invalid="ignore"):
        out["change_pct"] = np.where(out["baseline_wait_ns"] > 0, 100.0 * out["change_ns"] / out["baseline_wait_ns"], np.nan)
    return out[columns]


def harm_shift(changes: pd.DataFrame, baseline: str = BASELINE) -> pd.DataFrame:
    """Per policy other than the baseline, from cross_job_changes: the waiting the jobs caused
    each other (cross_wait_ns) and the baseline's, the change in %, what it took from the pairs
    that fell (`removed_ns`) and added to those that rose (`added_ns`), the pair that fell most and
    the one that rose most as (victim, culprit, change_pct, change_ns) when the change is at least
    NOTABLE_SHARE of the baseline's waiting (else None), and `verdict`:

    - "about the same": removed and added both under UNCHANGED_SHARE of the baseline's waiting;
    - "moved": what was added is at least MOVED_SHARE of what was removed, and the other way round;
    - "reduced" / "increased": otherwise, by which side is larger."""
    rows = []
    for policy, group in changes.groupby("policy", sort=False):
        if policy == baseline:
            continue
        base_total = float(group["baseline_wait_ns"].sum())
        removed = float(-group["change_ns"].clip(upper=0).sum())
        added = float(group["change_ns"].clip(lower=0).sum())
        notable = NOTABLE_SHARE * base_total
        fall = group.loc[group["change_ns"].idxmin()] if -group["change_ns"].min() > notable else None
        rise = group.loc[group["change_ns"].idxmax()] if group["change_ns"].max() > notable else None
        if max(removed, added) < UNCHANGED_SHARE * base_total or removed == added == 0:
            verdict = "about the same"
        elif added >= MOVED_SHARE * removed and removed >= MOVED_SHARE * added:
            verdict = "moved"
        else:
            verdict = "reduced" if removed > added else "increased"
        total = float(group["wait_ns"].sum())
        rows.append({
            "policy": policy, "cross_wait_ns": total, "baseline_cross_wait_ns": base_total,
            "change_pct": 100.0 * (total / base_total - 1.0) if base_total > 0 else np.nan,
            "removed_ns": removed, "added_ns": added, "verdict": verdict,
            "largest_fall": None if fall is None else (fall["victim"], fall["culprit"], fall["change_pct"], fall["change_ns"]),
            "largest_rise": None if rise is None else (rise["victim"], rise["culprit"], rise["change_pct"], rise["change_ns"]),
        })
    return pd.DataFrame(rows, columns=["policy", "cross_wait_ns", "baseline_cross_wait_ns", "change_pct", "removed_ns",
                                       "added_ns", "verdict", "largest_fall", "largest_rise"])
