"""The engine against an earlier version of itself, alternating the two builds in one sitting.

    python benchmarks/versus.py                          # against 9c854c7 on ft45_u04, 2048 µs
    python benchmarks/versus.py --baseline REV --rounds 7 --duration-us 512

Both engines are built with cargo from this repository's history (the baseline in a temporary git
worktree, removed afterwards) and run the same scenario through `examples/perf_run`, A B A B ...,
so that the ratio of their packet-hop rates holds while the machine's speed drifts. The engine
config is the current one, with the keys renamed back to the baseline's names where they changed
(`run.messages` was `record_messages`, `qos.sl2vl_pairs` was `sl2vl_overrides`, `lft` was
`table`). Figures go to benchmarks/versus.json; `same_results` says whether both builds delivered
the same packets (a model change since the baseline shows there).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SCENARIO = ROOT.parent / "shared" / "peers" / "ft45_u04.toml"
RATE = re.compile(r"([\d.]+) s, ([\d.]+) M hops/s")


def build(tree: Path) -> Path:
    subprocess.run(["cargo", "build", "--release", "--quiet", "--example", "perf_run"], cwd=tree, check=True)
    return tree / "target" / "release" / "examples" / "perf_run"


def as_baseline(config: dict) -> dict:
    """The current engine config under the key names the 9c854c7 engine reads."""
    config = json.loads(json.dumps(config))
    run = config["run"]
    run["record_messages"] = run.pop("messages", False)
    qos = config["qos"]
    qos["sl2vl_overrides"] = qos.pop("sl2vl_pairs", [])
    routing = config["routing"]
    if routing.get("algorithm") == "lft":
        routing["algorithm"] = "table"
        routing["table"] = routing.pop("lft")
    return config


def run_once(binary: Path, config: Path, duration_us: float) -> dict:
    done = subprocess.run([str(binary), str(config), str(duration_us)], capture_output=True, text=True, check=False)
    match = RATE.search(done.stderr)
    if done.returncode != 0 or match is None:
        sys.exit(f"benchmarks/versus.py: {binary} failed on {config}:\n{done.stderr[-2000:]}")
    summary = json.loads(done.stdout[: done.stdout.rindex("}") + 1])
    return {"wall_seconds": float(match.group(1)), "packet_hops_per_second": float(match.group(2)) * 1e6,
            "packets_delivered": summary.get("packets_delivered"), "packet_hops": summary.get("packet_hops")}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", default="9c854c7", help="git revision to compare against")
    parser.add_argument("--scenario", default=str(DEFAULT_SCENARIO), help="scenario TOML (default: the peer race's)")
    parser.add_argument("--duration-us", type=float, default=2048.0)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--out", default=str(Path(__file__).with_name("versus.json")))
    args = parser.parse_args(argv)
    if not Path(args.scenario).is_file():
        sys.exit(f"benchmarks/versus.py: no scenario file {args.scenario} (give --scenario)")
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    sys.path.insert(0, str(ROOT / "python"))
    from qoslab import Scenario

    config = Scenario.from_toml(args.scenario).to_engine_config()
    current = build(ROOT)
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / "baseline"
        subprocess.run(["git", "worktree", "add", "--quiet", "--detach", str(tree), args.baseline], cwd=ROOT, check=True)
        try:
            baseline = build(tree)
            current_json, baseline_json = Path(tmp, "current.json"), Path(tmp, "baseline.json")
            current_json.write_text(json.dumps(config))
            baseline_json.write_text(json.dumps(as_baseline(config)))
            rows = []
            for round_ in range(args.rounds):
                a = run_once(current, current_json, args.duration_us)
                b = run_once(baseline, baseline_json, args.duration_us)
                ratio = a["packet_hops_per_second"] / b["packet_hops_per_second"]
                rows.append({"current": a, "baseline": b, "ratio": ratio})
                print(f"round {round_ + 1}: current {a['packet_hops_per_second'] / 1e6:.2f} M hops/s, "
                      f"baseline {b['packet_hops_per_second'] / 1e6:.2f} M hops/s, ratio {ratio:.2f}", flush=True)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT, check=False)
    ratios = [r["ratio"] for r in rows]
    report = {
        "baseline": args.baseline,
        "current": subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                                  text=True).stdout.strip(),
        "scenario": Path(args.scenario).name,
        "duration_us": args.duration_us,
        "rounds": rows,
        "ratio_median": statistics.median(ratios),
        "ratio_min": min(ratios),
        "ratio_max": max(ratios),
        "same_results": all(r["current"]["packet_hops"] == r["baseline"]["packet_hops"]
                            and r["current"]["packets_delivered"] == r["baseline"]["packets_delivered"] for r in rows),
        "goal_ratio": 3.0,
    }
    Path(args.out).write_text(json.dumps(report, indent=1) + "\n")
    print(f"current / {args.baseline}: median {report['ratio_median']:.2f} (min {report['ratio_min']:.2f}, "
          f"max {report['ratio_max']:.2f}); same results: {report['same_results']}; wrote {args.out}")


if __name__ == "__main__":
    main()
