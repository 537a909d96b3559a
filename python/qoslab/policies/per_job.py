"""Job-level QoS (Savoie et al., IPDPSW'18): every job on a service level of its own, the levels
weighted like the seeds' 2286:254:9:1; "all" tries every assignment of jobs to levels."""

from __future__ import annotations

import itertools
from typing import Annotated, Any, Literal

from pydantic import Field

from qoslab.policies.base import Arbitrated, PolicyContext, PolicyError, check_jobs_known, weights_field, with_jobs

SEEDS_WEIGHTS = [2286, 254, 9, 1]  # Savoie et al.: relative priorities of SL0..SL3
MAX_ASSIGNMENTS = 720


class PerJob(Arbitrated):
    kind: Literal["per-job"]
    # {job: level} (level = SL, 0 = the first weight), or "all": every assignment of the jobs to
    # distinct levels (4 jobs on 4 levels: the 24 permutations).
    assignment: dict[str, Annotated[int, Field(ge=0, le=14)]] | Literal["all"]
    weights: Annotated[list[Annotated[int, Field(ge=0)]], Field(min_length=1, max_length=15)] = weights_field(SEEDS_WEIGHTS)

    def default_name(self) -> str:
        if self.assignment == "all":
            return "per-job[all]"
        return "per-job[" + " ".join(f"{job}={sl}" for job, sl in self.assignment.items()) + "]"

    def describe(self) -> str:
        if self.assignment == "all":
            return f"each job on its own SL, every assignment; weights {self.arbitration().describe()}"
        listed = ", ".join(f"{job} SL{sl}" for job, sl in self.assignment.items())
        return f"job-level SLs ({listed}); weights {self.arbitration().describe()}"

    def expand(self, jobs: list[str]) -> list["PerJob"]:
        if self.assignment != "all":
            return [self]
        levels = self.arbitration().levels
        if len(jobs) > levels:
            raise PolicyError(
                "assignment",
                f'"all" gives every job a distinct level, but there are {len(jobs)} jobs and {levels} '
                f"levels (weights); list an assignment or add weights",
            )
        count = 1
        for i in range(len(jobs)):
            count *= levels - i
        if count > MAX_ASSIGNMENTS:
            raise PolicyError("assignment", f'"all" would give {count} assignments (at most {MAX_ASSIGNMENTS})')
        out = []
        for sls in itertools.permutations(range(levels), len(jobs)):
            data = self.model_dump()
            data["assignment"] = dict(zip(jobs, sls))
            data["name"] = None if self.name is None else f"{self.name}[{' '.join(f'{j}={s}' for j, s in zip(jobs, sls))}]"
            out.append(PerJob(**data))
        return out

    def check(self, jobs: list[str], ranks: dict[str, int], data_vls: int) -> None:
        self.check_levels(data_vls)
        if self.assignment == "all":
            return
        check_jobs_known("assignment", list(self.assignment), jobs)
        levels = self.arbitration().levels
        for job, sl in self.assignment.items():
            if sl >= levels:
                raise PolicyError(f"assignment.{job}", f"level {sl}, but the policy has levels 0..{levels - 1} (one per weight)")

    def apply(self, scenario: dict[str, Any], ctx: PolicyContext) -> dict[str, Any]:
        assert self.assignment != "all", "expanded before use"
        return with_jobs(scenario, self.arbitration().qos(), {job: {"sl": sl} for job, sl in self.assignment.items()})
