"""Runs a study with a [[sweep]]: every point a whole study of its own (study/runner.py), their
runs through one run store and one set of stages (every point's first stage in one batch, so a
cluster stays busy across points), each point's tables, figures and report in its own folder
`points/point=N/` (a Hive-partitioned dataset: `sweep_dataset` reads any table of every point
lazily), and across points the small tables `sweep.parquet` (per point and policy) and
`sweep_slowdown.parquet` (per point, policy and job). The driver holds one point's tables at a
time, so its memory does not grow with the number of points."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
from rich.console import Console

from qoslab.scenario import run_identity
from qoslab.study.model import Study
from qoslab.study.outcome import OutcomeView
from qoslab.study.runner import StudyRunner
from qoslab.study.stages import Stages
from qoslab.sweep.executors import Executor
from qoslab.sweep.folder import StudyFolder, study_identity
from qoslab.sweep.store import RunStore, write_tables

POINTS = "points"


def point_folder(out: Path, index: int) -> Path:
    return Path(out) / POINTS / f"point={index}"


@dataclass(repr=False)
class SweepOutcome(OutcomeView):
    out: Path
    tables: dict[str, pd.DataFrame]  # sweep (per point and policy), sweep_slowdown, sweep_points
    runs_total: int
    runs_reused: int
    failed: list[dict[str, Any]] = field(default_factory=list)
    keys: list[str] = field(default_factory=list)
    report_errors: dict[int, str] = field(default_factory=dict)  # point -> what failed in its report

    def dataset(self, table: str) -> Any:
        """Every point's `table` (runs, jobs, iterations, slowdown, ...) as one pyarrow dataset,
        read lazily, with the point as a column."""
        return sweep_dataset(self.out, table)


def sweep_dataset(out: str | Path, table: str) -> Any:
    """The points' `table`.parquet files under `out`/points as one lazily read pyarrow dataset
    (column `point`, the index in sweep_points)."""
    import pyarrow.dataset as ds

    root = Path(out) / POINTS
    files = sorted(str(p) for p in root.glob(f"point=*/{table}.parquet"))
    if not files:
        raise FileNotFoundError(f"{root}: no point has a {table}.parquet")
    return ds.dataset(files, format="parquet", partitioning=ds.partitioning(flavor="hive"), partition_base_dir=str(root))


class SweepRunner:
    def __init__(self, study: Study, out: str | Path, executor: Executor, console: Console | None = None, progress: bool = True,
                 task: tuple[int, int] | None = None, collect: bool = False):
        self.study = study
        self.out = Path(out)
        self.console = console or Console(stderr=True)
        self.stages = Stages(RunStore(self.out / "runs"), executor, self.console, progress, task, collect)
        self.points = study.points()
        self.runners = [StudyRunner(study, point_folder(self.out, i), executor, self.console, point=point,
                                    stages=self.stages) for i, point in enumerate(self.points)]

    def run(self) -> SweepOutcome | None:
        defining = {"sweep": self.points,
                    "points": [[run_identity(rep.scenario) for rep in r.plan.repetitions] for r in self.runners]}
        identity = study_identity("policies-sweep", self.study.title(), self.study.source, defining)
        with StudyFolder(self.out, identity, shared=self.stages.task is not None):
            first = [spec for runner in self.runners for spec in runner.first_specs()]
            self.stages.run(first, f"jobs alone and policies, {len(self.points)} sweep points")
            for runner in self.runners:
                runner.run_later()
            if self.stages.task is not None:
                return None  # an array task: `--collect` builds the tables once every task has run
            return self._finish()

    def _finish(self) -> SweepOutcome:
        keys = [axis.key for axis in self.study.sweep]
        summary, slowdown, failed, errors = [], [], [], {}
        total = 0
        for index, runner in enumerate(self.runners):
            # The point's folder; its tables are dropped below. A report per point is asked for.
            outcome = runner.finish(report=self.study.point_reports)
            total += outcome.runs_total
            failed += [{"point": index, **row} for row in outcome.failed]
            if outcome.report_error:
                errors[index] = outcome.report_error
            values = {"point": index, **{key: _cell(self.points[index][key]) for key in keys}}
            if "policies" in outcome.tables:
                summary.append(outcome.tables["policies"].assign(**values))
            if "slowdown" in outcome.tables:
                per_job = (outcome.tables["slowdown"].groupby(["policy", "job"], sort=False, as_index=False)
                           .first()[[c for c in SLOWDOWN_COLUMNS if c in outcome.tables["slowdown"].columns]])
                slowdown.append(per_job.assign(**values))
            del outcome
        front = ["point", *keys]
        tables = {
            "sweep": _front(pd.concat(summary, ignore_index=True), front) if summary else pd.DataFrame(columns=front),
            "sweep_slowdown": _front(pd.concat(slowdown, ignore_index=True), front) if slowdown else pd.DataFrame(columns=front),
            "sweep_points": pd.DataFrame([{"point": i, **{k: _cell(p[k]) for k in keys}} for i, p in enumerate(self.points)]),
        }
        write_tables(tables, self.out)
        meta = {"name": self.study.title(), "source": self.study.source, "sweep_mode": self.study.sweep_mode,
                "keys": keys, "points": self.points, "runs": total}
        (self.out / "sweep.json").write_text(json.dumps(meta, indent=2, default=str) + "\n")
        from qoslab.report.sweep import write_sweep_report

        write_sweep_report(self.out, tables, meta)
        return SweepOutcome(self.out, tables, total, self.stages.reused, failed, keys, errors)


# Per (policy, job) of a point: the mean slowdown over repetitions and its interval.
SLOWDOWN_COLUMNS = ("policy", "job", "slowdown_mean", "slowdown_ci95_low", "slowdown_ci95_high", "slowdown_repetitions")


def _cell(value: Any) -> Any:
    """A swept value as a table cell: numbers and strings as they are, tables and lists as JSON."""
    return value if isinstance(value, (int, float, str, bool)) else json.dumps(value, sort_keys=True)


def _front(frame: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    return frame[columns + [c for c in frame.columns if c not in columns]]
