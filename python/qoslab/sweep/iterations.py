"""A study's iterations table (every rank's every iteration of every job in every run: by far
its largest, millions of rows for a few dozen runs) kept on disk: iterations.parquet is written
run by run as the study's tables are built, and read a slice at a time (one job under one policy,
or the columns a figure needs), so the driver never holds the whole table (issue 18)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from qoslab.sweep.execute import empty_iterations
from qoslab.sweep.outputs import replacing

ITERATIONS = "iterations"
ITERATIONS_FILE = f"{ITERATIONS}.parquet"
# The run's keys put in front of each of its rows, and their types.
KEY_TYPES = {"run_id": pa.string(), "repetition": pa.int64(), "policy": pa.string(), "mode": pa.string()}
# Rows gathered before a row group is written: few enough to stay small in memory, enough that
# a study of many small runs does not write a row group per run.
ROW_GROUP_ROWS = 1 << 16


def schema() -> pa.Schema:
    return pa.schema([pa.field(key, kind) for key, kind in KEY_TYPES.items()] + list(empty_iterations().schema))


class IterationsFile:
    """iterations.parquet of a study: which jobs have rows under which policies (in the order
    they were written), and reads of a slice: a job, its rows under some policies, some columns.
    `excluded`: policies left out of every read
    (search candidates, which the comparison does not show). `study_jobs`: every job of the
    study's runs, recorded or not, so that reading a job the study never ran is an error rather
    than an empty table (None: not known, no check)."""

    def __init__(self, path: Path, present: dict[str, dict[str, int]], excluded: frozenset[str] = frozenset(),
                 study_jobs: frozenset[str] | None = None):
        self.path = Path(path)
        self._present = present  # job -> policy -> its first repetition, in the order written
        self.excluded = excluded
        self.study_jobs = study_jobs

    @property
    def present(self) -> dict[str, list[str]]:
        """job -> the policies it has rows under, both in the order the rows were written."""
        present = {job: [p for p in policies if p not in self.excluded] for job, policies in self._present.items()}
        return {job: policies for job, policies in present.items() if policies}

    def first_repetition(self, job: str, policies: Iterable[str] | None = None) -> int | None:
        """The lowest repetition with rows of `job` under `policies` (every one when None)."""
        wanted = set(self.present.get(job, [])) if policies is None else set(policies)
        firsts = [first for policy, first in self._present.get(job, {}).items()
                  if policy in wanted and policy not in self.excluded]
        return min(firsts) if firsts else None

    @property
    def empty(self) -> bool:
        return not self.present

    def jobs(self) -> list[str]:
        return list(self.present)

    @classmethod
    def of_frame(cls, path: Path, frame: pd.DataFrame) -> IterationsFile:
        """`frame` (rows with the run's keys in front, as `read` gives them) written to `path` as
        a study's iterations; columns it lacks are null."""
        target = schema()
        table = pa.Table.from_pandas(frame, preserve_index=False)
        columns = [table.column(f.name).cast(f.type) if f.name in table.column_names else pa.nulls(len(frame), f.type)
                   for f in target]
        with replacing(path) as temp:
            pq.write_table(pa.Table.from_arrays(columns, schema=target), temp)
        firsts = frame.groupby(["job", "policy"], sort=False)["repetition"].min()
        present: dict[str, dict[str, int]] = {}
        for (job, policy), first in firsts.items():
            present.setdefault(str(job), {})[str(policy)] = int(first)
        return cls(path, present)

    def without(self, policies: Iterable[str]) -> IterationsFile:
        return IterationsFile(self.path, self._present, self.excluded | frozenset(policies), self.study_jobs)

    def read(self, job: str | None = None, policies: Iterable[str] | None = None,
             columns: list[str] | None = None, repetition: int | None = None) -> pd.DataFrame:
        """The rows of `job` (every job when None) under `policies` (every one when None), less
        the excluded policies, of one `repetition` when given, in the order they were written;
        only `columns` when given. A job whose iterations were not recorded (record_iterations =
        false) has no rows; a job the study does not have is a ValueError naming its jobs."""
        if job is not None and self.study_jobs is not None and job not in self.study_jobs:
            raise ValueError(f"no job {job!r} in this study (its jobs: {', '.join(sorted(self.study_jobs)) or 'none'})")
        present = self.present
        jobs = [job] if job is not None else list(present)
        known = {p for j in jobs for p in present.get(j, [])}
        wanted = sorted(known if policies is None else known & set(policies))
        if not wanted:
            return schema().empty_table().select(columns or schema().names).to_pandas()
        filters: list[Any] = [("policy", "in", wanted)]
        if job is not None:
            filters.append(("job", "=", job))
        if repetition is not None:
            filters.append(("repetition", "=", repetition))
        return pq.read_table(self.path, columns=columns, filters=filters, schema=schema()).to_pandas()


def write_iterations(path: Path, runs: Iterable[tuple[dict[str, Any], pa.Table]],
                     study_jobs: Callable[[], Iterable[str]] | None = None) -> IterationsFile:
    """Writes each (run row, its iterations) in turn to `path` (aside, renamed into place once
    whole), the run's keys in front of its rows; returns the file's reader. `study_jobs`, asked once the runs are written: every job
    of those runs (IterationsFile)."""
    target = schema()
    base = empty_iterations().schema
    present: dict[str, dict[str, int]] = {}
    pending: list[pa.Table] = []
    pending_rows = 0
    with replacing(path) as temp, pq.ParquetWriter(temp, target) as writer:
        for run, table in runs:
            if not table.num_rows:
                continue
            table = table.select(base.names).cast(base)
            rows = table.num_rows
            keys = [pa.repeat(pa.scalar(run[key], kind), rows) for key, kind in KEY_TYPES.items()]
            pending.append(pa.Table.from_arrays(keys + table.columns, schema=target))
            pending_rows += rows
            for job in table.column("job").unique().to_pylist():
                policies = present.setdefault(job, {})
                policies[run["policy"]] = min(policies.get(run["policy"], run["repetition"]), run["repetition"])
            if pending_rows >= ROW_GROUP_ROWS:
                writer.write_table(pa.concat_tables(pending))
                pending, pending_rows = [], 0
        if pending:
            writer.write_table(pa.concat_tables(pending))
    return IterationsFile(path, present, study_jobs=None if study_jobs is None else frozenset(study_jobs()))


class StudyTables(Mapping[str, Any]):
    """A finished study's tables by name: the small ones in memory and `iterations`, read from
    its file only when asked for by name (whole: as a DataFrame, like the others); `.iterations`
    reads it by slice."""

    def __init__(self, frames: Mapping[str, Any], iterations: IterationsFile):
        self._frames = dict(frames)
        self.iterations = iterations

    def __getitem__(self, name: str) -> Any:
        if name == ITERATIONS:
            return self.iterations.read()
        return self._frames[name]

    def __iter__(self) -> Iterator[str]:
        yield from self._frames
        if ITERATIONS not in self._frames:
            yield ITERATIONS

    def __len__(self) -> int:
        return len(self._frames) + (ITERATIONS not in self._frames)
