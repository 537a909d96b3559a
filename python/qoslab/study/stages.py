"""The stage loop both study kinds run their runs through (runner.py stage by stage, tail_runner.py
in one stage): a batch of RunSpecs goes to the executor, those the run store holds finished are
reused (an interrupted study resumes, repeating nothing it has), each record is stored the moment
it finishes, damaged run folders are named and run again, and progress is shown. A failed run is a
record like any other (execute.py); a stage never stops for one."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
)

from qoslab.sweep.execute import RunSpec, failed_record
from qoslab.sweep.executors import Executor
from qoslab.sweep.store import RunStore


class StageWaiting(Exception):
    """A stage cannot finish here: an array task ran its share and the other tasks' runs are not
    all stored yet, or a collection found runs missing."""

    def __init__(self, what: str, missing: int, ran: int):
        self.what, self.missing, self.ran = what, missing, ran
        super().__init__(f"stage '{what}': {missing} run(s) not stored yet")

    def __reduce__(self) -> tuple[Any, ...]:  # pickled whole, as qoslab.errors' are
        return type(self), (self.what, self.missing, self.ran)


def task_of(run_id: str, tasks: int) -> int:
    """The array task (0 .. tasks-1) that runs `run_id`: a hash of the id, the same in every
    process, so tasks split each stage's runs evenly without talking to each other."""
    return int(hashlib.sha256(run_id.encode()).hexdigest()[:12], 16) % tasks


class Stages:
    """Runs a study's stages into its run store, keeping what they asked for. As array task
    `task` = (index, count) it runs only its share of each stage; with `collect` it runs nothing.
    Either way a stage whose runs are not all stored stops the study with StageWaiting."""

    def __init__(self, store: RunStore, executor: Executor, console: Console, progress: bool = True,
                 task: tuple[int, int] | None = None, collect: bool = False):
        self.store = store
        self.executor = executor
        self.console = console
        self.show_progress = progress
        self.task = task
        self.collect = collect
        self.ran = 0  # runs this process ran (an array task's share)
        # An array task's stage whose other runs were missing when it ended: raised only if a
        # later stage is asked for (it could not start), so a task's last stage just ends.
        self.waiting: StageWaiting | None = None
        self.reused = 0  # runs found stored and finished, counted each time a stage asks for one
        self.unapplied: set[str] = set()  # runs stored as failed by `fail`: nothing to run

    def run(self, specs: Sequence[RunSpec], what: str) -> None:
        """Runs the specs not yet stored finished, storing each as it finishes; `what` names the
        stage in the progress bar. Nothing is shown when every run is stored already."""
        if self.waiting is not None:
            raise self.waiting
        # By run id: a batch may ask for one run several times (a sweep's alone runs, which the
        # swept key leaves as they are); each is looked up and run once, and counted as reused
        # each time it is asked for.
        stored: dict[str, bool] = {}
        todo: dict[str, RunSpec] = {}
        for spec in specs:
            if spec.run_id not in stored:
                stored[spec.run_id] = self.store.finished(spec.run_id)
            if stored[spec.run_id]:
                self.reused += 1
            elif spec.run_id not in self.unapplied:
                todo.setdefault(spec.run_id, spec)
        self._report_damaged()
        if not todo:
            return
        others: list[RunSpec] = []
        if self.collect:
            others, todo = list(todo.values()), {}
        elif self.task is not None:
            index, count = self.task
            others = [s for s in todo.values() if task_of(s.run_id, count) != index]
            todo = {i: s for i, s in todo.items() if task_of(i, count) == index}
        if todo:
            self._execute(len(stored), list(todo.values()), what)
        missing = [s for s in others if not self.store.finished(s.run_id)]
        if missing:
            self.waiting = StageWaiting(what, len(missing), self.ran)
            if self.collect:
                raise self.waiting

    def _execute(self, runs: int, todo: list[RunSpec], what: str) -> None:
        """Runs `todo`, storing each; the progress bar counts the stage's `runs` (each run once)."""
        with Progress(
            TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            console=self.console, disable=not self.show_progress, transient=False,
        ) as progress:
            task = progress.add_task(f"{what} ({self.executor.workers} workers)", total=runs,
                                     completed=runs - len(todo))
            # Local workers store their runs themselves (run_into); other executors hand them back.
            run_into = getattr(self.executor, "run_into", None)
            records = run_into(todo, self.store) if run_into is not None else self.executor.run(todo)
            for record in records:
                if record is not None:
                    self.store.put(record)
                self.ran += 1
                progress.advance(task)

    def fail(self, spec: RunSpec, message: str) -> None:
        """Stores `spec` as failed with `message`, without running it (e.g. a policy that could
        not be applied): a stage asking for it keeps that record rather than running the
        placeholder. Not finished, so a resumed study tries the policy again."""
        self.store.put(failed_record(spec, message))
        self.unapplied.add(spec.run_id)

    def _report_damaged(self) -> None:
        for run_id in self.store.damaged:
            self.console.print(f"[yellow]warning: run folder {self.store.root / run_id} could not be read; "
                               "running it again[/yellow]")
        self.store.damaged.clear()
