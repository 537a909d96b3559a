"""Runs a tail-latency study: per background snapshot, the other users' jobs on their hosts and b
at the measured job's start; per locality the measured job's hosts; per routing one run. Each run
is stored the moment it finishes (an interrupted study resumes), then the tables and report."""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
)

from qoslab._version import __version__
from qoslab.io.scheduler import (
    SchedulerJob,
    background_traffic,
    map_snapshot,
    read_jobcomp,
    read_sacct,
    read_swf,
    running_at,
)
from qoslab.jobs import Job
from qoslab.placement import PlacementError, place_jobs
from qoslab.study.tail_model import RoutingChoice, TailStudy
from qoslab.sweep.execute import RunSpec, run_id
from qoslab.sweep.executors import Executor
from qoslab.sweep.store import RunStore, write_tables

NO_BACKGROUND = -1  # the snapshot index of the baseline runs
_RNG_SNAPSHOT = 11  # purpose number of the snapshot random streams


@dataclass
class Snapshot:
    index: int
    background: list[tuple[int, ...]]  # hosts of every running job (one-node jobs included)
    workloads: list[dict[str, Any] | None]  # what each runs on the fabric (None: no network traffic)
    label: str  # where it came from (log time, or the synthetic occupancy)


@dataclass
class TailOutcome:
    out: Path
    tables: dict[str, pd.DataFrame]
    runs_total: int
    runs_reused: int
    failed: list[dict[str, Any]] = field(default_factory=list)
    written: list[Path] = field(default_factory=list)
    report_error: str | None = None


class TailStudyRunner:
    def __init__(self, study: TailStudy, out: str | Path, executor: Executor, console: Console | None = None,
                 progress: bool = True):
        self.study, self.out, self.executor = study, Path(out), executor
        self.console = console or Console(stderr=True)
        self.show_progress = progress
        self.store = RunStore(self.out / "runs")
        base = study.base()
        self.base = base
        self.data = base.model_dump(exclude_unset=True)
        self.data.pop("jobs", None)
        self.data["topology"] = base.topology.model_dump()
        self.groups = base.host_groups()
        self.hosts = base.host_count()
        self.log = self._read_log()

    # -- planning -----------------------------------------------------------------------------

    def _read_log(self) -> list[SchedulerJob] | None:
        bg = self.study.background
        if bg.source == "sacct":
            return read_sacct(self.study.resolve(bg.log))
        if bg.source == "jobcomp":
            return read_jobcomp(self.study.resolve(bg.log))
        if bg.source == "swf":
            return read_swf(self.study.resolve(bg.log), bg.procs_per_node)
        return None

    def host_names(self) -> list[str]:
        import hostlist

        bg = self.study.background
        if bg.host_names is None:
            return [f"H{h}" for h in range(self.hosts)]
        names = hostlist.expand_hostlist(bg.host_names)
        if len(names) != self.hosts:
            raise ValueError(f"background.host_names names {len(names)} hosts, the fabric has {self.hosts}")
        return names

    def snapshot(self, index: int) -> Snapshot:
        """The background of snapshot `index` (deterministic in the scenario seed and index)."""
        bg = self.study.background
        rng = np.random.default_rng([self.base.seed, _RNG_SNAPSHOT, index])
        if bg.source == "synthetic":
            busy = rng.uniform(*bg.occupancy)
            room = int(busy * self.hosts)
            room = min(room, self.hosts - self.study.target.nodes)
            sizes: list[int] = []
            low, high = bg.job_nodes
            while True:
                size = 1 if rng.random() < bg.single_node_fraction else int(round(math.exp(rng.uniform(math.log(low), math.log(high)))))
                if sum(sizes) + size > room:
                    break
                sizes.append(size)
            background = self._place(sizes, bg.placement, rng)
            label = f"synthetic, {busy:.0%} busy"
        else:
            assert self.log is not None
            start = min(j.start for j in self.log)
            end = max(j.end if j.end is not None else j.start for j in self.log)
            t = float(rng.uniform(start, end))
            running = running_at(self.log, t)
            if bg.source in ("sacct", "jobcomp"):
                background = [hosts for _, hosts in map_snapshot(running, self.host_names())]
            else:
                running = [j for j in running if j.node_count <= self.hosts - self.study.target.nodes]
                background = [hosts for _, hosts in map_snapshot(running, self.host_names(), rng=rng,
                                                                 placement="contiguous" if bg.placement == "scheduler" else "random")]
            label = f"{bg.source} at t = {t:.0f} s"
        workloads = [None if len(h) < 2 else bg.workloads[int(rng.integers(len(bg.workloads)))].model_dump()
                     for h in background]
        return Snapshot(index, background, workloads, label)

    def _place(self, sizes: list[int], placement: str, rng: np.random.Generator) -> list[tuple[int, ...]]:
        jobs = [Job(nodes=n, placement="scheduler" if placement == "scheduler" else "random",
                    workload={"kind": "ping-pong"}) for n in sizes]
        seed = int(rng.integers(2**63))
        return [tuple(h) for h in place_jobs(jobs, self.hosts, self.base.hosts_per_leaf(), seed, self.groups)]

    def target_hosts(self, snap: Snapshot, locality: str) -> list[int]:
        """The measured job's hosts among those the background leaves free."""
        used = sorted({h for hosts in snap.background for h in hosts})
        jobs = [Job(placement="hosts", hosts=used, share_hosts=False, workload={"kind": "ping-pong"})] if used else []
        jobs.append(Job(nodes=self.study.target.nodes, placement=locality, workload={"kind": "ping-pong"}))
        placed = place_jobs(jobs, self.hosts, self.base.hosts_per_leaf(), self.base.seed + 7919 * (snap.index + 2),
                            self.groups)
        return placed[-1]

    def spec(self, snap: Snapshot, locality: str, routing: RoutingChoice, target: list[int]) -> RunSpec:
        t = self.study.target
        scenario = copy.deepcopy(self.data)
        scenario["routing"] = routing.scenario_routing()
        scenario["jobs"] = [{"name": t.name, "placement": "hosts", "hosts": target, "ranks_per_node": t.ranks_per_node,
                             "restart": False, "workload": t.workload.model_dump()}]
        for k, (hosts, workload) in enumerate(zip(snap.background, snap.workloads)):
            if workload is not None:
                scenario["jobs"].append({"name": f"bg{k}", "placement": "hosts", "hosts": list(hosts),
                                         "restart": True, "workload": workload})
        label = f"{locality}-{routing.label}"
        return RunSpec(run_id=run_id(max(snap.index, 0), f"s{snap.index}-{label}", scenario), repetition=snap.index,
                       seed=self.base.seed, policy=label, mode="shared", alone_job=None, scenario=scenario,
                       source=self.study.scenario_source())

    def plan(self) -> tuple[list[RunSpec], pd.DataFrame]:
        """Every run, and one row per run describing it (snapshot, locality, routing, b)."""
        specs, rows = [], []
        snapshots = [Snapshot(NO_BACKGROUND, [], [], "no background")] if self.study.baseline else []
        snapshots += [self.snapshot(i) for i in range(self.study.snapshots)]
        for snap in snapshots:
            for locality in self.study.localities:
                try:
                    target = self.target_hosts(snap, locality)
                except PlacementError as error:
                    rows.append({"snapshot": snap.index, "locality": locality, "routing": None, "run_id": None,
                                 "b": math.nan, "background": snap.label, "error": f"target not placed: {error.message}"})
                    continue
                b = background_traffic(target, snap.background, self.groups, definition=self.study.heuristic) \
                    if snap.background else 0.0
                for routing in self.study.routings:
                    spec = self.spec(snap, locality, routing, target)
                    specs.append(spec)
                    rows.append({"snapshot": snap.index, "locality": locality, "routing": routing.label, "run_id": spec.run_id,
                                 "b": float(b), "background": snap.label, "error": None,
                                 "background_jobs": len(snap.background),
                                 "background_hosts": len({h for hosts in snap.background for h in hosts}),
                                 "target_groups": len({self.groups[h] for h in target})})
        return specs, pd.DataFrame(rows)

    # -- running ------------------------------------------------------------------------------

    def run(self) -> TailOutcome:
        specs, plan = self.plan()
        todo = [s for s in specs if not self.store.finished(s.run_id)]
        with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      console=self.console, disable=not self.show_progress or not todo) as progress:
            task = progress.add_task(f"tail-latency runs ({self.executor.workers} workers)", total=len(specs),
                                     completed=len(specs) - len(todo))
            for record in self.executor.run(todo):
                self.store.put(record)
                progress.advance(task)
        return self._finish(specs, plan, len(specs) - len(todo))

    def _finish(self, specs: list[RunSpec], plan: pd.DataFrame, reused: int) -> TailOutcome:
        tables = tail_tables(self.store, plan, self.study.target.name)
        written = write_tables(tables, self.out)
        failed = tables["tail_runs"][tables["tail_runs"]["status"] != "completed"].to_dict("records")
        outcome = TailOutcome(self.out, tables, len(specs), reused, failed, written)
        try:
            from qoslab.report.tail import write_tail_report

            meta = {"name": self.study.title(), "description": self.study.description, "qoslab_version": __version__,
                    "heuristic": self.study.heuristic, "tail_quantile": self.study.tail_quantile,
                    "fabric": self.base.topology.model_dump(), "target": self.study.target.model_dump()}
            outcome.written.append(write_tail_report(self.out, tables, meta))
        except Exception as error:  # the tables are written; a report bug must not lose them
            outcome.report_error = f"{type(error).__name__}: {error}"
        return outcome


def tail_tables(store: RunStore, plan: pd.DataFrame, target: str) -> dict[str, pd.DataFrame]:
    """tail_runs (one row per run: plan + status) and tail_iterations (one row per measured
    iteration: its latency is the slowest rank's time, as a collective completes for all)."""
    runs, samples = [], []
    for row in plan.to_dict("records"):
        if not isinstance(row["run_id"], str):  # the measured job could not be placed
            runs.append({**row, "status": "not placed"})
            continue
        record = store.get(row["run_id"]) if store.has(row["run_id"]) else None
        status = record["run"]["status"] if record else "missing"
        runs.append({**row, "status": status, "error": (record["run"]["error"] if record else "run not stored")})
        if record is None or status != "completed":
            continue
        frame = record["iterations"].to_pandas()
        frame = frame[frame["job"] == target]
        if "run" in frame.columns:
            frame = frame[frame["run"] == 0]
        per_iteration = frame.groupby("iteration")["time_ns"].max().reset_index()
        per_iteration = per_iteration.rename(columns={"time_ns": "latency_ns"})
        for key in ("snapshot", "locality", "routing", "b"):
            per_iteration[key] = row[key]
        samples.append(per_iteration)
    columns = ["snapshot", "locality", "routing", "b", "iteration", "latency_ns"]
    iterations = pd.concat(samples, ignore_index=True)[columns] if samples else pd.DataFrame(columns=columns)
    return {"tail_runs": pd.DataFrame(runs), "tail_iterations": iterations}
