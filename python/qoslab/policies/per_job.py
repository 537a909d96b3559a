"""Job-level QoS (Savoie et al., IPDPSW'18): every job on a service level of its own, the levels
weighted like the seeds' 2286:254:9:1; "all" tries every assignment of jobs to levels."""

from __future__ import annotations

import itertools
from typing import Annotated, Any, Literal

from pydantic import Field

from qoslab.policies.base import (
    Arbitrated,
    Policy,
    PolicyContext,
    PolicyError,
    QosVls,
    check_jobs_known,
    with_jobs,
)
from qoslab.vlarb import Granularity

SEEDS_WEIGHTS = [2286, 254, 9, 1]  # Savoie et al.: relative priorities of SL0..SL3
MAX_ASSIGNMENTS = 720


class PerJob(Arbitrated):
    kind: Literal["per-job"]
    # {job: level} (level = SL, 0 = the first weight), or "all": every assignment of the jobs to
    # distinct levels (4 jobs on 4 levels: the 24 permutations).
    assignment: dict[str, Annotated[int, Field(ge=0, le=14)]] | Literal["all"]

    DEFAULT_WEIGHTS = tuple(SEEDS_WEIGHTS)

    def default_name(self) -> str:
        if self.assignment == "all":
            return "per-job[all]"
        return "per-job[" + " ".join(f"{job}={sl}" for job, sl in self.assignment.items()) + "]"

    def describe(self, granularity: Granularity | None = None) -> str:
        if self.assignment == "all":
            return f"each job on its own SL, every assignment; {self.arbitration().describe(granularity)}"
        listed = ", ".join(f"{job} SL{sl}" for job, sl in self.assignment.items())
        return f"job-level SLs ({listed}); {self.arbitration().describe(granularity)}"

    def jobs_by_level(self, jobs: list[str]) -> dict[int, list[str]] | None:
        if self.assignment == "all":
            return None
        by_level: dict[int, list[str]] = {}
        for job in jobs:  # a job the assignment does not name is on level 0 (with_jobs)
            by_level.setdefault(self.assignment.get(job, 0), []).append(job)
        return by_level

    def expand(self, jobs: list[str]) -> list[Policy]:
        if self.assignment != "all":
            return [self]
        levels = self.levels
        if len(jobs) > levels:
            raise PolicyError(
                "assignment",
                f'"all" gives every job a distinct level, but there are {len(jobs)} jobs and {levels} '
                f"levels ({self.arbitration().key}); list an assignment or add levels",
            )
        count = 1
        for i in range(len(jobs)):
            count *= levels - i
        if count > MAX_ASSIGNMENTS:
            raise PolicyError("assignment", f'"all" would give {count} assignments (at most {MAX_ASSIGNMENTS})')
        out: list[Policy] = []
        for sls in itertools.permutations(range(levels), len(jobs)):
            data = self.model_dump()
            data["assignment"] = dict(zip(jobs, sls))
            data["name"] = None if self.name is None else f"{self.name}[{' '.join(f'{j}={s}' for j, s in zip(jobs, sls))}]"
            out.append(PerJob(**data))
        return out

    def check(self, jobs: list[str], ranks: dict[str, int], vls: QosVls) -> None:
        self.check_levels(vls)
        if self.assignment == "all":
            return
        check_jobs_known("assignment", list(self.assignment), jobs)
        levels = self.levels
        for job, sl in self.assignment.items():
            if sl >= levels:
                raise PolicyError(f"assignment.{job}", f"level {sl}, but the policy has levels 0..{levels - 1} (one per "
                                  f"{self.arbitration().key[:-1]})")

    def apply(self, scenario: dict[str, Any], ctx: PolicyContext) -> dict[str, Any]:
        assert self.assignment != "all", "expanded before use"
        return with_jobs(scenario, self.arbitration().qos(ctx.granularity),
                         {job: {"sl": sl} for job, sl in self.assignment.items()})
