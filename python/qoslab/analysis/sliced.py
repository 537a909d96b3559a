"""The iteration-time analyses of a study whose iterations stay on disk (sweep/iterations.py), one
job under one policy at a time (beside the job's alone runs where a figure compares against them),
so the driver holds one such slice, whatever the number of runs. Each gives exactly what its
in-memory counterpart (latency.py, gpcnet.py) gives on the whole table: the same rows, in the same
order, from the same samples in the same order."""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping
from typing import Protocol

import pandas as pd

from qoslab.analysis.gpcnet import CIF_COLUMNS, GPCNET_COLUMNS, GpcnetTest, congestion_impact, gpcnet_impact
from qoslab.analysis.latency import iteration_stats

ALONE = "alone"  # the policy (and mode) of the jobs' alone runs
STATS_COLUMNS = ["mode", "policy", "job", "time_ns"]
IMPACT_COLUMNS = ["job", "repetition", "policy", "mode", "rank", "iteration", "time_ns"]


class Slices(Protocol):
    """What these read: sweep.iterations.IterationsFile, or FrameSlices over a table in memory."""

    @property
    def present(self) -> Mapping[str, list[str]]: ...

    def first_repetition(self, job: str, policies: Iterable[str] | None = None) -> int | None: ...

    def read(self, job: str | None = None, policies: Iterable[str] | None = None,
             columns: list[str] | None = None, repetition: int | None = None) -> pd.DataFrame: ...


class FrameSlices:
    """The same reads over an iterations table in memory (hand-made tables, a notebook's)."""

    def __init__(self, frame: pd.DataFrame):
        self.frame = frame

    @property
    def present(self) -> dict[str, list[str]]:
        return {str(job): list(dict.fromkeys(group)) for job, group in self.frame.groupby("job", sort=False)["policy"]}

    def first_repetition(self, job: str, policies: Iterable[str] | None = None) -> int | None:
        rows = self.read(job, policies, ["repetition"])
        return int(rows["repetition"].min()) if len(rows) else None

    def read(self, job: str | None = None, policies: Iterable[str] | None = None,
             columns: list[str] | None = None, repetition: int | None = None) -> pd.DataFrame:
        rows = self.frame
        if job is not None:
            rows = rows[rows["job"] == job]
        if policies is not None:
            rows = rows[rows["policy"].isin(list(policies))]
        if repetition is not None:
            rows = rows[rows["repetition"] == repetition]
        return rows[columns] if columns else rows


def as_slices(iterations: pd.DataFrame | Slices) -> Slices:
    """A table in memory or a study's iterations file, read the same way."""
    return FrameSlices(iterations) if isinstance(iterations, pd.DataFrame) else iterations


def job_iteration_stats(iterations: Slices, job: str) -> pd.DataFrame:
    """iteration_stats of `job`: a row per (mode, policy), policies in the order written."""
    frames = [iteration_stats(iterations.read(job, [policy], STATS_COLUMNS)) for policy in iterations.present[job]]
    return pd.concat(frames, ignore_index=True)


def _against_alone(iterations: Slices, job: str, complete: Collection[str] | None = None) -> list[tuple[str, pd.DataFrame]]:
    """Per policy other than alone (in the order written): its rows of `job` after the alone ones;
    with `complete`, only the rows of those runs (the runs in which `job` completed: a run that
    deadlocked or hit its time limit has rows of the iterations it got through, or of none)."""

    def rows(policy: str) -> pd.DataFrame:
        if complete is None:
            return iterations.read(job, [policy], IMPACT_COLUMNS)
        frame = iterations.read(job, [policy], [*IMPACT_COLUMNS, "run_id"])
        return frame[frame["run_id"].isin(set(complete))][IMPACT_COLUMNS]

    alone = rows(ALONE)
    return [(policy, pd.concat([alone, rows(policy)], ignore_index=True))
            for policy in iterations.present[job] if policy != ALONE]


def _both_modes(rows: pd.DataFrame) -> bool:
    """Rows alone and shared: an impact (shared over alone) can be computed from them."""
    return {"alone", "shared"} <= set(rows["mode"])


def job_gpcnet_impact(iterations: Slices, job: str, tests: list[GpcnetTest],
                      complete: Collection[str] | None = None) -> pd.DataFrame:
    """gpcnet_impact of canary `job`: rows by test, then policy (with `complete`, from the runs in
    which it completed only: a policy with none has no row)."""
    frames = [f for f in (gpcnet_impact(rows, job, tests) for _, rows in _against_alone(iterations, job, complete)
                          if complete is None or _both_modes(rows)) if len(f)]
    if not frames:
        return pd.DataFrame(columns=GPCNET_COLUMNS)
    order = {test.name: index for index, test in enumerate(tests)}
    table = pd.concat(frames, ignore_index=True)
    return table.sort_values("test", key=lambda names: names.map(order), kind="stable").reset_index(drop=True)


def job_congestion_impact(iterations: Slices, job: str, complete: Collection[str] | None = None) -> pd.DataFrame:
    """congestion_impact of `job` (GPCNeT's CIF of its iteration times), a row per policy; with
    `complete`, from the runs in which it completed only: a policy with none alone or shared has
    no figure (NaN), not the impact of the iterations a deadlocked run got through."""
    frames = []
    for policy, rows in _against_alone(iterations, job, complete):
        frame = congestion_impact(rows, job) if complete is None or _both_modes(rows) else pd.DataFrame()
        if len(frame):
            frames.append(frame)
        elif complete is not None:
            frames.append(pd.DataFrame([{"policy": policy, "job": job, "kind": "latency", "cif_average": math.nan,
                                         "cif_p99": math.nan}], columns=CIF_COLUMNS))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=CIF_COLUMNS)
