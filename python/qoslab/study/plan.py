"""The runs a study needs: per repetition, the jobs placed once (so every run of the repetition
uses the same hosts), each job alone, and all jobs together under each policy."""

from __future__ import annotations

import copy
import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import pandas as pd

from qoslab.policies import AloneRun, Policy, PolicyContext
from qoslab.scenario import Scenario, with_data_vls
from qoslab.study.model import Study
from qoslab.sweep.execute import RunSpec, run_id
from qoslab.vlarb import Granularity

ALONE = "alone"


@dataclass
class Repetition:
    index: int
    seed: int
    scenario: dict[str, Any]  # resolved: every job on explicit hosts
    jobs: list[str]
    ranks: dict[str, int]


class StudyPlan:
    """The runs of a study, or of one point of its sweep (`point`: the swept keys' values)."""

    def __init__(self, study: Study, point: dict[str, Any] | None = None):
        self.study = study
        self.source = study.scenario_source()
        self.point = point or {}
        self.data = study.point_data(point)
        base = Scenario.from_dict(self.data, self.source) if point else study.base()
        self.data_vls = base.fabric.data_vls
        self.layers = base.routing.vls or 1  # routing's VL layers: a policy's levels use data_vls // layers
        self.link_gbps = float(base.fabric.link_gbps)
        self.granularity = Granularity.of(base)
        # How each job's hosts are chosen, as the study file gives it: the stored scenarios list
        # every job's hosts (placement = "hosts"), which would hide a placement drawn per seed.
        self.placement = {name: job.placement for name, job in zip(base.job_names(), base.jobs, strict=True)}
        self.repetitions = []
        self._by_vls: dict[tuple[int, int], dict[str, Any]] = {}
        for index, seed in enumerate(study.seed_list()):
            placed = Scenario.from_dict({**self.data, "seed": seed}, self.source)
            resolved = placed.resolved()
            names = placed.job_names()
            ranks = {n: len(h) * j.ranks_per_node for n, h, j in zip(names, placed.placements(), placed.jobs)}
            self.repetitions.append(Repetition(index, seed, resolved, names, ranks))

    def context(self, rep: Repetition) -> PolicyContext:
        return PolicyContext(repetition=rep.index, seed=rep.seed, jobs=rep.jobs, ranks=rep.ranks,
                             qos_vls=self.data_vls // self.layers, granularity=self.granularity)

    def qos_vls(self, policy: Policy) -> int:
        """The VLs `policy`'s levels may use in this plan's runs (QosVls.count)."""
        return policy.qos_vls(self.data_vls, self.layers).count

    def scenario_for(self, rep: Repetition, policy: Policy, ctx: PolicyContext) -> tuple[dict[str, Any], PolicyContext]:
        """The repetition's resolved scenario and context as `policy` runs them: with its own
        data_vls, the scenario is resolved again from its keys (default QoS tables and the port
        buffer's division follow the VL count; the jobs keep their hosts, drawn from the seed)."""
        n = policy.data_vls
        if n is None or n == self.data_vls:
            return rep.scenario, ctx
        key = (rep.index, n)
        if key not in self._by_vls:
            placed = Scenario.from_dict(with_data_vls({**self.data, "seed": rep.seed}, n), self.source)
            scenario = placed.resolved()
            assert [j["hosts"] for j in scenario["jobs"]] == [j["hosts"] for j in rep.scenario["jobs"]], \
                "placement does not depend on the VL count"
            self._by_vls[key] = scenario
        return self._by_vls[key], dataclasses.replace(ctx, qos_vls=self.qos_vls(policy))

    def alone_spec(self, rep: Repetition, job: str) -> RunSpec:
        scenario = copy.deepcopy(rep.scenario)
        scenario["jobs"] = [j for j in scenario["jobs"] if j["name"] == job]
        scenario["traffic"] = []  # alone means alone: no open-loop background either
        only = scenario["jobs"][0]
        only["sl"] = 0
        only.pop("sl_policy", None)
        return self._spec(rep, ALONE, "alone", job, scenario)

    def alone_specs(self) -> list[RunSpec]:
        return [self.alone_spec(rep, job) for rep in self.repetitions for job in rep.jobs]

    def shared_spec(self, rep: Repetition, policy: Policy, ctx: PolicyContext) -> RunSpec:
        """The shared run of `policy`; raises PolicyError if the policy cannot be applied."""
        scenario, ctx = self.scenario_for(rep, policy, ctx)
        return self._spec(rep, policy.label(), "shared", None, policy.apply(scenario, ctx))

    def failed_spec(self, rep: Repetition, policy: Policy) -> RunSpec:
        """A placeholder spec for a policy that could not be applied (its record is the error)."""
        return self._spec(rep, policy.label(), "shared", None, {"unapplied": policy.label()})

    def _spec(self, rep: Repetition, policy: str, mode: str, alone_job: str | None, scenario: dict[str, Any]) -> RunSpec:
        label = f"{mode}-{alone_job}" if alone_job else policy
        return RunSpec(
            run_id=run_id(rep.index, label, {**scenario, "_mode": mode}),
            repetition=rep.index,
            seed=rep.seed,
            policy=policy,
            mode=mode,
            alone_job=alone_job,
            scenario=scenario,
            source=self.source,
        )

    def alone_run(self, record: dict[str, Any], job: str) -> AloneRun:
        rows = [r for r in record["jobs"] if r["job"] == job]
        runtime = rows[0]["runtime_us"] if rows else None
        iterations = record["iterations"].to_pandas()
        levels = pd.DataFrame(record["levels"], columns=["level", "direction", "bytes", "links_used", "busy_ns"])
        return AloneRun(
            runtime_us=None if runtime is None or (isinstance(runtime, float) and math.isnan(runtime)) else float(runtime),
            iterations=iterations[iterations["job"] == job].reset_index(drop=True),
            levels=levels,
            link_gbps=self.link_gbps,
        )


def study_size(study: Study) -> dict[str, Any]:
    """What `qoslab study --plan` shows: how many runs a study makes and how big they are, found
    without simulating (each repetition's jobs are placed, which is cheap). A sweep: the sum over
    its points, the first point's shape, and the points."""
    points = study.points()
    if not points:
        return _size(study, None)
    sizes = [_size(study, point) for point in points]
    total = {**sizes[0], "runs": sum(s["runs"] for s in sizes), "alone_runs": sum(s["alone_runs"] for s in sizes),
             "shared_runs": sum(s["shared_runs"] for s in sizes)}
    total["hosts"] = max(s["hosts"] for s in sizes)
    return {**total, "sweep_points": len(points), "sweep_keys": [axis.key for axis in study.sweep],
            "sweep_mode": study.sweep_mode}


def _size(study: Study, point: dict[str, Any] | None) -> dict[str, Any]:
    from qoslab.policies import Search

    plan = StudyPlan(study, point)
    base = Scenario.from_dict(plan.data, plan.source) if point else study.base()
    first = plan.repetitions[0]
    placed = Scenario.from_dict(first.scenario, plan.source)
    jobs = {name: {"nodes": len(hosts), "ranks": first.ranks[name], "ranks_per_node": job.ranks_per_node}
            for name, hosts, job in zip(placed.job_names(), placed.placements(), placed.jobs)}
    repetitions = len(plan.repetitions)
    policies = study.concrete_policies()
    plain = [p for p in policies if not isinstance(p, Search)]
    searches = {}
    for search in (p for p in policies if isinstance(p, Search)):
        size = search.space_size(len(first.jobs), plan.qos_vls(search))
        searches[search.label()] = (size if search.exhaustive(size) else search.budget) * repetitions
    alone = repetitions * len(first.jobs)
    shared = repetitions * len(plain)
    return {
        "runs": alone + shared + sum(searches.values()),
        "hosts": base.host_count(),
        "jobs": jobs,
        "repetitions": repetitions,
        "policies": [p.label() for p in policies],
        "alone_runs": alone,
        "shared_runs": shared,
        "search_runs": searches,  # at most: a TPE search stops at its budget
        "ranks": sum(j["ranks"] for j in jobs.values()),
    }
