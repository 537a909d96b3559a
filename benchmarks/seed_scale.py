"""Wall time and peak memory of every seed-scale study (examples/*/seed-scale*.toml) on this
machine, each run as `qoslab study FILE` with every core, one after another; figures to
benchmarks/seed_scale.json. The studies' outputs stay in --out (their tables feed
docs/reproductions.md). Goal (issue 14): each study within 30 minutes on two cores, under 4 GB.

    python benchmarks/seed_scale.py [--out DIR] [--only NAME ...]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GOALS = {"wall_seconds": 30 * 60, "peak_tree_memory_bytes": 4 << 30}


def studies() -> list[Path]:
    return sorted(ROOT.glob("examples/*/seed-scale*.toml"))


def _tree_rss(pid: int) -> int:
    """Resident bytes of a process and all its descendants (from /proc)."""
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        try:
            status = Path(f"/proc/{p}/status").read_text()
            total += next(int(line.split()[1]) * 1024 for line in status.splitlines() if line.startswith("VmRSS:"))
            for task in Path(f"/proc/{p}/task").iterdir():
                todo += [int(c) for c in (task / "children").read_text().split()]
        except (OSError, StopIteration, ValueError):
            continue
    return total


def run(study: Path, out: Path) -> dict:
    qoslab = [sys.executable, "-m", "qoslab.cli"]
    plan = subprocess.run([*qoslab, "study", str(study), "--plan", "--out", str(out)], capture_output=True, text=True)
    size = json.loads((out / "plan.json").read_text()) if plan.returncode == 0 else {}
    peak = 0
    start = time.perf_counter()
    proc = subprocess.Popen([*qoslab, "study", str(study), "--out", str(out)], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, _tree_rss(proc.pid))
            done.wait(0.5)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    output, _ = proc.communicate()
    wall = time.perf_counter() - start
    done.set()
    sampler.join()
    return {
        "study": str(study.relative_to(ROOT)),
        "name": size.get("study"),
        "runs": size.get("runs"),
        "hosts": size.get("hosts"),
        "ranks": sum(j["ranks"] for j in size.get("jobs", {}).values()),
        "exit_code": proc.returncode,
        "wall_seconds": wall,
        "peak_tree_memory_bytes": peak,
        "within_goals": wall <= GOALS["wall_seconds"] and peak <= GOALS["peak_tree_memory_bytes"],
        "out": str(out),
        "last_lines": output.splitlines()[-3:],
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="/tmp/qoslab-seed-scale", help="where the studies' outputs go")
    parser.add_argument("--only", nargs="*", help="study files to run (default: every seed-scale file)")
    parser.add_argument("--json", default=str(Path(__file__).with_name("seed_scale.json")))
    args = parser.parse_args(argv)
    chosen = [Path(p).resolve() for p in args.only] if args.only else studies()
    path = Path(args.json)
    report = json.loads(path.read_text()) if path.exists() else {}
    rows = {r["study"]: r for r in report.get("studies", [])}
    for study in chosen:
        out = Path(args.out) / f"{study.parent.name}-{study.stem}"
        row = run(study, out)
        rows[row["study"]] = row
        print(f"{row['study']:55s} {row['runs']} runs  {row['wall_seconds'] / 60:6.1f} min  "
              f"{row['peak_tree_memory_bytes'] / 2**30:5.2f} GiB  exit {row['exit_code']}", flush=True)
        report = {"machine": {"python": sys.version.split()[0], "platform": platform.platform(),
                              "cpus": os.cpu_count()},
                  "goals": GOALS, "studies": [rows[k] for k in sorted(rows)]}
        path.write_text(json.dumps(report, indent=2) + "\n")  # after each study: nothing is lost
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
