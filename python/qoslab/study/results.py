"""After the runs: the analysis tables beside the run tables, the report, and the terminal's
headline table. Search candidates stay in the run tables but not in the comparison (the best one
is there under the search's name)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from qoslab.analysis import (
    canary_tests,
    policy_summary,
    slowdowns,
    with_slowdown_intervals,
)
from qoslab.analysis.sliced import job_gpcnet_impact
from qoslab.policies.search import CANDIDATE_MARK
from qoslab.report import write_report
from qoslab.sweep.iterations import IterationsFile
from qoslab.sweep.store import COLUMNS as RUN_TABLES
from qoslab.sweep.store import write_tables


def is_candidate(policy: str) -> bool:
    return CANDIDATE_MARK in policy


def compared(tables: Mapping[str, pd.DataFrame]) -> dict[str, pd.DataFrame]:
    """The run tables (runs, jobs, levels, interference, vl_levels) without search candidates'
    rows."""
    out = {}
    for key in RUN_TABLES:
        frame = tables[key]
        candidate = frame["policy"].map(is_candidate).astype(bool)  # bool even when empty: keeps the columns
        out[key] = frame[~candidate].reset_index(drop=True)
    return out


def without_candidates(iterations: IterationsFile) -> IterationsFile:
    return iterations.without(p for policies in iterations.present.values() for p in policies if is_candidate(p))


def write_results(out: Path, tables: dict[str, pd.DataFrame], iterations: IterationsFile, search: pd.DataFrame | None,
                  meta: dict[str, Any], report: bool = True) -> tuple[list[Path], dict[str, pd.DataFrame]]:
    """slowdown.parquet, policies.parquet, gpcnet.parquet (with GPCNeT canary jobs) and, with
    `report`, report.html (with figures/) in `out`: the files written and the analysis tables."""
    kept = compared(tables)
    kept_iterations = without_candidates(iterations)
    slow = slowdowns(kept["jobs"])
    # slowdown.parquet: the per-repetition rows, each with its (policy, job)'s mean and interval.
    results = {"slowdown": with_slowdown_intervals(slow), "policies": policy_summary(slow)}
    impact = gpcnet_table(kept_iterations, meta.get("base_scenario", {}), kept["jobs"])
    if len(impact):
        results["gpcnet"] = impact
    written = write_tables(results, out)
    if report:
        written.append(write_report(out, kept, kept_iterations, search, meta))
    return written, results


def gpcnet_table(iterations: IterationsFile, scenario: dict[str, Any], jobs: pd.DataFrame | None = None) -> pd.DataFrame:
    """GPCNeT's congestion impact of every GPCNeT canary job of the study, per policy and test
    (read a job and a policy at a time); with `jobs` (the jobs table), from the runs in which the
    canary completed only."""
    tests = canary_tests(scenario)

    def complete(job: str) -> set[str] | None:
        return None if jobs is None else set(jobs.loc[(jobs["job"] == job) & jobs["completed"].astype(bool), "run_id"])

    frames = [job_gpcnet_impact(iterations, job, job_tests, complete(job)) for job, job_tests in tests.items()
              if job in iterations.present]
    frames = [f for f in frames if len(f)]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def policy_table(tables: Mapping[str, pd.DataFrame], order: list[str] | None = None) -> pd.DataFrame:
    """Per policy (in `order`, the study's, when given): each job's mean slowdown, the total
    contention, its change against default and the repetitions complete of those run."""
    kept = compared(tables)
    slow = slowdowns(kept["jobs"])
    if slow.empty:
        return pd.DataFrame()
    # dropna=False: a job that never completed keeps its column, shown as "-", never dropped.
    per_job = slow.pivot_table(index="policy", columns="job", values="slowdown", aggfunc="mean", sort=False,
                               dropna=False)
    per_job.columns = [f"{job} slowdown" for job in per_job.columns]
    summary = policy_summary(slow).set_index("policy")
    per_job["total contention us"] = summary["total_contention_us"]
    per_job["vs default %"] = summary["vs_default_pct"]
    # A policy that did not complete every repetition averages over an easier subset: shown.
    per_job["complete"] = [f"{c}/{n}" for c, n in zip(summary["complete_repetitions"], summary["repetitions"],
                                                       strict=True)]
    index = [p for p in order if p in summary.index] if order else list(summary.index)
    return per_job.reindex(index).rename_axis("policy").reset_index()
