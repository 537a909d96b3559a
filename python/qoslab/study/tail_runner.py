"""Runs a tail-latency study (its runs come from tail_plan.py) in one stage (stages.py): each run is
stored the moment it finishes (an interrupted study resumes), then the tables and the report."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
from rich.console import Console
from rich.text import Text

from qoslab._version import __version__
from qoslab.analysis.tail import b_correlations
from qoslab.study.outcome import OutcomeView
from qoslab.study.stages import Stages
from qoslab.study.tail_model import TailStudy
from qoslab.study.tail_plan import NO_BACKGROUND, Snapshot, TailPlan
from qoslab.sweep.execute import RunSpec
from qoslab.sweep.executors import Executor
from qoslab.sweep.folder import StudyFolder, study_identity
from qoslab.sweep.outputs import finishing
from qoslab.sweep.store import RunStore, write_tables

__all__ = ["NO_BACKGROUND", "Snapshot", "TailOutcome", "TailStudyRunner", "tail_tables"]


@dataclass(repr=False)
class TailOutcome(OutcomeView):
    out: Path
    tables: dict[str, pd.DataFrame]
    runs_total: int
    runs_reused: int
    failed: list[dict[str, Any]] = field(default_factory=list)
    written: list[Path] = field(default_factory=list)
    report_error: str | None = None
    notes: list[str] = field(default_factory=list)  # of its stored runs (RunStore.notes): printed


class TailStudyRunner(TailPlan):
    def __init__(self, study: TailStudy, out: str | Path, executor: Executor, console: Console | None = None,
                 progress: bool = True, task: tuple[int, int] | None = None, collect: bool = False):
        super().__init__(study)
        self.task, self.collect = task, collect
        self.out, self.executor = Path(out), executor
        self.console = console or Console(stderr=True)
        self.show_progress = progress
        self.store = RunStore(self.out / "runs")

    # -- running ------------------------------------------------------------------------------

    def run(self) -> TailOutcome | None:
        """Runs the study in its --out folder, which it holds (folder.py) until the report is
        written; as an array task, only the task's share, and no tables (None)."""
        study = self.study
        background = study.background.model_dump(mode="json")
        if background["scale_nodes"] is None:  # absent when unset: folders written before the key still resume
            del background["scale_nodes"]
        if not background["assume_zero_wait"]:  # likewise
            del background["assume_zero_wait"]
        defining: dict[str, Any] = {"base": self.data, "background": background, "heuristic": study.heuristic}
        if study.target is not None:
            defining["target"] = study.target.model_dump(mode="json")
        else:
            defining["targets"] = [t.model_dump(mode="json") for t in self.targets]
        identity = study_identity("tail-latency", study.title(), study.source, defining)
        with StudyFolder(self.out, identity, shared=self.task is not None):
            return self._run()

    def _run(self) -> TailOutcome | None:
        for warning in self.warnings():
            self.console.print(Text(f"warning: {warning}", style="yellow"))
        specs, plan = self.plan()
        self.stages = stages = Stages(self.store, self.executor, self.console, self.show_progress, self.task, self.collect)
        stages.run(specs, "tail-latency runs")
        if self.task is not None:
            return None  # an array task: `--collect` builds the tables once every task has run
        with finishing(self.out, self.study.source):
            return self._finish(specs, plan, stages.reused)

    def _finish(self, specs: list[RunSpec], plan: pd.DataFrame, reused: int) -> TailOutcome:
        tables = tail_tables(self.store, plan)
        tables["tail_correlations"] = b_correlations(tables["tail_iterations"], self.study.tail_quantile)
        written = write_tables(tables, self.out)
        failed = tables["tail_runs"][tables["tail_runs"]["status"] != "completed"].to_dict("records")
        notes = self.store.notes(spec.run_id for spec in specs)
        outcome = TailOutcome(self.out, tables, len(specs), reused, failed, written, notes=notes)
        try:
            from qoslab.report.tail import write_tail_report

            meta = {"name": self.study.title(), "description": self.study.description, "qoslab_version": __version__,
                    "heuristic": self.study.heuristic, "tail_quantile": self.study.tail_quantile,
                    "fabric": self.base.topology.model_dump(), "targets": [t.model_dump() for t in self.targets],
                    "figure_formats": list(self.study.figure_formats)}
            outcome.written.append(write_tail_report(self.out, tables, meta))
        except OSError:
            raise  # the environment (a full disk, a file-size limit), not a bug: the command fails, naming the file
        except Exception as error:  # noqa: BLE001 - the tables are written; a report bug must not lose them
            outcome.report_error = f"{type(error).__name__}: {error}"
        return outcome


def tail_tables(store: RunStore, plan: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """tail_runs (one row per run: plan + status) and tail_iterations (one row per measured
    iteration: its latency is the slowest rank's time, as a collective completes for all). Both
    name each run's target (measured job)."""
    runs, samples = [], []
    for row in plan.to_dict("records"):
        if not isinstance(row["run_id"], str):  # the measured job could not be placed
            runs.append({**row, "status": "not placed"})
            continue
        record = store.get(row["run_id"]) if store.has(row["run_id"]) else None
        status = record["run"]["status"] if record else "missing"
        runs.append({**row, "status": status, "error": (record["run"]["error"] if record else "run not stored")})
        if record is None or status != "completed":
            continue
        frame = record["iterations"].to_pandas()
        frame = frame[frame["job"] == row["target"]]
        if "run" in frame.columns:
            frame = frame[frame["run"] == 0]
        per_iteration = frame.groupby("iteration")["time_ns"].max().reset_index()
        per_iteration = per_iteration.rename(columns={"time_ns": "latency_ns"})
        for key in ("target", "snapshot", "locality", "routing", "b"):
            per_iteration[key] = row[key]
        samples.append(per_iteration)
    columns = ["target", "snapshot", "locality", "routing", "b", "iteration", "latency_ns"]
    iterations = pd.concat(samples, ignore_index=True)[columns] if samples else pd.DataFrame(columns=columns)
    return {"tail_runs": pd.DataFrame(runs), "tail_iterations": iterations}
