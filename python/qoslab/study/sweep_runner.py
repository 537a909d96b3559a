"""Runs a study with a [[sweep]]: every point a whole study of its own (study/runner.py), their
runs through one run store and one set of stages (points in chunks of about CHUNK_RUNS first-stage
runs, each chunk's first stages in one batch, so a cluster stays busy across points), each
point's tables (and with point_reports its figures and report) in its own folder
`points/point=N/` (a Hive-partitioned dataset: `sweep_dataset` reads any table of every point
lazily), and across points the small tables `sweep.parquet` (per point and policy),
`sweep_slowdown.parquet` (per point, policy and job) and, with GPCNeT canaries,
`sweep_gpcnet.parquet` (per point, policy and canary test: GPCNeT's congestion impact factors).
The driver holds one chunk's specs and at most its points' tables at a time, so its memory does not grow
with the number of points."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from concurrent.futures import Future, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from rich.console import Console

from qoslab.study.model import Study
from qoslab.study.outcome import OutcomeView
from qoslab.study.runner import StudyOutcome, StudyRunner, finish_folder
from qoslab.study.stages import Stages, StageWaiting
from qoslab.sweep.execute import RunSpec
from qoslab.sweep.executors import Executor
from qoslab.sweep.folder import POINTS, StudyFolder, study_identity
from qoslab.sweep.outputs import check_finished, finishing, write_text
from qoslab.sweep.store import RunStore, write_tables


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
    notes: list[str] = field(default_factory=list)  # of its stored runs (RunStore.notes): printed, and in sweep.json

    def dataset(self, table: str) -> Any:
        """Every point's `table` (runs, jobs, iterations, slowdown, ...) as one pyarrow dataset,
        read lazily, with the point as a column."""
        return sweep_dataset(self.out, table)


def sweep_dataset(out: str | Path, table: str) -> Any:
    """The points' `table`.parquet files under `out`/points as one lazily read pyarrow dataset
    (column `point`, the index in sweep_points). A sweep stopped while it rewrote its points is
    refused (FolderError), as its points may mix old and new results."""
    import pyarrow.dataset as ds

    check_finished(Path(out))
    root = Path(out) / POINTS
    files = sorted(str(p) for p in root.glob(f"point=*/{table}.parquet"))
    if not files:
        raise FileNotFoundError(f"{root}: no point has a {table}.parquet")
    return ds.dataset(files, format="parquet", partitioning=ds.partitioning(flavor="hive"), partition_base_dir=str(root))


# First-stage runs in flight at once: enough to keep a cluster's workers busy across points,
# few enough that the driver's memory (each spec holds its scenario) stays bounded.
CHUNK_RUNS = 512


class SweepRunner:
    def __init__(self, study: Study, out: str | Path, executor: Executor, console: Console | None = None, progress: bool = True,
                 task: tuple[int, int] | None = None, collect: bool = False):
        self.study = study
        self.out = Path(out)
        self.executor = executor
        self.console = console or Console(stderr=True)
        self.stages = Stages(RunStore(self.out / "runs"), executor, self.console, progress, task, collect)
        self.points = study.points()
        self.keys = [axis.key for axis in study.sweep]
        self._summary: list[pd.DataFrame] = []
        self._slowdown: list[pd.DataFrame] = []
        self._gpcnet: list[pd.DataFrame] = []
        self._failed: list[dict[str, Any]] = []
        self._errors: dict[int, str] = {}
        self._total = 0
        self._asked: dict[str, None] = {}  # every point's runs, for the notes on them (RunStore.notes)

    def run(self) -> SweepOutcome | None:
        """Runs the points chunk by chunk (each chunk's first stages in one batch), finishing each
        point as its runs are done; an array task runs its share and writes no tables (None)."""
        # What places and builds the runs: the base scenario, the points and the seeds.
        defining = {"base": self.study.point_data(None), "sweep": self.points, "seeds": self.study.seed_list()}
        identity = study_identity("policies-sweep", self.study.title(), self.study.source, defining,
                                  base=defining["base"])
        blocked: list[StageWaiting] = []
        with StudyFolder(self.out, identity, shared=self.stages.task is not None):
            if self.stages.task is not None:
                for chunk in self._chunks():
                    blocked += self._run_chunk(chunk)
                if blocked:  # later stages this task could not start: the array must run again
                    raise StageWaiting(f"later stages of {len(blocked)} sweep point(s)",
                                       sum(w.missing for w in blocked), self.stages.ran)
                return None  # an array task: `--collect` builds the tables once every task has run
            # Marked from the first point's folder rewritten to the sweep's tables: stopped in
            # between, its points and tables differ (outputs.finishing).
            with finishing(self.out, self.study.source):
                self._drop_points_beyond()
                for chunk in self._chunks():
                    self._run_chunk(chunk)
                return self._finish()

    def _drop_points_beyond(self) -> None:
        """The folders of points this sweep no longer has (a value taken out of a [[sweep]] list
        since the folder was written), so that no reader of points/ takes them for its own."""
        for folder in (self.out / POINTS).glob("point=*"):
            index = folder.name.partition("=")[2]
            if index.isdigit() and int(index) >= len(self.points) and folder.is_dir():
                shutil.rmtree(folder)

    def _chunks(self) -> Iterator[list[tuple[int, StudyRunner, list[RunSpec]]]]:
        chunk: list[tuple[int, StudyRunner, list[RunSpec]]] = []
        runs = 0
        for index, point in enumerate(self.points):
            runner = StudyRunner(self.study, point_folder(self.out, index), self.executor, self.console, point=point,
                                 stages=self.stages)
            specs = runner.first_specs()
            chunk.append((index, runner, specs))
            runs += len(specs)
            if runs >= CHUNK_RUNS:
                yield chunk
                chunk, runs = [], 0
        if chunk:
            yield chunk

    def _run_chunk(self, chunk: list[tuple[int, StudyRunner, list[RunSpec]]]) -> list[StageWaiting]:
        """The chunk's first stages together, then each point's later stages, then (unless an
        array task) each point's results; what an array task could not start."""
        first, last = chunk[0][0], chunk[-1][0]
        self.stages.waiting = None  # points are independent: one chunk's missing runs do not hold another's
        self.stages.run([spec for _, _, specs in chunk for spec in specs],
                        f"sweep points {first}-{last} of {len(self.points)}: jobs alone and policies")
        first_done = self.stages.waiting
        blocked = []
        for _, runner, _ in chunk:
            if not runner.has_later():
                continue
            if first_done is not None:
                blocked.append(first_done)
                continue
            try:
                runner.run_later()
            except StageWaiting as waiting:
                blocked.append(waiting)
            self.stages.waiting = None
        if self.stages.task is None:
            self._finish_points([(index, runner) for index, runner, _ in chunk])
        return blocked

    def _finish_points(self, points: list[tuple[int, StudyRunner]]) -> None:
        """Each point's folder, in point order. With local workers they write them, all at once
        (finishing a point costs more than its short runs: on the driver alone it would set the
        pace of a sweep); a point whose worker failed is finished here, which repeats a real error
        where it happened. Every folder is written before the next chunk's runs start, so no
        worker reads a run the driver is storing again."""
        report = self.study.point_reports
        for index, _ in points:
            # Written whole each time: nothing of what the folder held for another value (a search
            # or GPCNeT table, figures) is left beside the new tables.
            shutil.rmtree(point_folder(self.out, index), ignore_errors=True)
        submit = getattr(self.executor, "submit", None)
        finished: list[tuple[int, dict[str, pd.DataFrame]]] = []  # each point's summary tables, for _add_rows
        if submit is None:
            for index, runner in points:
                finished.append(self._finish_point(index, runner.finish(report)))
            self._add_rows(finished)
            return
        futures: list[Future[StudyOutcome] | None] = [submit(finish_folder, runner.folder_task(report))
                                                     for _, runner in points]
        try:
            for i, (index, runner) in enumerate(points):
                future, futures[i] = futures[i], None  # its outcome is let go once taken
                assert future is not None
                try:
                    outcome = future.result()
                except Exception as error:  # noqa: BLE001 - done again here: the same error, if it is one
                    self.console.print(f"point {index}: its worker failed ({type(error).__name__}: {error}); "
                                       "writing its folder here", style="yellow")
                    outcome = runner.finish(report)
                finished.append(self._finish_point(index, outcome))
            self._add_rows(finished)
        finally:
            # Stopped early (Ctrl-C, an error): no worker goes on writing after the study's folder is let go.
            left = [f for f in futures if f is not None]
            for future in left:
                future.cancel()
            wait(left)

    def _finish_point(self, index: int, outcome: StudyOutcome) -> tuple[int, dict[str, pd.DataFrame]]:
        """The point's folder is written (a report of its own only with point_reports): its runs,
        failures and report error are counted; what is kept of it are the tables its chunk's
        summary rows come from (the rest of its outcome is let go)."""
        self._total += outcome.runs_total
        self._failed += [{"point": index, **row} for row in outcome.failed]
        self._asked.update(dict.fromkeys(outcome.run_ids))
        if outcome.report_error:
            self._errors[index] = outcome.report_error
        return index, {name: outcome.tables[name] for name in SUMMARY_TABLES if name in outcome.tables}

    def _add_rows(self, finished: list[tuple[int, dict[str, pd.DataFrame]]]) -> None:
        """A chunk's summary rows (its points' policies, per-job slowdowns and GPCNeT factors,
        each with the point and its swept values), built once for the chunk: pandas on each
        point's few rows alone cost the driver more than the point's runs (about 10 ms a point)."""
        for name, into in zip(SUMMARY_TABLES, (self._summary, self._slowdown, self._gpcnet)):
            parts = [(index, tables[name]) for index, tables in finished if name in tables]
            if not parts:
                continue
            points = np.repeat([index for index, _ in parts], [len(table) for _, table in parts])
            frame = pd.concat([table for _, table in parts], ignore_index=True).assign(point=points)
            if name == "slowdown":  # per (point, policy, job): the mean over repetitions and its interval
                per_job = frame.groupby(["point", "policy", "job"], sort=False, as_index=False).first()
                frame = per_job[[c for c in SLOWDOWN_COLUMNS if c in frame.columns] + ["point"]]
            cells = {key: {index: _cell(self.points[index][key]) for index, _ in parts} for key in self.keys}
            into.append(frame.assign(**{key: frame["point"].map(by_point) for key, by_point in cells.items()}))

    def _finish(self) -> SweepOutcome:
        front = ["point", *self.keys]
        tables = {
            "sweep": _front(pd.concat(self._summary, ignore_index=True), front) if self._summary
            else pd.DataFrame(columns=front),
            "sweep_slowdown": _front(pd.concat(self._slowdown, ignore_index=True), front) if self._slowdown
            else pd.DataFrame(columns=front),
            "sweep_points": pd.DataFrame([{"point": i, **{k: _cell(p[k]) for k in self.keys}}
                                          for i, p in enumerate(self.points)]),
        }
        if self._gpcnet:  # points x policies x canary tests, side by side (GPCNeT's CIF as it prints them)
            tables["sweep_gpcnet"] = _front(pd.concat(self._gpcnet, ignore_index=True), front)
        write_tables(tables, self.out)
        notes = self.stages.store.notes(self._asked)  # over all points at once: each said once
        meta = {"name": self.study.title(), "source": self.study.source, "sweep_mode": self.study.sweep_mode,
                "keys": self.keys, "points": self.points, "runs": self._total, "warnings": notes}
        write_text(self.out / "sweep.json", json.dumps(meta, indent=2, default=str) + "\n")
        from qoslab.report.sweep import write_sweep_report

        write_sweep_report(self.out, tables, meta)
        return SweepOutcome(self.out, tables, self._total, self.stages.reused, self._failed, self.keys, self._errors,
                            notes)


# What a point's summary rows come from: its per-policy table, its per-repetition slowdowns, its
# GPCNeT factors.
SUMMARY_TABLES = ("policies", "slowdown", "gpcnet")
# Per (policy, job) of a point: the mean slowdown over repetitions and its interval.
SLOWDOWN_COLUMNS = ("policy", "job", "slowdown_mean", "slowdown_ci95_low", "slowdown_ci95_high", "slowdown_repetitions")


def _cell(value: Any) -> Any:
    """A swept value as a table cell: numbers and strings as they are, tables and lists as JSON."""
    return value if isinstance(value, (int, float, str, bool)) else json.dumps(value, sort_keys=True)


def _front(frame: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    return frame[columns + [c for c in frame.columns if c not in columns]]
