"""The runs of a tail-latency study, found without running anything: per background snapshot the
other users' jobs on their hosts and b at the measured job's start; per target (measured job) and
locality its hosts; per routing one run (docs/dragonfly.md). Every target sees the same snapshots,
so targets compare on equal backgrounds."""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd

from qoslab.analysis.tail import CC_SUFFIX
from qoslab.io.scheduler import (
    SchedulerJob,
    background_traffic,
    map_snapshot,
    read_jobcomp,
    read_sacct,
    read_sacct_json,
    read_swf,
    running_at,
)
from qoslab.jobs import Job
from qoslab.placement import PlacementError, place_jobs
from qoslab.study.tail_model import NAMED_SOURCES, RoutingChoice, TailStudy, Target
from qoslab.sweep.execute import RunSpec, run_id

NO_BACKGROUND = -1  # the snapshot index of the baseline runs
_RNG_SNAPSHOT = 11  # purpose number of the snapshot random streams
_LOG_DRAWS = 1000  # instants of a log tried for one snapshot before giving up (see snapshot())
_SYNTHETIC_MISSES = 1000  # synthetic jobs in a row too large for what is left before a snapshot is full


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
        groups = base.host_groups()
        assert groups is not None  # TailStudy refuses topologies other than dragonfly-plus
        self.groups = groups
        self.hosts = base.host_count()
        self.targets = study.all_targets()
        # Snapshots are shared by every target, so each leaves room for the largest.
        self.room_for = max(t.nodes for t in self.targets)
        self.log = self._read_log()

    def _read_log(self) -> list[SchedulerJob] | None:
        bg = self.study.background
        if bg.source == "synthetic":
            return None
        assert bg.log is not None  # the background model requires a log for every other source
        if bg.source == "sacct":
            jobs = read_sacct(self.study.resolve(bg.log))
        elif bg.source == "sacct-json":
            jobs = read_sacct_json(self.study.resolve(bg.log))
        elif bg.source == "jobcomp":
            jobs = read_jobcomp(self.study.resolve(bg.log))
        else:
            jobs = read_swf(self.study.resolve(bg.log), bg.procs_per_node, assume_zero_wait=bg.assume_zero_wait)
        if not jobs:
            raise self.study._error("background.log", f"{bg.log}: no job that started: nothing to draw a background "
                                    "from")
        return jobs

    def host_names(self) -> list[str]:
        import hostlist

        bg = self.study.background
        if bg.host_names is None:
            return [f"H{h}" for h in range(self.hosts)]
        try:
            names = hostlist.expand_hostlist(bg.host_names)
        except hostlist.BadHostlist as error:
            raise self.study._error("background.host_names", f"{bg.host_names!r}: not a Slurm host list ({error})") \
                from None
        if len(names) != self.hosts:
            raise self.study._error("background.host_names", f"names {len(names)} hosts, the fabric has {self.hosts}")
        return names

    def snapshot(self, index: int) -> Snapshot:
        """The background of snapshot `index` (deterministic in the scenario seed and index)."""
        bg = self.study.background
        rng = np.random.default_rng([self.base.seed, _RNG_SNAPSHOT, index])
        if bg.source == "synthetic":
            low_occupancy, high_occupancy = bg.occupancy
            busy = rng.uniform(low_occupancy, high_occupancy)
            room = int(busy * self.hosts)
            room = min(room, self.hosts - self.room_for)
            sizes: list[int] = []
            low, high = bg.job_nodes
            smallest = 1 if bg.single_node_fraction > 0 else low
            # Jobs are drawn until the busy fraction is reached: one that does not fit in what is left
            # is passed over and the next drawn, as a scheduler backfills (until 2026-11-27 the first
            # that did not fit ended the snapshot, 16 points below its busy fraction on average).
            misses = 0
            while room - sum(sizes) >= smallest and misses < _SYNTHETIC_MISSES:
                size = 1 if rng.random() < bg.single_node_fraction else round(math.exp(rng.uniform(math.log(low), math.log(high))))
                if sum(sizes) + size > room:
                    misses += 1
                    continue
                sizes.append(size)
                misses = 0
            background = self._place(sizes, bg.placement, rng)
            label = f"synthetic, {sum(sizes) / self.hosts:.0%} busy"
        else:
            assert self.log is not None
            start = min(j.start for j in self.log)
            end = max(j.end if j.end is not None else j.start for j in self.log)
            t = float(rng.uniform(start, end))
            running = running_at(self.log, t)
            if bg.source in NAMED_SOURCES:
                background = [hosts for _, hosts in map_snapshot(running, self.host_names())]
            else:
                # Jobs too large to run beside the measured one are left out (said by `warnings`).
                running = self._scaled(self._fitting(running))
                # A job starts when the machine has room for it: an instant without room for the
                # measured job (a scaled log near full, say) is not one at which it could start.
                for _ in range(_LOG_DRAWS):
                    if sum(j.node_count for j in running) <= self.hosts - self.room_for:
                        break
                    t = float(rng.uniform(start, end))
                    running = self._scaled(self._fitting(running_at(self.log, t)))
                else:
                    scale = f" scaled by {bg.scale_nodes:g}" if bg.scale_nodes is not None else ""
                    raise self.study._error("background.log", f"in {_LOG_DRAWS} instants of the log, none left "
                                            f"{self.room_for} of the fabric's {self.hosts} hosts free for the measured "
                                            f"job (its running jobs{scale} fill the fabric)")
                background = [hosts for _, hosts in map_snapshot(running, self.host_names(), rng=rng,
                                                                 placement="contiguous" if bg.placement == "scheduler" else "random")]
            label = f"{bg.source} at t = {t:.0f} s"
        workloads = [None if len(h) < 2 else bg.workloads[int(rng.integers(len(bg.workloads)))].model_dump()
                     for h in background]
        return Snapshot(index, background, workloads, label)

    def _fitting(self, running: list[SchedulerJob]) -> list[SchedulerJob]:
        return [j for j in running if j.node_count <= self.hosts - self.room_for]

    def warnings(self) -> list[str]:
        """Log jobs that never appear in a snapshot: larger than the hosts the measured job leaves
        free (their share of the log's node-seconds says how much is lost)."""
        if self.log is None or self.study.background.source in NAMED_SOURCES:
            return []
        dropped = [j for j in self.log if j.node_count > self.hosts - self.room_for]
        if not dropped:
            return []

        def node_seconds(jobs: list[SchedulerJob]) -> float:
            return sum(j.node_count * ((j.end if j.end is not None else j.start) - j.start) for j in jobs)

        total = node_seconds(self.log)
        share = f", {node_seconds(dropped) / total:.1%} of its node-seconds" if total > 0 else ""
        return [f"background.log: {len(dropped)} job(s) of the log{share}, need more than the "
                f"{self.hosts - self.room_for} hosts the measured job leaves free and are left out of every "
                "snapshot (before any scaling); scale the log to the fabric with background.scale_nodes"]

    def _scaled(self, running: list[SchedulerJob]) -> list[SchedulerJob]:
        """SWF jobs with `background.scale_nodes`: a job of n > 1 nodes on round(n x f) nodes, a
        one-node job as round(f) one-node jobs, so the log's busy share of its machine, and the
        heuristic b, carry over to the fabric, and serial work stays off the network."""
        f = self.study.background.scale_nodes
        if f is None:
            return running
        out = []
        for job in running:
            if job.node_count == 1:
                out += [job] * math.floor(f + 0.5)
            else:
                out.append(replace(job, node_count=min(math.floor(job.node_count * f + 0.5), self.hosts)))
        return out

    def _place(self, sizes: list[int], placement: str, rng: np.random.Generator) -> list[tuple[int, ...]]:
        jobs = [Job(nodes=n, placement="scheduler" if placement == "scheduler" else "random",
                    workload={"kind": "ping-pong"}) for n in sizes]
        seed = int(rng.integers(2**63))
        return [tuple(h) for h in place_jobs(jobs, self.hosts, self.base.hosts_per_leaf(), seed, self.groups)]

    def target_hosts(self, snap: Snapshot, locality: str, target: Target | None = None) -> list[int]:
        """A measured job's hosts (the first target's by default) among those the background
        leaves free. Targets of the same size get the same hosts in a snapshot and locality."""
        used = sorted({h for hosts in snap.background for h in hosts})
        jobs = [Job(placement="hosts", hosts=used, share_hosts=False, workload={"kind": "ping-pong"})] if used else []
        jobs.append(Job.model_validate({"nodes": (target or self.targets[0]).nodes, "placement": locality,
                                        "workload": {"kind": "ping-pong"}}))
        placed = place_jobs(jobs, self.hosts, self.base.hosts_per_leaf(), self.base.seed + 7919 * (snap.index + 2),
                            self.groups)
        return placed[-1]

    def configurations(self) -> list[tuple[RoutingChoice, bool | None]]:
        """Each routing, with congestion control as the study sets it (None: as the scenario has it)."""
        settings: list[bool | None] = [None] if self.study.congestion_control is None else [*self.study.congestion_control]
        return [(routing, cc) for routing in self.study.routings for cc in settings]

    @staticmethod
    def label(routing: RoutingChoice, cc: bool | None) -> str:
        """The run's routing label: "+cc" added when the study turns congestion control on."""
        return f"{routing.label}{CC_SUFFIX}" if cc else routing.label

    def spec(self, snap: Snapshot, locality: str, routing: RoutingChoice, target: list[int],
             measured: Target | None = None, cc: bool | None = None) -> RunSpec:
        t = measured or self.targets[0]
        scenario = copy.deepcopy(self.data)
        scenario["routing"] = routing.scenario_routing()
        if cc is not None and cc != self.base.congestion_control.enabled:
            scenario["congestion_control"] = {**scenario.get("congestion_control", {}), "enabled": cc}
        job = {"name": t.name, "placement": "hosts", "hosts": target, "ranks_per_node": t.ranks_per_node,
               "restart": False, "workload": t.workload.model_dump()}
        if t.sl:  # only when set, so that run ids stay what they were
            job["sl"] = t.sl
        scenario["jobs"] = [job]
        for k, (hosts, workload) in enumerate(zip(snap.background, snap.workloads)):
            if workload is not None:
                scenario["jobs"].append({"name": f"bg{k}", "placement": "hosts", "hosts": list(hosts),
                                         "restart": True, "workload": workload})
        label = f"{locality}-{self.label(routing, cc)}"
        if self.study.several_targets:  # a single [target] keeps the labels, so the run ids, it always had
            label = f"{t.name}-{label}"
        return RunSpec(run_id=run_id(max(snap.index, 0), f"s{snap.index}-{label}", scenario), repetition=snap.index,
                       seed=self.base.seed, policy=label, mode="tail", alone_job=None, scenario=scenario,
                       source=self.study.scenario_source())

    def snapshots(self) -> list[Snapshot]:
        """The baseline (no background) if asked for, then every background snapshot."""
        snapshots = [Snapshot(NO_BACKGROUND, [], [], "no background")] if self.study.baseline else []
        return snapshots + [self.snapshot(i) for i in range(self.study.snapshots)]

    def plan(self) -> tuple[list[RunSpec], pd.DataFrame]:
        """Every run, and one row per run describing it (target, snapshot, locality, routing, b)."""
        specs, rows = [], []
        for snap in self.snapshots():
            placed: dict[tuple[int, str], list[int] | PlacementError] = {}  # targets of one size share hosts
            for measured in self.targets:
                for locality in self.study.localities:
                    key = (measured.nodes, locality)
                    if key not in placed:
                        try:
                            placed[key] = self.target_hosts(snap, locality, measured)
                        except PlacementError as error:
                            placed[key] = error
                    target = placed[key]
                    if isinstance(target, PlacementError):
                        rows.append({"target": measured.name, "snapshot": snap.index, "locality": locality,
                                     "routing": None, "run_id": None, "b": math.nan, "background": snap.label,
                                     "error": f"target not placed: {target.message}"})
                        continue
                    b = background_traffic(target, snap.background, self.groups, definition=self.study.heuristic) \
                        if snap.background else 0.0
                    for routing, cc in self.configurations():
                        spec = self.spec(snap, locality, routing, target, measured, cc)
                        specs.append(spec)
                        rows.append({"target": measured.name, "snapshot": snap.index, "locality": locality,
                                     "routing": self.label(routing, cc), "run_id": spec.run_id,
                                     "b": float(b), "background": snap.label, "error": None,
                                     "background_jobs": len(snap.background),
                                     "background_hosts": len({h for hosts in snap.background for h in hosts}),
                                     "target_groups": len({self.groups[h] for h in target})})
        return specs, pd.DataFrame(rows)


    def size(self) -> dict[str, Any]:
        """What `qoslab study --plan` shows (background jobs differ per snapshot: their count and
        hosts are given as ranges)."""
        specs, plan = self.plan()
        placed = plan[plan["run_id"].notna()]
        jobs = {t.name: {"nodes": t.nodes, "ranks": t.nodes * t.ranks_per_node, "ranks_per_node": t.ranks_per_node}
                for t in self.targets}
        return {
            "runs": len(specs),
            "hosts": self.hosts,
            "jobs": jobs,
            "targets": [t.name for t in self.targets],
            "runs_per_target": {t.name: int((placed["target"] == t.name).sum()) for t in self.targets},
            "snapshots": self.study.snapshots + (1 if self.study.baseline else 0),
            "localities": list(self.study.localities),
            "routings": [self.label(r, cc) for r, cc in self.configurations()],
            "not_placed": int(plan["run_id"].isna().sum()),
            "background_jobs": [int(placed["background_jobs"].min()), int(placed["background_jobs"].max())] if len(placed) else [0, 0],
            "warnings": self.warnings(),
        }
