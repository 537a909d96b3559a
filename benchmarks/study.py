"""Study benchmark: the built-in default study from scratch, its wall time and runs per minute
with the worker pool on every core (and, for comparison, on one).

    python benchmarks/study.py                # writes benchmarks/study.json
    python benchmarks/study.py --workers 1    # one worker only

It also runs the default study with its allreduce loop at 2,000 iterations (about 2 M iteration
rows) in a process of its own and records that driver's peak memory: the iterations table is
written and read by slice (qoslab/sweep/iterations.py), so it must not grow with the rows.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from pathlib import Path


def measure(workers: int) -> dict:
    from qoslab.study.default import default_study
    from qoslab.study.runner import StudyRunner
    from qoslab.sweep.executors import LocalExecutor
    from rich.console import Console

    study = default_study()
    with tempfile.TemporaryDirectory() as out:
        executor = LocalExecutor(workers)
        t0 = time.perf_counter()
        try:
            outcome = StudyRunner(study, out, executor, Console(stderr=True), progress=False).run()
        finally:
            executor.close()
        wall = time.perf_counter() - t0
    runs = outcome.tables["runs"]
    engine_seconds = float(runs["wall_seconds"].sum())
    return {
        "workers": executor.workers,
        "runs": len(runs),
        "failed_runs": int((runs["status"] != "completed").sum()),
        "wall_seconds": wall,
        "runs_per_minute": 60.0 * len(runs) / wall,
        "engine_seconds_summed": engine_seconds,
        # Engine time over wall time x workers: how busy the pool kept the cores.
        "pool_utilisation": engine_seconds / (wall * executor.workers),
        "packet_hops": int(runs["packet_hops"].sum()),
    }


LARGE_ALLREDUCE_ITERATIONS = 2000


def driver_memory(workers: int) -> dict:
    """The default study with many iteration rows, in a process of its own: its runs, rows and the
    driver's peak resident memory (the workers are other processes)."""
    import subprocess

    child = subprocess.run([sys.executable, __file__, "--driver-memory-child", str(workers)],
                           capture_output=True, text=True, check=True)
    return json.loads(child.stdout.strip().splitlines()[-1])


def _driver_memory_child(workers: int) -> None:
    import copy
    import resource

    import pyarrow.parquet as pq
    from qoslab.study.default import DEFAULT_STUDY
    from qoslab.study.model import Study
    from qoslab.study.runner import StudyRunner
    from qoslab.sweep.executors import LocalExecutor
    from rich.console import Console

    data = copy.deepcopy(DEFAULT_STUDY)
    allreduce = next(job for job in data["scenario"]["jobs"] if job["name"] == "allreduce")
    allreduce["workload"]["iterations"] = LARGE_ALLREDUCE_ITERATIONS
    with tempfile.TemporaryDirectory() as out:
        executor = LocalExecutor(workers)
        t0 = time.perf_counter()
        try:
            outcome = StudyRunner(Study.from_dict(data, None), out, executor, Console(stderr=True), progress=False).run()
        finally:
            executor.close()
        wall = time.perf_counter() - t0
        rows = pq.ParquetFile(Path(out, "iterations.parquet")).metadata.num_rows
    print(json.dumps({"study": f"default, allreduce at {LARGE_ALLREDUCE_ITERATIONS} iterations", "workers": executor.workers,
                      "runs": len(outcome.tables["runs"]), "iteration_rows": rows, "wall_seconds": wall,
                      "driver_peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=str(Path(__file__).with_name("study.json")))
    parser.add_argument("--workers", type=int, default=0, help="worker processes (0: every core, and one for comparison)")
    parser.add_argument("--driver-memory-child", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.driver_memory_child is not None:
        return _driver_memory_child(args.driver_memory_child)
    from qoslab.sweep.executors import cores

    rows = [measure(args.workers)]
    if args.workers == 0 and cores() > 1:
        rows.append(measure(1))
    for row in rows:
        print(f"{row['workers']} workers: {row['runs']} runs in {row['wall_seconds']:.1f} s, "
              f"{row['runs_per_minute']:.1f} runs/min, pool utilisation {row['pool_utilisation']:.2f}", flush=True)
    report = {
        "machine": {"python": sys.version.split()[0], "platform": platform.platform(), "cpus": cores()},
        "study": "built-in default study",
        "results": rows,
    }
    if len(rows) == 2:
        report["speedup_all_cores_over_one"] = rows[1]["wall_seconds"] / rows[0]["wall_seconds"]
    memory = driver_memory(args.workers)
    print(f"{memory['study']}: {memory['iteration_rows']:,} iteration rows, driver peak "
          f"{memory['driver_peak_rss_bytes'] / 2**20:.0f} MiB", flush=True)
    report["driver_memory"] = memory
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
