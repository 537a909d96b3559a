"""Engine benchmarks: one command, figures to a JSON file.

    python benchmarks/run.py                 # full set, writes benchmarks/results.json
    python benchmarks/run.py --scale 0.05    # quick smoke run

Each scenario runs in its own process so its peak memory is its own. The bare event-queue
benchmark runs at the scenario's mean pending-event count, so the engine's speed reads as a ratio
to the event list's own limit on the same machine.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import multiprocessing
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FULL_1024 = {"kind": "xgft", "m": [8, 8, 16], "w": [1, 8, 8]}  # radix-16 switches, full bisection
SLIM_1024 = {"kind": "xgft", "m": [16, 16, 4], "w": [1, 4, 4]}  # the seeds' XGFT(3;16,16,4;1,4,4)
FULL_8192 = {"kind": "xgft", "m": [16, 16, 32], "w": [1, 16, 16]}  # radix-32 switches, full bisection
DRAGONFLY_972 = {"kind": "dragonfly-plus", "preset": "marconi100"}  # 3 groups of 18 x 18 hosts (issue 6)

# (name, topology, load, simulated microseconds at scale 1): long enough for a few million packets.
SCENARIOS = [
    ("fat-tree-1024 uniform load 0.5", FULL_1024, 0.5, 1500.0),
    ("fat-tree-1024 uniform saturated", FULL_1024, "saturate", 1500.0),
    ("xgft-slimmed-1024 uniform load 0.5", SLIM_1024, 0.5, 3000.0),
    ("xgft-slimmed-1024 uniform saturated", SLIM_1024, "saturate", 15000.0),
    ("fat-tree-8192 uniform load 0.5", FULL_8192, 0.5, 300.0),
    ("dragonfly-plus-972 uniform load 0.5 minimal", DRAGONFLY_972, 0.5, 1500.0),
    ("dragonfly-plus-972 uniform load 0.5 adaptive", DRAGONFLY_972, 0.5, 1500.0),
]
# Four 256-rank jobs on the 1024-host fat tree (issue 3): the MPI layer's cost shows as the
# packet-hop rate against the open-loop fat-tree rate. Iterations at scale 1.
JOBS = [
    ("a2a", {"kind": "all-to-all", "bytes": 65536}, 2),
    ("nn", {"kind": "nearest-neighbor", "dims": 3, "bytes": 65536, "compute_us": 10.0}, 40),
    ("allreduce", {"kind": "collective-loop", "collective": "allreduce", "bytes": 1 << 20}, 8),
    ("pairs", {"kind": "random-pairs", "bytes": 65536}, 40),
]
GOALS = {
    "mpi_rate_over_open_loop_rate": 2 / 3,
    "packet_hops_per_second_per_core": 5e6,
    "ratio_to_bare_queue": 1 / 3,
    "peak_memory_bytes_1024": 1 << 30,
    "rate_8192_over_1024": 0.7,
    "dragonfly_rate_over_fat_tree_rate": 0.8,
    "attribution_on_over_off": 0.9,  # issue 16: interference attribution costs under 10% of the hop rate
    "congestion_control_on_over_off": 0.85,  # issue 17: CC on costs at most 15% of the hop rate (load 0.5)
    "startup_seconds": 0.25,  # issue 15: a whole-process `qoslab run` of ft45_u04 (20 µs)
}


def run_scenario(name, topology, load, duration_us, queue, congestion_control=False):
    from qoslab import Scenario, simulate

    routing = {"algorithm": name.rsplit(" ", 1)[-1]} if topology["kind"] == "dragonfly-plus" else {}
    scenario = Scenario(
        name=name,
        topology=topology,
        routing=routing,
        traffic=[{"pattern": "uniform", "load": load, "message_bytes": 4096}],
        run={"duration_us": duration_us, "warmup_us": duration_us / 10},
        # The scenario's defaults (threshold 15, the mellanox-default CCT), every SL controlled.
        congestion_control={"enabled": congestion_control},
    )
    t0 = time.perf_counter()
    summary = simulate(scenario).summary
    wall = time.perf_counter() - t0
    queue.put({
        "name": name,
        "hosts": summary["hosts"],
        "sim_time_ns": summary["sim_time_ns"],
        "wall_seconds": wall,
        "events": summary["events"],
        "packet_hops": summary["packet_hops"],
        "packets_delivered": summary["conservation"]["packets_delivered"],
        "events_per_second": summary["events"] / wall,
        "packet_hops_per_second": summary["packet_hops"] / wall,
        "mean_pending_events": summary["mean_pending_events"],
        "accepted_load": summary["accepted_load"],
        "peak_memory_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
    })


def run_jobs(scale, queue, interference=False):
    from qoslab import Scenario, simulate

    jobs = [{"name": name, "nodes": 256, "placement": "random", "restart": True,
             "workload": {**workload, "iterations": max(1, round(iterations * scale))}}
            for name, workload, iterations in JOBS]
    scenario = Scenario(name="four jobs", topology=FULL_1024, jobs=jobs, run={"interference": interference})
    t0 = time.perf_counter()
    summary = simulate(scenario).summary
    wall = time.perf_counter() - t0
    queue.put({
        "name": "fat-tree-1024 four 256-rank jobs",
        "hosts": summary["hosts"],
        "sim_time_ns": summary["sim_time_ns"],
        "wall_seconds": wall,
        "events": summary["events"],
        "packet_hops": summary["packet_hops"],
        "events_per_second": summary["events"] / wall,
        "packet_hops_per_second": summary["packet_hops"] / wall,
        "mean_pending_events": summary["mean_pending_events"],
        "job_runtimes_us": {name: job["runtime_us"] for name, job in summary["jobs"].items()},
        "peak_memory_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
    })


def bare_queue(pending, operations):
    from qoslab.simulate import bench_event_queue

    return bench_event_queue(int(pending), int(operations), 1)


# The machines this runs on drift in speed over minutes (the same run can take twice as long a few
# minutes later), so goals that compare two rates are measured alternating the cases, best of N.
PAIRED_DRAGONFLY = [("fat-tree-1024 uniform load 0.5", FULL_1024, 500.0),
                    ("dragonfly-plus-972 uniform load 0.5 minimal", DRAGONFLY_972, 500.0),
                    ("dragonfly-plus-972 uniform load 0.5 adaptive", DRAGONFLY_972, 500.0)]
PAIRED_SIZE = [("fat-tree-1024 uniform load 0.5", FULL_1024, 500.0),
               ("fat-tree-8192 uniform load 0.5", FULL_8192, 80.0)]


def in_child(ctx, target, *args, **kwargs):
    """`target(*args, **kwargs, queue=...)` in a fresh process (a fresh heap and caches); its row."""
    queue = ctx.Queue()
    proc = ctx.Process(target=target, args=args, kwargs={**kwargs, "queue": queue})
    proc.start()
    row = queue.get()
    proc.join()
    return row


def alternating(ctx, cases, scale, rounds):
    """Best packet-hop rate of each case over `rounds` rounds that run the cases in turn."""
    best: dict[str, float] = {}
    for _ in range(rounds):
        for name, topology, duration_us in cases:
            row = in_child(ctx, run_scenario, name, topology, 0.5, duration_us * scale)
            best[name] = max(best.get(name, 0.0), row["packet_hops_per_second"])
    return {"rounds": rounds, "duration_us": {name: d * scale for name, _, d in cases},
            "best_packet_hops_per_second": best}


def on_off_cost(ctx, rounds, switch, target, *args):
    """`target(*args)` with its option `switch` off and on, alternating, best rate of N each; also
    each round's on/off ratio (the two runs of a round are next to each other in time, so their
    ratio drifts less with the machine than the best of each side) and their median."""
    best = {False: 0.0, True: 0.0}
    pairs = []
    for _ in range(rounds):
        rate = {}
        for on in (False, True):
            rate[on] = in_child(ctx, target, *args, **{switch: on})["packet_hops_per_second"]
            best[on] = max(best[on], rate[on])
        pairs.append(rate[True] / rate[False])
    return {"rounds": rounds, "best_packet_hops_per_second_off": best[False],
            "best_packet_hops_per_second_on": best[True], "on_over_off": best[True] / best[False],
            "round_ratios": pairs, "median_round_ratio": sorted(pairs)[len(pairs) // 2]}


def attribution_cost(ctx, scale, rounds):
    """The four-jobs run with interference attribution off and on (issue 16: on at most 10% slower)."""
    return on_off_cost(ctx, rounds, "interference", run_jobs, scale)


def congestion_control_cost(ctx, scale, rounds):
    """The 1024-host fat tree at load 0.5 with congestion control off and on (issue 17: on at
    most 15% slower)."""
    return on_off_cost(ctx, rounds, "congestion_control", run_scenario, "fat-tree-1024 uniform load 0.5", FULL_1024,
                       0.5, 500.0 * scale)


# Instruction counts do not drift with the machine: callgrind counts what Simulation::run_reporting and the
# bare queue's hold loop execute. Short runs (callgrind is ~50x slower); simulated microseconds.
INSTRUCTION_RUNS = {
    "fat-tree-1024 uniform load 0.5": 40.0,
    "fat-tree-1024 uniform saturated": 40.0,
    "xgft-slimmed-1024 uniform load 0.5": 150.0,
    "xgft-slimmed-1024 uniform saturated": 150.0,
    "fat-tree-8192 uniform load 0.5": 8.0,
    "dragonfly-plus-972 uniform load 0.5 minimal": 40.0,
    "dragonfly-plus-972 uniform load 0.5 adaptive": 40.0,
}
BARE_OPERATIONS = 1_000_000


def instruction_child(plan_path):
    """Runs inside callgrind: each scenario, then the hold loop at its pending count; then each
    option case off and on; prints rows."""
    from qoslab import Scenario, simulate
    from qoslab.simulate import bench_event_queue

    plan = json.loads(Path(plan_path).read_text())
    rows = []
    for name, topology, load, duration_us in plan["scenarios"]:
        routing = {"algorithm": name.rsplit(" ", 1)[-1]} if topology["kind"] == "dragonfly-plus" else {}
        scenario = Scenario(name=name, topology=topology, routing=routing,
                            traffic=[{"pattern": "uniform", "load": load, "message_bytes": 4096}],
                            run={"duration_us": duration_us, "warmup_us": duration_us / 10})
        summary = simulate(scenario).summary
        bench_event_queue(max(int(summary["mean_pending_events"]), 1), BARE_OPERATIONS, 1)
        rows.append({"name": name, "simulated_us": duration_us, "packet_hops": summary["packet_hops"],
                     "events": summary["events"], "mean_pending_events": summary["mean_pending_events"]})
    options = []
    for name, case, duration_us in plan["options"]:
        for on in (False, True):
            summary = simulate(option_scenario(case, duration_us, on)).summary
            options.append({"name": name, "on": on, "simulated_us": duration_us, "packet_hops": summary["packet_hops"]})
    print(json.dumps({"scenarios": rows, "options": options}))


def option_scenario(case, duration_us, on):
    """The scenario an option's cost is measured on: the four jobs with interference attribution,
    or the 1024-host tree at load 0.5 with congestion control (as `attribution_cost` and
    `congestion_control_cost` run them), `duration_us` long."""
    from qoslab import Scenario

    if case == "interference":
        jobs = [{"name": name, "nodes": 256, "placement": "random", "restart": True,
                 "workload": {**workload, "iterations": iterations}} for name, workload, iterations in JOBS]
        return Scenario(name="four jobs", topology=FULL_1024, jobs=jobs,
                        run={"interference": on, "duration_us": duration_us, "warmup_us": 0.0})
    return Scenario(name="fat-tree-1024 uniform load 0.5", topology=FULL_1024,
                    traffic=[{"pattern": "uniform", "load": 0.5, "message_bytes": 4096}],
                    run={"duration_us": duration_us, "warmup_us": duration_us / 10},
                    congestion_control={"enabled": on})


# Options whose cost is also counted in instructions (hops inside Simulation::run_reporting, off
# and on): name, case for `option_scenario`, simulated microseconds.
OPTION_INSTRUCTION_RUNS = [("attribution", "interference", 400.0), ("congestion control", "congestion_control", 150.0)]


def _under_callgrind(plan, *extra):
    """Runs `plan` (instruction_child) under callgrind with `extra` options: the child's rows and,
    per dump (one as each toggled function returns), its event totals by name."""
    import shutil

    if shutil.which("valgrind") is None:
        sys.exit("benchmarks/run.py --instructions: valgrind is not installed (apt-get install valgrind)")
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "plan.json").write_text(json.dumps(plan))
        out = Path(tmp, "cg.out")
        command = ["valgrind", "--tool=callgrind", "--collect-atstart=no", *extra,
                   "--toggle-collect=*Simulation::run_reporting", "--toggle-collect=*hold_model",
                   "--dump-after=*Simulation::run_reporting", "--dump-after=*hold_model",
                   f"--callgrind-out-file={out}", sys.executable, __file__, "--instructions-child", str(Path(tmp, "plan.json"))]
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            sys.exit(f"benchmarks/run.py --instructions: the run under callgrind failed:\n{done.stderr[-2000:]}")
        result = json.loads(done.stdout.strip().splitlines()[-1])
        dumps = sorted(Path(tmp).glob("cg.out.*"), key=lambda p: int(p.suffix[1:]))
        return result, [callgrind_events(p) for p in dumps]


def instruction_counts():
    """Instructions per packet-hop (inside Simulation::run_reporting) and per bare-queue event, by
    callgrind; and each option's instructions per hop on over off."""
    plan = {"scenarios": [(name, topology, load, INSTRUCTION_RUNS[name]) for name, topology, load, _ in SCENARIOS],
            "options": OPTION_INSTRUCTION_RUNS}
    # Each function's counts are dumped (and reset) as it returns: dumps alternate between a
    # scenario's Simulation::run_reporting and its hold loop, then one per option run.
    result, events = _under_callgrind(plan)
    counts = [e.get("Ir", 0) for e in events]
    rows, options = result["scenarios"], result["options"]
    counts = [c for c in counts if c > 0]
    if len(counts) < 2 * len(rows) + len(options):
        sys.exit(f"benchmarks/run.py --instructions: expected {2 * len(rows) + len(options)} callgrind dumps, "
                 f"found {len(counts)}")
    for i, row in enumerate(rows):
        run_ir, bare_ir = counts[2 * i], counts[2 * i + 1]
        row["instructions_per_packet_hop"] = run_ir / row["packet_hops"]
        row["instructions_per_event"] = run_ir / row["events"]
        row["bare_queue_instructions_per_event"] = bare_ir / BARE_OPERATIONS
        row["instruction_ratio_to_bare_queue"] = row["bare_queue_instructions_per_event"] / row["instructions_per_packet_hop"]
        print(f"{row['name']:40s} {row['instructions_per_packet_hop']:7.0f} instructions/hop  "
              f"bare queue {row['bare_queue_instructions_per_event']:5.0f}/event  "
              f"ratio {row['instruction_ratio_to_bare_queue']:.2f}", flush=True)
    costs = {}
    for i, run in enumerate(options):
        run["instructions_per_packet_hop"] = counts[2 * len(rows) + i] / run["packet_hops"]
    for off, on in zip(options[::2], options[1::2]):
        # Hop rate on over off, as instructions: per hop off over per hop on.
        costs[off["name"]] = {"off": off, "on": on,
                              "on_over_off": off["instructions_per_packet_hop"] / on["instructions_per_packet_hop"]}
        print(f"{off['name'] + ' on/off, by instructions':40s} {costs[off['name']]['on_over_off']:.3f}  "
              f"({off['instructions_per_packet_hop']:.0f} -> {on['instructions_per_packet_hop']:.0f} a hop)", flush=True)
    return {"scenarios": rows, "options": costs}


def callgrind_events(path):
    """A callgrind dump's totals by event name (Ir, and with --cache-sim D1mr, DLmr, ...)."""
    names, totals = [], []
    for line in Path(path).read_text().splitlines():
        if line.startswith("events:"):
            names = line.split()[1:]
        elif line.startswith(("totals:", "summary:")):
            totals = [int(v) for v in line.split()[1:]]
    return dict(zip(names, totals))


# The machine's L2 (1 MiB, 8 ways) as callgrind's last level: with its default (the host's last
# level, tens of MB) a 1024-host run's state fits and nothing misses, yet the options' wall-time
# cost is mostly their extra L2 misses (docs/design/engine.md, "What interference attribution costs").
L2_MODEL = "--LL=1048576,8,64"


def option_cache_misses():
    """Each option's data misses per packet-hop, off and on, in callgrind's cache model with the
    machine's L2 as its last level: deterministic, where wall time drifts."""
    result, events = _under_callgrind({"scenarios": [], "options": OPTION_INSTRUCTION_RUNS}, "--cache-sim=yes", L2_MODEL)
    events = [e for e in events if e.get("Ir", 0) > 0]
    options = result["options"]
    if len(events) < len(options):
        sys.exit(f"benchmarks/run.py --instructions: expected {len(options)} callgrind dumps with the cache model, "
                 f"found {len(events)}")
    for run, e in zip(options, events):
        run["d1_misses_per_packet_hop"] = (e["D1mr"] + e["D1mw"]) / run["packet_hops"]
        run["l2_misses_per_packet_hop"] = (e["DLmr"] + e["DLmw"]) / run["packet_hops"]
    costs = {}
    for off, on in zip(options[::2], options[1::2]):
        costs[off["name"]] = {"off": off, "on": on,
                              "extra_l2_misses_per_packet_hop": on["l2_misses_per_packet_hop"] - off["l2_misses_per_packet_hop"]}
        print(f"{off['name'] + ' on/off, L2 misses a hop':40s} {off['l2_misses_per_packet_hop']:.2f} -> "
              f"{on['l2_misses_per_packet_hop']:.2f}  (D1 {off['d1_misses_per_packet_hop']:.2f} -> "
              f"{on['d1_misses_per_packet_hop']:.2f})", flush=True)
    return costs


# Whole-process start-up: `qoslab run` of the peer race's 20 µs scenario (issue 15's 0.25 s goal).
STARTUP_SCENARIO = Path(__file__).resolve().parent.parent.parent / "shared" / "peers" / "ft45_u04.toml"


def startup(runs=5):
    """Seconds a whole `qoslab run` process takes (best and median of `runs`), or None when the
    scenario is not on this machine. As installed: the package's bytecode is compiled first, which
    the first run would not do under PYTHONDONTWRITEBYTECODE (each run would then compile
    qoslab's sources again, about 6% of its time)."""
    if not STARTUP_SCENARIO.is_file():
        return None
    package = importlib.util.find_spec("qoslab").submodule_search_locations[0]
    subprocess.run([sys.executable, "-m", "compileall", "-q", package], check=True, capture_output=True)
    times = []
    with tempfile.TemporaryDirectory() as out:
        for _ in range(runs + 1):  # the first warms the file cache and is not counted
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-m", "qoslab.cli", "run", str(STARTUP_SCENARIO), "--out", out],
                           check=True, capture_output=True)
            times.append(time.perf_counter() - t0)
    times = sorted(times[1:])
    return {"scenario": STARTUP_SCENARIO.name, "best_seconds": times[0], "median_seconds": times[len(times) // 2]}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=str(Path(__file__).with_name("results.json")))
    parser.add_argument("--scale", type=float, default=1.0, help="multiply every simulated duration")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of the alternating rate comparisons")
    parser.add_argument("--instructions", action="store_true",
                        help="also count instructions per packet-hop with callgrind and the options' L2 misses in its cache "
                             "model (needs valgrind; ~12 min)")
    parser.add_argument("--instructions-child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.instructions_child:
        return instruction_child(args.instructions_child)
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    ctx = multiprocessing.get_context("spawn")
    results = []
    for name, topology, load, duration in SCENARIOS:
        row = in_child(ctx, run_scenario, name, topology, load, duration * args.scale)
        bare = bare_queue(max(row["mean_pending_events"], 1), max(2e6 * args.scale, 1e5))
        row["bare_queue_events_per_second"] = bare["events_per_second"]
        row["ratio_to_bare_queue"] = row["packet_hops_per_second"] / bare["events_per_second"]
        results.append(row)
        print(f"{name:40s} {row['packet_hops_per_second'] / 1e6:6.2f} M hops/s  "
              f"ratio {row['ratio_to_bare_queue']:.2f}  {row['wall_seconds']:6.2f} s  "
              f"{row['peak_memory_bytes'] / 2**20:6.0f} MiB", flush=True)
    paired = alternating(ctx, PAIRED_DRAGONFLY, args.scale, args.rounds)
    best = paired["best_packet_hops_per_second"]
    tree = best[PAIRED_DRAGONFLY[0][0]]
    paired["minimal_over_fat_tree"] = best[PAIRED_DRAGONFLY[1][0]] / tree
    paired["adaptive_over_fat_tree"] = best[PAIRED_DRAGONFLY[2][0]] / tree
    print(f"{f'dragonfly+/fat tree, alternating (best of {args.rounds})':40s} "
          f"minimal {paired['minimal_over_fat_tree']:.2f}  adaptive {paired['adaptive_over_fat_tree']:.2f}", flush=True)
    sizes = alternating(ctx, PAIRED_SIZE, args.scale, args.rounds)
    best_1024, best_8192 = (sizes["best_packet_hops_per_second"][name] for name, _, _ in PAIRED_SIZE)
    sizes["rate_8192_over_1024"] = best_8192 / best_1024
    print(f"{f'8192/1024 hosts, alternating (best of {args.rounds})':40s} {sizes['rate_8192_over_1024']:.2f}  "
          f"best 1024 rate {best_1024 / 1e6:.2f} M hops/s", flush=True)
    instructions = instruction_counts() if args.instructions else None
    if instructions:
        instructions["option_cache_misses"] = option_cache_misses()
    jobs_row = in_child(ctx, run_jobs, args.scale)
    print(f"{jobs_row['name']:40s} {jobs_row['packet_hops_per_second'] / 1e6:6.2f} M hops/s  "
          f"{jobs_row['wall_seconds']:6.2f} s  {jobs_row['peak_memory_bytes'] / 2**20:6.0f} MiB", flush=True)
    attribution = attribution_cost(ctx, args.scale, args.rounds)
    print(f"{f'attribution on/off, alternating (best of {args.rounds})':40s} {attribution['on_over_off']:.2f}  "
          f"(median of rounds {attribution['median_round_ratio']:.2f})", flush=True)
    congestion = congestion_control_cost(ctx, args.scale, args.rounds)
    print(f"{f'congestion control on/off (best of {args.rounds})':40s} {congestion['on_over_off']:.2f}  "
          f"(median of rounds {congestion['median_round_ratio']:.2f})", flush=True)
    start = startup()
    if start:
        print(f"{'qoslab run ' + start['scenario'] + ', whole process':40s} best {start['best_seconds']:.2f} s  "
              f"median {start['median_seconds']:.2f} s", flush=True)
    by_name = {r["name"]: r for r in results}
    rate_1024 = by_name["fat-tree-1024 uniform load 0.5"]["packet_hops_per_second"]
    report = {
        "machine": {"python": sys.version.split()[0], "platform": platform.platform(),
                    "cpus": multiprocessing.cpu_count()},
        "scale": args.scale,
        "scenarios": results,
        "jobs": jobs_row,
        "dragonfly_alternating": paired,
        "size_alternating": sizes,
        "attribution_alternating": attribution,
        "congestion_control_alternating": congestion,
        "instructions": instructions,
        "startup": start,
        "goals": GOALS,
        "figures": {
            "min_packet_hops_per_second": min(r["packet_hops_per_second"] for r in results),
            "min_ratio_to_bare_queue": min(r["ratio_to_bare_queue"] for r in results),
            "max_peak_memory_bytes_1024": max(r["peak_memory_bytes"] for r in results if r["hosts"] == 1024),
            "best_packet_hops_per_second_1024": max(best_1024, rate_1024),
            "rate_8192_over_1024": sizes["rate_8192_over_1024"],
            "dragonfly_rate_over_fat_tree_rate": min(paired["minimal_over_fat_tree"], paired["adaptive_over_fat_tree"]),
            "mpi_rate_over_open_loop_rate": jobs_row["packet_hops_per_second"] / rate_1024,
            "attribution_on_over_off": attribution["on_over_off"],
            "congestion_control_on_over_off": congestion["on_over_off"],
        },
    }
    if instructions:
        scenarios = instructions["scenarios"]
        report["figures"]["max_instructions_per_packet_hop"] = max(r["instructions_per_packet_hop"] for r in scenarios)
        report["figures"]["min_instruction_ratio_to_bare_queue"] = min(
            r["instruction_ratio_to_bare_queue"] for r in scenarios)
        report["figures"]["attribution_on_over_off_by_instructions"] = instructions["options"]["attribution"]["on_over_off"]
        report["figures"]["congestion_control_on_over_off_by_instructions"] = (
            instructions["options"]["congestion control"]["on_over_off"])
        for name, key in (("attribution", "attribution"), ("congestion control", "congestion_control")):
            report["figures"][f"{key}_extra_l2_misses_per_packet_hop"] = (
                instructions["option_cache_misses"][name]["extra_l2_misses_per_packet_hop"])
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report["figures"], indent=2))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
