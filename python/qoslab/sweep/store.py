"""The resumable store of a study's finished runs: one folder per run, written whole or not at
all (written aside, then renamed), so an interrupted study loses nothing it finished and a
resumed one repeats nothing it has."""

from __future__ import annotations

import json
import os
import shutil
import socket
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from qoslab.errors import DamagedRun
from qoslab.sweep.execute import RunRecord, empty_iterations
from qoslab.sweep.iterations import IterationsFile, write_iterations

RECORD = "record.json"
ITERATIONS = "iterations.parquet"


class RunStore:
    def __init__(self, root: str | Path, create: bool = True):
        """The store at `root`, created unless `create` is False (a worker storing its run: a store
        deleted meanwhile is not made again). Its path is absolute: the worker processes that
        store runs or read them may have started in another directory."""
        self.root = Path(root).absolute()
        if create:
            self.root.mkdir(parents=True, exist_ok=True)
        self.damaged: list[str] = []  # run folders found unreadable (and so run again)

    def has(self, run_id: str) -> bool:
        return (self.root / run_id / RECORD).is_file()

    def finished(self, run_id: str) -> bool:
        """Stored, readable and not an error: errors (a bug, a lost worker) and damaged folders
        are run again on resume; deadlocks and time limits are results and are kept."""
        if not self.has(run_id):
            return False
        try:
            return self.get(run_id)["run"]["status"] != "error"
        except DamagedRun:
            self.damaged.append(run_id)
            return False

    def put(self, record: RunRecord) -> None:
        """Stores the record whole or not at all: written aside, then renamed into place. Whatever
        fails on the way leaves no staging folder behind and raises, except a rename that finds
        the run stored finished by another process meanwhile (a worker that went on with it
        after its stage stopped): that one is kept and this copy dropped."""
        run_id = record["run"]["run_id"]
        final = self.root / run_id
        # Process ids repeat across the nodes of an array job: the host's name keeps stagings apart.
        staging = self.root / f".staging-{run_id}-{socket.gethostname()}-{os.getpid()}"
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir()
        try:
            pq.write_table(record["iterations"], staging / ITERATIONS)
            meta = {key: record[key] for key in ("run", "model", "jobs", "levels", "scenario", "interference",
                                                 "vl_levels", "warnings") if key in record}
            # One line: an indented dump takes json's pure-Python encoder, about 2 ms a run on the driver.
            (staging / RECORD).write_text(json.dumps(meta, allow_nan=True) + "\n")
            if final.exists():  # a failed run stored earlier and now re-run
                try:
                    shutil.rmtree(final)
                except FileNotFoundError:  # removed by another writer meanwhile
                    pass
            try:
                os.replace(staging, final)
            except OSError:
                if not self.finished(run_id):
                    raise
        finally:
            shutil.rmtree(staging, ignore_errors=True)  # gone once renamed; else nothing half-written stays

    def notes(self, run_ids: Iterable[str]) -> list[str]:
        """What the study should be told of these stored runs: the warnings their runs gave (a
        trace's skipped calls), each once, and how many were simulated before the current model
        (qoslab._version.MODEL_VERSION), whose results may differ from a run now."""
        from qoslab._version import MODEL_VERSION, model_before

        warnings: dict[str, None] = {}
        older = 0
        for run_id in run_ids:
            try:
                meta = json.loads((self.root / run_id / RECORD).read_text())
            except (OSError, ValueError):
                continue  # damaged: get() names it where the tables are built
            warnings.update(dict.fromkeys(meta.get("warnings", [])))
            older += model_before(str(meta.get("model", ""))) and meta.get("run", {}).get("status") != "error"
        notes = [f"runs: {w}" for w in warnings]
        if older:
            notes.append(f"{older} stored run(s) were simulated before the model change of {MODEL_VERSION} (see the "
                         "docs' change notes) and are reused as they are: their results may differ from a run now; "
                         "delete the folder's runs/ to run them again")
        return notes

    def get(self, run_id: str) -> RunRecord:
        """The stored record; DamagedRun (naming the folder) if it cannot be read whole."""
        folder = self.root / run_id
        try:
            meta = json.loads((folder / RECORD).read_text())
            if not isinstance(meta, dict) or not isinstance(meta.get("run"), dict) or "status" not in meta["run"]:
                raise ValueError(f"{RECORD} is not a run record")
            path = folder / ITERATIONS
            meta["iterations"] = pq.read_table(path) if path.exists() else empty_iterations()
        except (OSError, ValueError, pa.ArrowException) as error:  # JSONDecodeError and ArrowInvalid are ValueErrors
            raise DamagedRun(f"{folder}: damaged run folder ({type(error).__name__}: {error}); delete it, or run "
                             "the study again to redo it") from None
        return meta

    def tables(self, run_ids: Iterable[str], iterations_to: Path,
               copies: Sequence[tuple[str, str]] = ()) -> tuple[dict[str, pd.DataFrame], IterationsFile]:
        """runs, jobs, levels, interference and vl_levels of the given runs, tidy, and their
        iterations written to `iterations_to` run by run (iterations.py: the driver never holds
        them all). `copies`: (policy, name) pairs whose runs are listed again under `name`, after
        all the others (a search's best candidate under the search's name)."""
        ids = list(run_ids)
        rows: dict[str, list[dict[str, Any]]] = {name: [] for name in COLUMNS}

        def add(record: RunRecord, policy: str) -> None:
            run = {**record["run"], "policy": policy}
            rows["runs"].append(run)
            # interference and vl_levels are absent in runs stored before they existed
            for name in ("jobs", "levels", "interference", "vl_levels"):
                rows[name].extend({**row, "policy": policy} for row in record.get(name, []))

        def records() -> Iterator[tuple[dict[str, Any], pa.Table]]:
            by_policy: dict[str, list[str]] = {}
            for run_id in ids:
                record = self.get(run_id)
                add(record, record["run"]["policy"])
                by_policy.setdefault(record["run"]["policy"], []).append(run_id)
                yield record["run"], record["iterations"]
            for policy, name in copies:
                for run_id in by_policy.get(policy, []):
                    record = self.get(run_id)
                    add(record, name)
                    yield {**record["run"], "policy": name}, record["iterations"]

        iterations = write_iterations(iterations_to, records(), lambda: (str(row["job"]) for row in rows["jobs"]))
        return {name: pd.DataFrame(rows[name], columns=columns) for name, columns in COLUMNS.items()}, iterations


RUN_KEYS = ["run_id", "repetition", "seed", "policy", "mode", "alone_job"]
RUN_COLUMNS = RUN_KEYS + ["status", "error", "wall_seconds", "sim_time_ns", "packet_hops"]
JOB_COLUMNS = RUN_KEYS + [
    "job", "workload", "nodes", "ranks", "runtime_us", "completed", "runs_completed", "bytes_sent",
    "mpi_wait_fraction", "sl", "sl_policy", "bytes_by_sl", "prioritized_ranks",
]
LEVEL_COLUMNS = RUN_KEYS + ["level", "direction", "bytes", "links_used", "busy_ns"]
INTERFERENCE_COLUMNS = RUN_KEYS + ["kind", "victim", "culprit", "level", "direction", "vl", "wait_ns"]
VL_LEVEL_COLUMNS = RUN_KEYS + ["level", "direction", "vl", "bytes", "links", "busy_ns"]
COLUMNS = {"runs": RUN_COLUMNS, "jobs": JOB_COLUMNS, "levels": LEVEL_COLUMNS, "interference": INTERFERENCE_COLUMNS,
           "vl_levels": VL_LEVEL_COLUMNS}


def write_tables(tables: dict[str, pd.DataFrame], out: Path) -> list[Path]:
    """Each table as <name>.parquet in out, each whole or not at all (outputs.replacing)."""
    from qoslab.sweep.outputs import replacing

    written = []
    for name, frame in tables.items():
        path = out / f"{name}.parquet"
        with replacing(path) as temp:
            pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), temp)
        written.append(path)
    return written
