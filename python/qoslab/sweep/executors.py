"""Where a study's runs execute: local worker processes (every core by default), or a Dask
cluster, either an existing scheduler or a Slurm allocation through dask-jobqueue. Every
executor yields records as runs finish, in any order; the caller stores each at once."""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Protocol

from qoslab.extras import require
from qoslab.sweep.execute import RunRecord, RunSpec, execute, failed_record


class Executor(Protocol):
    workers: int

    def run(self, specs: Sequence[RunSpec]) -> Iterator[RunRecord]: ...

    def close(self) -> None: ...


def cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def _die_with_parent(parent: int) -> None:
    """Worker initializer: a worker never outlives the process that started it, however that one
    ends (kill -9 included). Linux delivers SIGKILL at the parent's death (prctl
    PR_SET_PDEATHSIG); where that is unavailable, or the parent died before the call, a watch
    thread sees the worker re-parented and exits."""
    import ctypes
    import signal
    import threading
    import time

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG = 1
    except (OSError, AttributeError):
        pass

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(1)

    if os.getppid() != parent:
        os._exit(1)
    threading.Thread(target=watch, name="qoslab-parent-watch", daemon=True).start()


class LocalExecutor:
    """A pool of worker processes, one engine run each at a time (the engine is single-threaded,
    so one worker per core uses the machine). Spawned, not forked: the parent may hold threads."""

    def __init__(self, workers: int = 0):
        self.workers = workers if workers > 0 else cores()
        self._pool: ProcessPoolExecutor | None = None

    def run(self, specs: Sequence[RunSpec]) -> Iterator[RunRecord]:
        if not specs:
            return
        if self.workers == 1 or len(specs) == 1:
            # Nothing to overlap: run here (also keeps a one-run study cheap to start).
            for spec in specs:
                try:
                    record = execute(spec)
                except Exception as error:  # execute records failures itself; this is a bug in it
                    record = failed_record(spec, f"{type(error).__name__}: {error}")
                yield record
            return
        if self._pool is None:
            self._pool = ProcessPoolExecutor(self.workers, mp_context=multiprocessing.get_context("spawn"),
                                             initializer=_die_with_parent, initargs=(os.getpid(),))
        submitted = {self._pool.submit(execute, spec): spec for spec in specs}
        pending: set[Future[RunRecord]] = set(submitted)
        try:
            while pending:
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                for future in sorted(done, key=lambda f: submitted[f].run_id):
                    yield _record(future, submitted[future])
        finally:
            for future in pending:
                future.cancel()
            if any(isinstance(f.exception(), BrokenProcessPool) for f in submitted if f.done() and not f.cancelled()):
                self.close()  # a dead pool cannot take more work; the next stage makes a new one

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None


class DaskExecutor:
    """Runs on a Dask distributed cluster: a scheduler address, a Cluster object (a LocalCluster
    in tests, a dask-jobqueue SLURMCluster on a machine with Slurm) or a Client."""

    def __init__(self, target: Any):
        Client = require("distributed", "the Dask executor (--scheduler, [executor] kind = \"dask\")").Client
        self._owns_client = not isinstance(target, Client)
        self.client = Client(target) if self._owns_client else target
        info = self.client.scheduler_info()
        self.workers = max(1, sum(int(w.get("nthreads", 1)) for w in info.get("workers", {}).values()))

    def run(self, specs: Sequence[RunSpec]) -> Iterator[RunRecord]:
        if not specs:
            return
        from distributed import as_completed

        futures = [self.client.submit(execute, spec, pure=False, key=f"qoslab-{spec.run_id}-{os.getpid()}") for spec in specs]
        try:
            by_key = {future.key: spec for future, spec in zip(futures, specs)}
            for future in as_completed(futures):
                yield _record(future, by_key[future.key])
        finally:
            for future in futures:
                if not future.done():
                    future.cancel()

    def close(self) -> None:
        if self._owns_client:
            self.client.close()


def _record(future: Any, spec: RunSpec) -> RunRecord:
    """The future's record; a worker that died or raised gives an error record for its run."""
    try:
        return future.result()
    except KeyboardInterrupt:
        raise
    except BaseException as error:  # noqa: BLE001 - any failure of a worker is this run's error
        return failed_record(spec, f"the worker running it failed: {type(error).__name__}: {error}")


def slurm_cluster(options: dict[str, Any]) -> Any:
    """A dask-jobqueue SLURMCluster from the study file's [executor.slurm] keys (not yet scaled:
    nothing is submitted until make_executor asks for Slurm jobs)."""
    from qoslab.errors import ScenarioError

    SLURMCluster = require("dask_jobqueue", "the Slurm executor ([executor] kind = \"slurm\")").SLURMCluster

    options = {"processes": 1, **options}  # one run per worker process by default: runs are single-threaded
    try:
        return SLURMCluster(**options)
    except (TypeError, ValueError) as error:
        raise ScenarioError([("executor.slurm", f"dask_jobqueue.SLURMCluster refused these keys: {error}")]) from None


def make_executor(kind: str, workers: int = 0, scheduler: str | None = None, slurm: dict[str, Any] | None = None) -> Executor:
    """The executor a study file's [executor] table (or the command line) asks for."""
    if kind == "dask":
        return DaskExecutor(scheduler)
    if kind == "slurm":
        cluster = slurm_cluster(slurm or {})
        cluster.scale(jobs=max(workers, 1))
        return DaskExecutor(cluster)
    return LocalExecutor(workers)
