"""Application-to-VL mapping by per-level bandwidth utilisation (Jokanovic et al., reconstructed
in science.md 3.4): measure how hard each job alone loads each level of the tree, then keep the
jobs that load the upper levels apart, each on its own VL.

Utilisation of job a at level l: the bytes a sends up through level-l links (from level l-1 to
level l), divided by T_alone(a) x the link rate x the number of level-l up-links a used: how busy
the links it touches are, on average, while it runs alone.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from qoslab.errors import problem
from qoslab.policies.arbitration import (
    DEFAULT_SHARE_TOLERANCE,
    Arbitration,
    Shares,
    ShareTolerance,
)
from qoslab.policies.base import (
    NEEDS_ALONE,
    AloneRun,
    Policy,
    PolicyContext,
    PolicyError,
    QosVls,
    stated,
    with_jobs,
)
from qoslab.vlarb import Granularity

EQUAL_WEIGHT = 64  # "equal": one 4 KiB packet per turn, every VL alike


def level_utilisation(alone: AloneRun) -> dict[int, float]:
    """{level: utilisation in [0, 1]} of the up-links of each level for one job run alone."""
    if alone.runtime_us is None or alone.runtime_us <= 0:
        return {}
    up = alone.levels[alone.levels["direction"] == "up"]
    bytes_per_ns = alone.link_gbps / 8.0
    out = {}
    for row in up.itertuples():
        capacity = alone.runtime_us * 1000.0 * bytes_per_ns * max(int(row.links_used), 1)
        out[int(row.level)] = float(row.bytes) / capacity
    return out


class VlMapping(Policy):
    kind: Literal["vl-mapping"]
    vls: Annotated[int, Field(ge=1, le=15)] | None = None  # None: every VL QoS may use (QosVls)
    # "spread-by-load": jobs ordered by top-level utilisation, VLs dealt round robin (heavy jobs
    # never share while there are enough VLs); "separate-heavy": jobs whose top-level utilisation
    # is at least `threshold` x the heaviest job's each get a VL of their own, the light ones
    # share the last VL. (Relative, because absolute utilisation alone depends on the compute
    # share of each code and on the scale.)
    rule: Literal["spread-by-load", "separate-heavy"] = "spread-by-load"
    threshold: Annotated[float, Field(gt=0, le=1)] = 0.5
    # "equal", or a weight per VL (VL0 first: with "spread-by-load" VL0 carries the heaviest job).
    weights: Literal["equal"] | Annotated[list[Annotated[int, Field(ge=0)]], Field(min_length=1, max_length=15)] = "equal"
    # Or each VL's share of a saturated port (VL0 first), realised at the fabric's MTU.
    shares: Shares | None = None
    share_tolerance: ShareTolerance = DEFAULT_SHARE_TOLERANCE

    needs = frozenset({NEEDS_ALONE})

    @model_validator(mode="after")
    def _weights_or_shares(self) -> VlMapping:
        if self.shares is not None and "weights" in self.model_fields_set:
            raise problem("give either weights or shares, not both", "shares")
        if self.shares is not None:
            self.arbitration(len(self.shares))  # raises with the key named
        return self

    def default_name(self) -> str:
        if self.shares is not None:
            return f"vl-mapping[{self.rule},{stated(None, self.shares)}]"
        weights = self.weights if self.weights == "equal" else stated(self.weights, None)
        return f"vl-mapping[{self.rule},{weights}]"

    def describe(self, granularity: Granularity | None = None) -> str:
        what = self.arbitration(self.vls).describe(granularity) if self.vls or self.fixed() else f"weights {self.weights}"
        return f"jobs mapped to VLs by per-level utilisation alone ({self.rule}), {what}"

    def fixed(self) -> bool:
        """Whether the weights or shares fix the number of VLs."""
        return self.shares is not None or isinstance(self.weights, list)

    def count(self, qos_vls: int) -> int:
        if self.shares is not None:
            return len(self.shares)
        if isinstance(self.weights, list):
            return len(self.weights)
        return self.vls or qos_vls

    def arbitration(self, vls: int | None) -> Arbitration:
        """The tables for `vls` VLs (ignored when the weights or shares fix them)."""
        if self.shares is not None:
            return Arbitration(shares=list(self.shares), share_tolerance=self.share_tolerance)
        if isinstance(self.weights, list):
            return Arbitration(weights=list(self.weights))
        return Arbitration(weights=[EQUAL_WEIGHT] * (vls or 1))

    def arbitrations(self, qos_vls: int) -> list[tuple[str, Arbitration]]:
        return [("shares" if self.shares is not None else "weights", self.arbitration(self.count(qos_vls)))]

    def check(self, jobs: list[str], ranks: dict[str, int], vls: QosVls) -> None:
        n = self.count(vls.count)
        if self.fixed() and self.vls is not None and n != self.vls:
            key = "shares" if self.shares is not None else "weights"
            raise PolicyError(key, f"expected {self.vls} {key} (one per VL), got {n}")
        if n > vls.count:
            key = "vls" if self.vls is not None or not self.fixed() else "shares" if self.shares is not None else "weights"
            raise PolicyError(key, f"{n} VLs, but {vls.why()}")

    def mapping(self, ctx: PolicyContext) -> dict[str, int]:
        """{job: VL} from the jobs' alone runs."""
        n = self.count(ctx.qos_vls)
        utilisation: dict[str, dict[int, float]] = {}
        for job in ctx.jobs:
            alone = ctx.alone.get(job)
            if alone is None:
                raise PolicyError("", f"the alone run of job {job!r} is missing")
            utilisation[job] = level_utilisation(alone)
        # The top level any job reaches: traffic there crosses the most slimmed links.
        used = [level for u in utilisation.values() for level, value in u.items() if value > 0]
        top_level = max(used, default=None)
        top = {job: utilisation[job].get(top_level, 0.0) if top_level is not None else 0.0 for job in ctx.jobs}
        order = sorted(ctx.jobs, key=lambda j: (-top[j], ctx.jobs.index(j)))
        if self.rule == "spread-by-load" or n == 1:
            return {job: i % n for i, job in enumerate(order)}
        heaviest = max(top.values())
        heavy = [j for j in order if heaviest > 0 and top[j] >= self.threshold * heaviest]
        light = [j for j in order if j not in heavy]
        if not light:
            return {job: i % n for i, job in enumerate(order)}
        mapping = {job: i % (n - 1) for i, job in enumerate(heavy)}
        mapping.update(dict.fromkeys(light, n - 1))
        return mapping

    def apply(self, scenario: dict[str, Any], ctx: PolicyContext) -> dict[str, Any]:
        arbitration = self.arbitration(self.count(ctx.qos_vls))
        return with_jobs(scenario, arbitration.qos(ctx.granularity),
                         {job: {"sl": vl} for job, vl in self.mapping(ctx).items()})
