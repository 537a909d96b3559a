"""The runs of a tail-latency study, found without running anything: per background snapshot the
other users' jobs on their hosts and b at the measured job's start; per locality the measured
job's hosts; per routing one run (docs/dragonfly.md)."""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

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

NO_BACKGROUND = -1  # the snapshot index of the baseline runs
_RNG_SNAPSHOT = 11  # purpose number of the snapshot random streams


@dataclass
class Snapshot:
    index: int
    background: list[tuple[int, ...]]  # hosts of every running job (one-node jobs included)
    workloads: list[dict[str, Any] | None]  # what each runs on the fabric (None: no network traffic)
    label: str  # where it came from (log time, or the synthetic occupancy)


class TailPlan:
    def __init__(self, study: TailStudy):
        self.study = study
        base = study.base()
        self.base = base
        self.data = base.model_dump(exclude_unset=True)
        self.data.pop("jobs", None)
        self.data["topology"] = base.topology.model_dump()
        self.groups = base.host_groups()
        self.hosts = base.host_count()
        self.log = self._read_log()

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


    def size(self) -> dict[str, Any]:
        """What `qoslab study --plan` shows (background jobs differ per snapshot: their count and
        hosts are given as ranges)."""
        specs, plan = self.plan()
        t = self.study.target
        placed = plan[plan["run_id"].notna()]
        return {
            "runs": len(specs),
            "hosts": self.hosts,
            "jobs": {t.name: {"nodes": t.nodes, "ranks": t.nodes * t.ranks_per_node, "ranks_per_node": t.ranks_per_node}},
            "snapshots": self.study.snapshots + (1 if self.study.baseline else 0),
            "localities": list(self.study.localities),
            "routings": [r.label for r in self.study.routings],
            "not_placed": int(plan["run_id"].isna().sum()),
            "background_jobs": [int(placed["background_jobs"].min()), int(placed["background_jobs"].max())] if len(placed) else [0, 0],
        }
