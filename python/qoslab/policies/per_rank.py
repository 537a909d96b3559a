"""Process-level QoS (Savoie et al., CLUSTER'19 / TOPC'21): prioritise only the slowest fraction
of one job's ranks. Which ranks are "slow" is a metric, measured from a profiling run under
contention (the study's "default" run) or online by the engine after the first iterations; a
random choice of the same size is the control.

Metrics (science.md 2.3, reconstruction):
- "least-wait": least MPI wait time; the ranks the others wait for, i.e. the critical path;
- "most-wait": most MPI wait time; the ranks contention hurts most;
- "wait-inflation": MPI wait under contention minus MPI wait alone (needs the job's alone run);
- "slowest-sends": the highest mean latency of the rank's delivered messages (science.md's
  metric C: how late the others receive from it). Where a collective synchronises every
  iteration, every rank waits about as long, and only this metric tells the slow ones apart;
- "random": a seeded random choice (the control).
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

import numpy as np
import pandas as pd
from pydantic import Field, model_validator

from qoslab.errors import problem
from qoslab.policies.base import (
    NEEDS_ALONE,
    NEEDS_PROFILE,
    Arbitrated,
    PolicyContext,
    PolicyError,
    QosVls,
    check_jobs_known,
    stated,
    with_jobs,
)
from qoslab.vlarb import Granularity

# Default SL0 (everyone) against SL1 (the chosen ranks), the seeds' third and first weights.
PER_RANK_WEIGHTS = [9, 2286]
_RNG_RANDOM_RANKS = 0x5E1EC7


class PerRank(Arbitrated):
    kind: Literal["per-rank"]
    job: str
    fraction: Annotated[float, Field(gt=0, le=1)] = 0.1
    metric: Literal["least-wait", "most-wait", "wait-inflation", "slowest-sends", "random"] = "slowest-sends"
    selection: Literal["profile", "online"] = "profile"
    after_iterations: Annotated[int, Field(ge=1)] = 1  # online: iterations measured before choosing
    match: Literal["source", "destination", "either"] = "source"

    DEFAULT_WEIGHTS = tuple(PER_RANK_WEIGHTS)
    MIN_LEVELS = 2

    @model_validator(mode="after")
    def _online_metrics(self) -> PerRank:
        if self.selection == "online" and self.metric not in ("least-wait", "most-wait", "slowest-sends"):
            raise problem(f'online selection measures "least-wait", "most-wait" or "slowest-sends", not {self.metric!r}',
                          "metric")
        return self

    def default_name(self) -> str:
        online = ",online" if self.selection == "online" else ""
        match = "" if self.match == "source" else f",to {self.match}" if self.match == "destination" else ",either end"
        weights = "" if self.weights == PER_RANK_WEIGHTS else f",w={stated(self.weights, self.shares)}"
        return f"per-rank[{self.job},{self.fraction:g},{self.metric}{online}{match}{weights}]"

    def describe(self, granularity: Granularity | None = None) -> str:
        how = f"online after {self.after_iterations} iteration(s)" if self.selection == "online" else "from the default run"
        return (
            f"{self.fraction:.0%} of {self.job}'s ranks by {self.metric} ({how}) on SL1, "
            f"matching the {self.match}; {self.arbitration().describe(granularity)}"
        )

    def required(self) -> frozenset[str]:
        if self.metric == "random" or self.selection == "online":
            return frozenset()
        if self.metric == "wait-inflation":
            return frozenset({NEEDS_PROFILE, NEEDS_ALONE})
        return frozenset({NEEDS_PROFILE})

    def check(self, jobs: list[str], ranks: dict[str, int], vls: QosVls) -> None:
        check_jobs_known("job", [self.job], jobs)
        self.check_levels(vls)

    def chosen_count(self, ranks: int) -> int:
        return max(1, math.ceil(self.fraction * ranks - 1e-9))

    def choose(self, ctx: PolicyContext) -> list[int]:
        """The ranks to prioritise, from the profile (and alone run) or at random."""
        size = ctx.ranks[self.job]
        count = self.chosen_count(size)
        if self.metric == "random":
            rng = np.random.default_rng([ctx.seed, _RNG_RANDOM_RANKS])
            return sorted(int(r) for r in rng.choice(size, size=count, replace=False))
        if ctx.profile is None:
            raise PolicyError("metric", f"{self.metric!r} needs the profiling run, which is missing")
        wait = _per_rank(ctx.profile, self.job, size, "mpi_wait_ns")
        sends = _per_rank(ctx.profile, self.job, size, "sends")
        if self.metric == "slowest-sends":
            score = _per_rank(ctx.profile, self.job, size, "send_latency_ns") / np.maximum(sends, 1)
        elif self.metric == "least-wait":
            score = -wait  # least wait first
        elif self.metric == "most-wait":
            score = wait
        else:
            alone = ctx.alone.get(self.job)
            if alone is None:
                raise PolicyError("metric", "'wait-inflation' needs the job's alone run, which is missing")
            score = wait - _per_rank(alone.iterations.assign(job=self.job), self.job, size, "mpi_wait_ns")
        # Ranks that sent something first (an SL only moves a rank's own sends: a rank that never
        # sends, whose MPI wait is 0, gained nothing from being "least-wait"), then the highest
        # score, ties to the lower rank.
        order = np.lexsort((np.arange(size), -score, sends == 0))
        return sorted(int(r) for r in order[:count])

    def apply(self, scenario: dict[str, Any], ctx: PolicyContext) -> dict[str, Any]:
        if self.selection == "online":
            rule = {
                "kind": "slowest-ranks",
                "fraction": self.fraction,
                "after_iterations": self.after_iterations,
                "metric": self.metric,
                "sl": 1,
                "match": self.match,
            }
        else:
            rule = {"kind": "ranks", "ranks": self.choose(ctx), "sl": 1, "match": self.match}
        return with_jobs(scenario, self.arbitration().qos(ctx.granularity), {self.job: {"sl": 0, "sl_policy": rule}})


def _per_rank(iterations: pd.DataFrame, job: str, size: int, column: str) -> np.ndarray:
    """`column` summed per rank of `job` over its recorded iterations, indexed by rank."""
    rows = iterations[iterations["job"] == job]
    totals = rows.groupby("rank")[column].sum()
    out = np.zeros(size)
    out[totals.index.to_numpy(dtype=int)] = totals.to_numpy(dtype=float)
    return out
