"""Where a study's runs execute: local worker processes (every core by default), or a Dask
cluster, either an existing scheduler or a Slurm allocation through dask-jobqueue. Every
executor yields records as runs finish, in any order; the caller stores each at once (local
workers can store their own: LocalExecutor.run_into)."""

from __future__ import annotations

import math
import multiprocessing
import multiprocessing.context
import os
import signal
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any, Protocol, TypeVar, cast

from qoslab.extras import require
from qoslab.resources import describe_bytes
from qoslab.sweep.execute import RunRecord, RunSpec, execute, failed_record
from qoslab.sweep.store import RunStore

T = TypeVar("T")
R = TypeVar("R")


class Executor(Protocol):
    """Runs specs. An executor may also offer `submit(fn, arg) -> Future`, other work on its
    workers beside the runs (LocalExecutor): a sweep writes its points' folders there; and
    `run_into(specs, store)`, runs its workers store themselves (LocalExecutor: they share the
    driver's file system), yielding None for each of those."""

    workers: int

    def run(self, specs: Sequence[RunSpec]) -> Iterator[RunRecord]: ...

    def close(self) -> None: ...


def cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def workers_in_memory(workers: int, run_bytes: int, available: int | None) -> tuple[int, str | None]:
    """How many local workers can hold a run of `run_bytes` (its estimated peak) each at once in
    `available` bytes (None: unknown), and a warning when that is fewer than `workers`: each run
    alone passes the scenario's memory check, so several at once could still exhaust the machine."""
    if available is None or run_bytes <= 0 or workers * run_bytes <= available:
        return workers, None
    fit = max(1, available // run_bytes)
    return fit, (f"{workers} workers would hold {workers} runs of up to about {describe_bytes(run_bytes)} each at "
                 f"once, and this machine has {describe_bytes(available)} available: running {fit} at a time")


def _start_worker(parent: int) -> None:
    """Worker initializer. A worker never outlives the process that started it, however that one
    ends (kill -9 included): Linux delivers SIGKILL at the parent's death (prctl
    PR_SET_PDEATHSIG); where that is unavailable, or the parent died before the call, a watch
    thread sees the worker re-parented and exits. And Ctrl-C, which reaches the whole process
    group, stops the worker's task without a word (`_in_worker`); it is the command's to handle. The
    worker started with SIGINT blocked (`_WorkerProcess`), so a Ctrl-C while it was importing
    waits for the handler set here instead of printing a traceback."""
    global _ignoring
    import ctypes
    import threading

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
    # A command started with Ctrl-C ignored (a shell's background job) passes that on: its workers
    # ignore it too, as they did before they handled it.
    _ignoring = signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    if not _ignoring:
        signal.signal(signal.SIGINT, _note_stop)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


# In a worker: whether SIGINT is ignored (inherited), and when the last Ctrl-C came (time.time();
# the command that submits a task says when it did, so a Ctrl-C before it stops nothing).
_ignoring = False
_stopped_at = -math.inf


def _note_stop(signum: int, frame: Any) -> None:
    """Ctrl-C in a worker between tasks. The worker stays (leaving would break the pool the
    command is closing, which Python 3.11 reports with a traceback of its own), but the tasks
    already queued for it, which the command cannot take back, stop at once instead of running
    whole; tasks submitted later (a pool its owner keeps) run as usual."""
    global _stopped_at
    _stopped_at = time.time()


def _in_worker(fn: Callable[[T], R], arg: T, submitted: float) -> R:
    """A task in a worker, `submitted` at that time.time(). Ctrl-C raises KeyboardInterrupt in it,
    as in the command: a run stops where it is (the engine polls for it) and the interruption goes
    back to the command; the tasks submitted before it then stop at once too."""
    global _stopped_at
    if _ignoring:
        return fn(arg)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        if _stopped_at >= submitted:
            raise KeyboardInterrupt
        return fn(arg)
    except KeyboardInterrupt:
        _stopped_at = time.time()
        raise
    finally:
        signal.signal(signal.SIGINT, previous)


class _WorkerProcess(multiprocessing.context.SpawnProcess):
    """Started with SIGINT blocked (a signal mask survives fork and exec), until `_start_worker`."""

    def start(self) -> None:
        if not hasattr(signal, "pthread_sigmask"):  # pragma: no cover - not POSIX
            return super().start()
        before = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            super().start()
        finally:  # the command's own Ctrl-C, if one came meanwhile, arrives now
            signal.pthread_sigmask(signal.SIG_SETMASK, before)


class _WorkerContext(multiprocessing.context.SpawnContext):
    Process = _WorkerProcess


class LocalExecutor:
    """A pool of worker processes, one engine run each at a time (the engine is single-threaded,
    so one worker per core uses the machine). Spawned, not forked: the parent may hold threads."""

    def __init__(self, workers: int = 0):
        self.workers = workers if workers > 0 else cores()
        self._pool: ProcessPoolExecutor | None = None
        # Submitted futures: the pool holds those not done yet, the caller the rest until handed on.
        self._in_flight: weakref.WeakSet[Future[Any]] = weakref.WeakSet()

    def run(self, specs: Sequence[RunSpec]) -> Iterator[RunRecord]:
        for record in self._run(specs, None):
            assert record is not None  # without a store, every run comes back as its record
            yield record

    def run_into(self, specs: Sequence[RunSpec], store: RunStore) -> Iterator[RunRecord | None]:
        """As `run`, but each worker stores its run in `store` itself and hands back None: only a
        run whose worker failed (a record the driver makes) or could not store it comes back to be
        stored, besides every run when they run here (one worker, or one run). A record's
        tables then never cross to the driver, which with runs of a few milliseconds would
        otherwise spend about a third of its time storing them and slow the workers it shares
        the cores with (docs/study.md, "Sweeps")."""
        return self._run(specs, str(store.root))

    def _run(self, specs: Sequence[RunSpec], root: str | None) -> Iterator[RunRecord | None]:
        if not specs:
            return
        if self.workers == 1 or len(specs) == 1:
            # Nothing to overlap: run here (also keeps a one-run study cheap to start); the caller stores.
            for spec in specs:
                try:
                    record = execute(spec)
                except Exception as error:  # execute records failures itself; this is a bug in it
                    record = failed_record(spec, f"{type(error).__name__}: {error}")
                yield record
            return
        submitted: dict[Future[RunRecord | None], RunSpec] = {self._submit_run(spec, root): spec for spec in specs}
        pending: set[Future[RunRecord | None]] = set(submitted)
        broken, restarts = False, 0
        try:
            while pending:
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                if restarts < MAX_POOL_RESTARTS and any(_pool_died(f) for f in done):
                    # A worker died (the OOM killer, a kill): every run the pool held fails alike,
                    # though only one was that worker's. Those go to a new pool, a bounded number
                    # of times (a run that kills its worker each time ends as a failure).
                    done |= set(wait(pending).done)
                    pending = set()
                    # (A run its worker stored before the pool broke is kept, as `_outcome` does.)
                    lost = [f for f in done if _pool_died(f) and not (
                        root is not None and RunStore(root, create=False).finished(submitted[f].run_id))]
                    done -= set(lost)
                    self.close()
                    restarts += 1
                    for future in lost:
                        spec = submitted.pop(future)
                        again = self._submit_run(spec, root)
                        submitted[again] = spec
                        pending.add(again)
                batch = sorted(done, key=lambda f: submitted[f].run_id)
                del done
                while batch:
                    # Dropped once handed on: a finished future holds its record (a run's tables).
                    future = batch.pop(0)
                    broken = broken or _pool_died(future)
                    yield _outcome(future, submitted.pop(future), root)
        finally:
            for future in pending:
                future.cancel()
            # `submitted` now holds the futures not handed on (pending, or left when the caller stopped).
            if broken or any(_pool_died(f) for f in submitted if f.done()):
                self.close()  # a dead pool cannot take more work; the next stage makes a new one

    def _submit_run(self, spec: RunSpec, root: str | None) -> Future[RunRecord | None]:
        """One run to the pool: its record comes back, or (root: a run store) the worker stores it."""
        if root is None:
            return cast("Future[RunRecord | None]", self._pool_submit(execute, spec))
        return self._pool_submit(execute_into, (spec, root))

    def _ensure_pool(self) -> ProcessPoolExecutor:
        if self._pool is None:
            self._pool = ProcessPoolExecutor(self.workers, mp_context=_WorkerContext(),
                                             initializer=_start_worker, initargs=(os.getpid(),))
        return self._pool

    def close(self) -> None:
        """Ends the pool. With nothing running its workers are waited for, so that none outlives
        the command; with runs still going (a stage that stopped on an error, or a Ctrl-C or
        SIGTERM that reached this process alone) the queued runs are cancelled and the workers
        stopped (`_stop_workers`), so the command ends within about a second, not after them."""
        if self._pool is not None:
            running = any(not future.done() for future in list(self._in_flight))
            processes = list((getattr(self._pool, "_processes", None) or {}).values())
            self._pool.shutdown(wait=not running, cancel_futures=True)
            if running:
                _stop_workers(processes)
            self._pool = None
            self._in_flight.clear()

    def submit(self, fn: Callable[[T], R], arg: T) -> Future[R]:
        """`fn(arg)` in a worker process beside the runs (with one worker, here, at once): a sweep
        finishes its points' folders there, so that the driver is not what limits a sweep of
        short runs."""
        if self.workers == 1:
            done: Future[R] = Future()
            try:
                done.set_result(fn(arg))
            except Exception as error:  # handed over as the pool would hand it over
                done.set_exception(error)
            return done
        return self._pool_submit(fn, arg)

    def _pool_submit(self, fn: Callable[[T], R], arg: T) -> Future[R]:
        try:
            future = self._ensure_pool().submit(_in_worker, fn, arg, time.time())
        except BrokenProcessPool:  # a worker died outside a batch of runs (a point's folder): a new pool
            self.close()
            future = self._ensure_pool().submit(_in_worker, fn, arg, time.time())
        self._in_flight.add(future)
        return future


# How long stopped workers get to hand back their interrupted tasks before they are terminated.
STOP_GRACE_S = 1.0
# New pools a batch of runs gets after a worker died before its runs are failed.
MAX_POOL_RESTARTS = 2


def _pool_died(future: Future[Any]) -> bool:
    return not future.cancelled() and isinstance(future.exception(), BrokenProcessPool)


def _stop_workers(processes: Sequence[Any]) -> None:
    """Stops a pool's workers as a Ctrl-C to the whole process group does: SIGINT stops each one's
    run (the engine polls for it) and the tasks already queued to it (`_note_stop`), which
    cancelling cannot take back; the pool then lets them go. A worker still there after
    STOP_GRACE_S (one that ignores SIGINT: started from a shell's background job) is terminated.
    Without this a signal to this process alone waited for every run the workers held."""
    for process in processes:
        if process.is_alive():
            try:
                os.kill(process.pid, signal.SIGINT)
            except (ProcessLookupError, TypeError):  # gone meanwhile, or never started (no pid)
                pass
    deadline = time.monotonic() + STOP_GRACE_S
    for process in processes:
        process.join(max(0.0, deadline - time.monotonic()))
    for process in processes:
        if process.is_alive():
            process.terminate()
            process.join(STOP_GRACE_S)


class NoLiveWorker(RuntimeError):
    """A Dask study whose cluster has had no worker for too long: said, instead of waiting forever."""


# How long a Dask study waits with no worker at all before it stops (finished runs are kept).
NO_WORKER_TIMEOUT_S = 600.0


class DaskExecutor:
    """Runs on a Dask distributed cluster: a scheduler address, a Cluster object (a LocalCluster
    in tests, a dask-jobqueue SLURMCluster on a machine with Slurm) or a Client. With no live
    worker for `no_worker_timeout_s` it stops with NoLiveWorker; `describe_workers` says why
    (e.g. the Slurm jobs' states)."""

    def __init__(self, target: Any, no_worker_timeout_s: float = NO_WORKER_TIMEOUT_S,
                 workers: int | None = None, describe_workers: Any = None, security: Any = None):
        distributed = require("distributed", "the Dask executor (--scheduler, [executor] kind = \"dask\")")
        self._owns_client = not isinstance(target, distributed.Client)
        self.warnings: list[str] = []
        if isinstance(target, str):
            security, self.warnings = scheduler_security(target, security)
        self.client = distributed.Client(target, security=security) if self._owns_client else target
        self.no_worker_timeout_s = no_worker_timeout_s
        self._describe_workers = describe_workers
        info = self.client.scheduler_info()
        self.workers = workers or max(1, sum(int(w.get("nthreads", 1)) for w in info.get("workers", {}).values()))

    def run(self, specs: Sequence[RunSpec]) -> Iterator[RunRecord]:
        if not specs:
            return
        import time

        from distributed import wait as wait_futures

        futures = [self.client.submit(execute, spec, pure=False, key=f"qoslab-{spec.run_id}-{os.getpid()}") for spec in specs]
        by_key = {future.key: spec for future, spec in zip(futures, specs)}
        pending = set(futures)
        alone_since: float | None = None
        poll = min(5.0, max(0.2, self.no_worker_timeout_s / 10))
        try:
            while pending:
                try:
                    done, pending = wait_futures(pending, timeout=poll, return_when="FIRST_COMPLETED")
                except TimeoutError:
                    done = set()
                for future in sorted(done, key=lambda f: by_key[f.key].run_id):
                    yield _record(future, by_key[future.key])
                    future.release()  # the cluster may forget the record once it is handed on
                if done or self.client.scheduler_info().get("workers"):
                    alone_since = None
                    continue
                alone_since = alone_since if alone_since is not None else time.monotonic()
                if time.monotonic() - alone_since >= self.no_worker_timeout_s:
                    why = f" ({self._describe_workers()})" if self._describe_workers else ""
                    raise NoLiveWorker(f"no live Dask worker for {self.no_worker_timeout_s:g} s{why}; "
                                       f"{len(pending)} run(s) not done")
        finally:
            for future in futures:
                if not future.done():
                    future.cancel()

    def close(self) -> None:
        if self._owns_client:
            self.client.close()


def scheduler_security(address: str, security: Any = None) -> tuple[Any, list[str]]:
    """The security to reach a scheduler by address, and warnings: a tls:// address uses Dask's
    TLS configuration (distributed.comm.tls.* in a Dask config file or DASK_DISTRIBUTED__COMM__TLS__*
    variables) and is refused, naming those keys, without one; a plain tcp:// address off this
    machine is warned about: whoever reaches that port can run code as every worker's user."""
    import ipaddress
    import socket
    from urllib.parse import urlsplit

    distributed = require("distributed", "the Dask executor")
    parts = urlsplit(address if "://" in address else f"tcp://{address}")
    if parts.scheme == "tls":
        security = security or distributed.Security()
        if not security.tls_ca_file:
            raise ValueError(f"{address}: a tls:// scheduler needs Dask's TLS settings (distributed.comm.tls.ca-file "
                             "and distributed.comm.tls.client.cert/key in a Dask config file, or "
                             "DASK_DISTRIBUTED__COMM__TLS__CA_FILE, ...__CLIENT__CERT and ...__CLIENT__KEY)")
        return security, []
    host = parts.hostname or ""
    try:
        local = all(ipaddress.ip_address(info[4][0]).is_loopback for info in socket.getaddrinfo(host, None))
    except (OSError, ValueError):
        local = host in ("localhost", "")
    if parts.scheme == "tcp" and not local:
        return security, [f"{address}: plain tcp:// to another machine: anyone who can reach this port can run "
                          "code on the workers; use tls:// with Dask's TLS settings on a shared cluster"]
    return security, []


def execute_into(task: tuple[RunSpec, str]) -> RunRecord | None:
    """A worker's run stored by the worker (LocalExecutor.run_into): the spec and the run store's
    folder. A record it could not store goes back to the driver, which stores it as before (and
    stops the study if it cannot either), rather than a finished run being reported as failed."""
    spec, root = task
    record = execute(spec)
    try:
        RunStore(root, create=False).put(record)
    except Exception:  # noqa: BLE001 - any failure to store: the driver's turn
        return record
    return None


def _outcome(future: Future[RunRecord | None], spec: RunSpec, root: str | None) -> RunRecord | None:
    """What a pooled run hands on: its record, or None for one its worker stored (run_into). A
    worker that raised or died gives an error record, unless (run_into) the run is stored finished
    already: a pool that breaks fails every run in flight, including one whose worker had just
    stored it, which is kept rather than replaced by the error."""
    if root is not None and future.exception() is not None and RunStore(root, create=False).finished(spec.run_id):
        return None
    return _record(future, spec)


def _record(future: Any, spec: RunSpec) -> Any:
    """The future's result (a record, or None for one the worker stored); a worker that died or
    raised gives an error record for its run."""
    try:
        return future.result()
    except KeyboardInterrupt:
        raise
    except BaseException as error:  # noqa: BLE001 - any failure of a worker is this run's error
        return failed_record(spec, f"the worker running it failed: {type(error).__name__}: {error}")


def walltime_seconds(walltime: str) -> int:
    """Seconds of a Slurm time limit: MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS."""
    days, _, clock = walltime.strip().rpartition("-")
    fields = clock.split(":")
    try:
        numbers = [int(f) for f in fields]
        day_count = int(days) if days else 0
    except ValueError:
        raise ValueError(f"expected a Slurm time limit (MM, HH:MM:SS or D-HH:MM:SS), got {walltime!r}") from None
    if days:  # D-HH[:MM[:SS]]
        numbers += [0] * (3 - len(numbers))
        h, m, sec = numbers
    elif len(numbers) == 1:
        h, m, sec = 0, numbers[0], 0
    elif len(numbers) == 2:
        h, m, sec = 0, numbers[0], numbers[1]
    elif len(numbers) == 3:
        h, m, sec = numbers
    else:
        raise ValueError(f"expected a Slurm time limit (MM, HH:MM:SS or D-HH:MM:SS), got {walltime!r}")
    if min(day_count, h, m, sec) < 0 or len(numbers) > 3:
        raise ValueError(f"expected a Slurm time limit (MM, HH:MM:SS or D-HH:MM:SS), got {walltime!r}")
    return ((day_count * 24 + h) * 60 + m) * 60 + sec


def worker_lifetime(walltime: str) -> tuple[int, int]:
    """(lifetime, stagger) in seconds for a Dask worker in a Slurm job of this walltime: it leaves
    cleanly (its runs go elsewhere, adapt() submits a new job) before Slurm kills it. The margin is
    10% of the walltime, at least 30 s and at most 5 min."""
    total = walltime_seconds(walltime)
    margin = max(30, min(300, total // 10))
    if total <= 2 * margin:
        raise ValueError(f"walltime {walltime!r} is too short for a worker: it leaves {margin} s before its job "
                         f"ends; give at least {2 * margin + 1} s")
    return total - margin, margin // 3


def slurm_cluster(options: dict[str, Any], security_dir: Path | None = None) -> Any:
    """A dask-jobqueue SLURMCluster from the study file's [executor.slurm] keys (not yet scaled:
    nothing is submitted until make_executor asks for Slurm jobs). Its workers leave before their
    walltime (`worker_lifetime`); with `security_dir`, scheduler and workers talk TLS with
    temporary credentials kept in that folder (mode 700: other users get nothing)."""
    from qoslab.errors import ScenarioError

    SLURMCluster = require("dask_jobqueue", "the Slurm executor ([executor] kind = \"slurm\")").SLURMCluster

    options = {"processes": 1, "walltime": "00:30:00", **options}  # one run per worker process: runs are single-threaded
    try:
        lifetime, stagger = worker_lifetime(str(options["walltime"]))
    except ValueError as error:
        raise ScenarioError([("executor.slurm.walltime", str(error))]) from None
    options["worker_extra_args"] = [*options.get("worker_extra_args", []),
                                    "--lifetime", f"{lifetime}s", "--lifetime-stagger", f"{stagger}s"]
    if security_dir is not None and "security" not in options:
        require("cryptography", "TLS between the study and its Slurm workers")
        security_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        security_dir.chmod(0o700)
        options.update(security=True, shared_temp_directory=str(security_dir))
    try:
        return SLURMCluster(**options)
    except (TypeError, ValueError) as error:
        raise ScenarioError([("executor.slurm", f"dask_jobqueue.SLURMCluster refused these keys: {error}")]) from None


def slurm_preflight(options: dict[str, Any]) -> None:
    """Before any job is submitted: the Slurm controller answers, and the partition asked for
    exists (a ValueError saying which, with the partitions there are)."""
    import shutil
    import subprocess

    if shutil.which("sinfo") is None:
        raise ValueError("the Slurm commands (sinfo, sbatch) are not on PATH: run the study on a Slurm login node")
    try:
        done = subprocess.run(["sinfo", "-h", "-o", "%R"], capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        raise ValueError("the Slurm controller did not answer sinfo within 60 s") from None
    if done.returncode != 0:
        raise ValueError(f"the Slurm controller cannot be reached: sinfo says {done.stderr.strip() or done.returncode}")
    partitions = sorted({line.strip() for line in done.stdout.splitlines() if line.strip()})
    queue = options.get("queue")
    if queue is not None and queue not in partitions:
        raise ValueError(f"no Slurm partition {queue!r} (--partition, executor.slurm.queue); "
                         f"this cluster has: {', '.join(partitions) or 'none'}")


def slurm_jobs(cluster: Any) -> str:
    """The states of a SLURMCluster's jobs, as squeue gives them (for a study with no worker)."""
    import subprocess

    ids = [str(job.job_id) for job in getattr(cluster, "workers", {}).values() if getattr(job, "job_id", None)]
    if not ids:
        return "no Slurm job submitted"
    done = subprocess.run(["squeue", "-h", "-j", ",".join(ids), "-o", "%i %T %r"], capture_output=True, text=True)
    states = "; ".join(line.strip() for line in done.stdout.splitlines() if line.strip())
    return f"Slurm jobs {', '.join(ids)}: {states or 'not in squeue (ended)'}"


class _ClusterErrors:
    """Errors the cluster's background tasks log (an sbatch that fails while adapt() replaces a
    job): kept, without their tracebacks, for the message of a study with no worker."""

    LOGGERS = ("tornado.application", "distributed.deploy.spec", "distributed.deploy.adaptive")

    def __init__(self) -> None:
        import logging

        class Keep(logging.Handler):
            def __init__(self, messages: list[str]) -> None:
                super().__init__(logging.ERROR)
                self.messages = messages

            def emit(self, record: logging.LogRecord) -> None:
                text = str(record.exc_info[1]) if record.exc_info and record.exc_info[1] else record.getMessage()
                self.messages.append(" ".join(line.strip() for line in text.splitlines() if "error" in line.lower())
                                     or " ".join(text.split()))

        self.messages: list[str] = []
        self._handler = Keep(self.messages)
        self._saved = []
        for name in self.LOGGERS:
            logger = logging.getLogger(name)
            self._saved.append((logger, logger.propagate))
            logger.addHandler(self._handler)
            logger.propagate = False

    def last(self) -> str:
        return f"; last error: {self.messages[-1][:400]}" if self.messages else ""

    def close(self) -> None:
        for logger, propagate in self._saved:
            logger.removeHandler(self._handler)
            logger.propagate = propagate


def _test_submit(cluster: Any) -> None:
    """sbatch --test-only on the worker job's script: resources no node has, an unknown account
    and the like are refused before anything is submitted (ValueError with sbatch's words)."""
    import subprocess
    import tempfile

    with tempfile.NamedTemporaryFile("w", suffix=".sh", prefix="qoslab-worker-") as script:
        script.write(cluster.job_script())
        script.flush()
        done = subprocess.run(["sbatch", "--test-only", script.name], capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        said = " ".join(line.strip() for line in done.stderr.splitlines() if line.strip())
        raise ValueError(f"Slurm refuses the worker job ({said or f'sbatch exit {done.returncode}'})")


class SlurmExecutor(DaskExecutor):
    """A DaskExecutor on a SLURMCluster it started and owns: `jobs` worker jobs kept alive
    (adapt() replaces a job whose worker left or was killed); closing it cancels them all."""

    def __init__(self, slurm: dict[str, Any], jobs: int, out: Path | None, no_worker_timeout_s: float):
        slurm_preflight(slurm)
        self.cluster = slurm_cluster(slurm, None if out is None else out / ".dask-security")
        self._errors = _ClusterErrors()
        try:
            _test_submit(self.cluster)
            self.cluster.adapt(minimum_jobs=jobs, maximum_jobs=jobs)
            super().__init__(self.cluster, no_worker_timeout_s, workers=jobs * int(slurm.get("cores", 1)),
                             describe_workers=lambda: slurm_jobs(self.cluster) + self._errors.last())
        except BaseException:
            self._close_cluster()
            raise

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._close_cluster()

    def _close_cluster(self) -> None:
        import contextlib
        import subprocess

        ids = [str(job.job_id) for job in list(getattr(self.cluster, "workers", {}).values())
               if getattr(job, "job_id", None)]
        try:
            self.cluster.close()
        except Exception:  # noqa: BLE001 - a job that never started can fail to close; it is cancelled below
            pass
        finally:
            if ids:
                with contextlib.suppress(OSError, subprocess.SubprocessError):
                    subprocess.run(["scancel", *ids], capture_output=True, timeout=60)
            self._errors.close()


def make_executor(kind: str, workers: int = 0, scheduler: str | None = None, slurm: dict[str, Any] | None = None,
                  out: Path | None = None, no_worker_timeout_s: float = NO_WORKER_TIMEOUT_S) -> Executor:
    """The executor a study file's [executor] table (or the command line) asks for: a Slurm
    cluster keeps `workers` jobs alive, its scheduler and workers on TLS with credentials under
    `out`/.dask-security."""
    if kind == "dask":
        return DaskExecutor(scheduler, no_worker_timeout_s)
    if kind == "slurm":
        return SlurmExecutor(slurm or {}, max(workers, 1), out, no_worker_timeout_s)
    return LocalExecutor(workers)
