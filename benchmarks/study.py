"""Study benchmark: the built-in default study from scratch, its wall time and runs per minute
with the worker pool on every core (and, for comparison, on one).

    python benchmarks/study.py                # writes benchmarks/study.json
    python benchmarks/study.py --workers 1    # one worker only
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


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=str(Path(__file__).with_name("study.json")))
    parser.add_argument("--workers", type=int, default=0, help="worker processes (0: every core, and one for comparison)")
    args = parser.parse_args(argv)
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
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
