"""Running a study from Python (Study.run): the executor the caller names or the study file's,
the runner for the study's kind, and the executor closed again if it was made here."""

from __future__ import annotations

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
    if made_here:
        if executor is not None:
            # A kind by name: the study file's [executor] checks, as --executor applies them.
            config = config.overridden(executor, {})
        kind = config.kind
        executor = make_executor(kind, workers or config.workers, config.scheduler if kind == "dask" else None,
                                 config.slurm if kind == "slurm" else None, out, config.no_worker_timeout_s)
    console = Console(stderr=True, quiet=not progress)
    try:
        if isinstance(study, TailStudy):
            from qoslab.study.tail_runner import TailStudyRunner

            return TailStudyRunner(study, out, executor, console, progress).run()
        if study.sweep:
            from qoslab.study.sweep_runner import SweepRunner

            return SweepRunner(study, out, executor, console, progress).run()
        from qoslab.study.runner import StudyRunner

        return StudyRunner(study, out, executor, console, progress).run()
    finally:
        if made_here:
            executor.close()
