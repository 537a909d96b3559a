"""Sweep benchmark (issue 18, part 4): a sweep of many small runs (two 4-rank jobs on a 16-host
tree, each run about 1 ms of simulated time) through the local worker pool, recording runs per
minute (and per minute per core) and the driver's peak memory. The driver is this process (the
runs execute in worker processes), so its peak resident set is the figure that must not grow with
the number of runs; `--runs` sets the size and several sizes in one call show the trend.

    python benchmarks/sweep.py                      # 10,000 runs; writes benchmarks/sweep.json
    python benchmarks/sweep.py --runs 500 2000      # smaller sweeps, one after the other
"""

from __future__ import annotations

import argparse
import json
import platform
import resource
import sys
import tempfile
import time
from pathlib import Path

SCENARIO = {
    "seed": 1,
    "topology": {"kind": "xgft", "m": [4, 4], "w": [1, 2]},
    "jobs": [
        {"name": "ring", "nodes": 4, "placement": "random",
         "workload": {"kind": "collective-loop", "collective": "allreduce", "bytes": 8192, "iterations": 4}},
        {"name": "flood", "nodes": 4, "placement": "random", "workload": {"kind": "flood-pairs", "iterations": 1}},
    ],
}
RUNS_PER_POINT = 2 * (2 + 1)  # repetitions x (two jobs alone + the default policy's shared run)


def study_of(runs: int):
    from qoslab.study.model import Study

    points = max(1, runs // RUNS_PER_POINT)
    sweep = [{"key": "jobs[0].workload.bytes", "values": [64 * (1 + i) for i in range(points)]}]
    return Study.from_dict({"scenario": SCENARIO, "policies": [{"kind": "default"}], "repetitions": 2, "sweep": sweep},
                           "benchmarks/sweep.py")


def peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def measure(runs: int, workers: int) -> dict:
    from qoslab.study.sweep_runner import SweepRunner
    from qoslab.sweep.executors import LocalExecutor
    from rich.console import Console

    t0 = time.perf_counter()
    study = study_of(runs)
    planned = time.perf_counter() - t0
    with tempfile.TemporaryDirectory() as out:
        executor = LocalExecutor(workers)
        start = time.perf_counter()
        try:
            outcome = SweepRunner(study, out, executor, Console(stderr=True, quiet=True), progress=False).run()
        finally:
            executor.close()
        wall = time.perf_counter() - start
    assert outcome is not None
    minutes = wall / 60
    return {
        "runs": outcome.runs_total,
        "points": len(study.points()),
        "failed_runs": len(outcome.failed),
        "workers": executor.workers,
        "load_and_check_seconds": round(planned, 2),
        "wall_seconds": round(wall, 1),
        "runs_per_minute": round(outcome.runs_total / minutes, 1),
        "runs_per_minute_per_core": round(outcome.runs_total / minutes / executor.workers, 1),
        "driver_peak_mib": round(peak_mib(), 1),  # this process's high-water mark so far
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, nargs="+", default=[10_000], help="sweep sizes, run in this order")
    parser.add_argument("--workers", type=int, default=0, help="worker processes (default: every core)")
    parser.add_argument("--out", default=str(Path(__file__).with_name("sweep.json")))
    args = parser.parse_args(argv)
    results = []
    for runs in args.runs:
        figure = measure(runs, args.workers)
        results.append(figure)
        print(json.dumps(figure), flush=True)
    Path(args.out).write_text(json.dumps({
        "benchmark": "sweep of small runs through local workers",
        "machine": {"python": sys.version.split()[0], "platform": platform.platform()},
        "date": time.strftime("%Y-%m-%d"),
        "note": "driver_peak_mib is the driver's resident high-water mark after each size, in the order run: "
                "a flat figure across sizes means memory independent of the number of runs",
        "results": results,
    }, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
