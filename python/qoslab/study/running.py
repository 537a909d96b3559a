"""Running a study from Python (Study.run): the executor the caller names or the study file's,
the runner for the study's kind, and the executor closed again if it was made here."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any


def run_study(study: Any, out: Path, executor: Any, workers: int, progress: bool) -> Any:
    from rich.console import Console

    from qoslab.errors import ScenarioError
    from qoslab.study.tail_model import TailStudy
    from qoslab.sweep.executors import make_executor

    config = study.executor
    if not isinstance(workers, int) or isinstance(workers, bool) or workers < 0:
        raise ScenarioError([("workers", f"expected 0 (one per core) or a number of workers, got {workers!r}")],
                            study.source)
    made_here = executor is None or isinstance(executor, str)
    if not made_here and not callable(getattr(executor, "run", None)):
        raise ScenarioError([("executor", f'expected "local", "dask", "slurm" or an executor object '
                                          f"(qoslab.sweep.executors), got {executor!r}")], study.source)
    if not made_here and workers:
        raise ScenarioError([("workers", f"an executor object has its own workers ({getattr(executor, 'workers', '?')}); "
                                         f"workers={workers} would be ignored: leave it out, or name the executor "
                                         "kind instead")], study.source)
    if made_here:
        if executor is not None:
            # A kind by name: the study file's [executor] checks, as --executor applies them.
            config = config.overridden(executor, {})
        kind = config.kind
        if kind == "local" and not isinstance(study, TailStudy):
            workers, warning = study.local_workers(workers or config.workers)
            if warning:
                warnings.warn(warning, stacklevel=3)
        executor = make_executor(kind, workers or config.workers, config.scheduler if kind == "dask" else None,
                                 config.slurm if kind == "slurm" else None, out, config.no_worker_timeout_s)
    console = Console(stderr=True, quiet=not progress)
    outcome: Any
    try:
        if isinstance(study, TailStudy):
            from qoslab.study.tail_runner import TailStudyRunner

            outcome = TailStudyRunner(study, out, executor, console, progress).run()
        elif study.sweep:
            from qoslab.study.sweep_runner import SweepRunner

            outcome = SweepRunner(study, out, executor, console, progress).run()
        else:
            from qoslab.study.runner import StudyRunner

            outcome = StudyRunner(study, out, executor, console, progress).run()
    finally:
        if made_here:
            executor.close()
    _warn_failed(outcome)
    return outcome


class RunsFailedWarning(UserWarning):
    """Some of a study's runs failed (an error, not a deadlock or time limit): its tables lack them."""


def _warn_failed(outcome: Any) -> None:
    """As `qoslab study` warns and exits non-zero: a script must not take the tables as complete
    without a word (the outcome's `failed` lists the runs and why)."""
    import warnings

    from qoslab.policies.search import is_candidate

    failed = [row for row in getattr(outcome, "failed", []) or []
              if row.get("status") == "error" or not is_candidate(row.get("policy"))]
    errors = [row for row in failed if row.get("status") == "error"]
    if errors:
        first = errors[0]
        warnings.warn(f"{len(errors)} of the study's runs failed (first: {first.get('run_id')}: {first.get('error')}); "
                      "its tables lack them: see outcome.failed, and run the study again to retry them",
                      RunsFailedWarning, stacklevel=3)
    elif failed:
        warnings.warn(f"{len(failed)} of the study's runs did not complete (a deadlock or the time limit, "
                      "run.duration_us); see outcome.failed", RunsFailedWarning, stacklevel=3)
