"""Per-message priority from past latency (Khalilov et al., ExaMPI'21, reconstructed): the engine
picks each send's SL from the latency its sender saw to that destination before. SLs 0..K-1 are
the tiers, lowest first; by default the top tier sits in the high-priority table with a bounded
high_limit, as the reconstruction in science.md 4.2 suggests."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from qoslab.errors import problem
from qoslab.policies.base import Arbitrated, PolicyContext, QosVls, check_jobs_known, with_jobs
from qoslab.vlarb import Granularity


class PerMessage(Arbitrated):
    kind: Literal["per-message"]
    jobs: list[str] | Literal["all"] = "all"  # the jobs that run the algorithm; others stay on SL 0
    thresholds: Annotated[list[Annotated[float, Field(gt=0, allow_inf_nan=False)]], Field(min_length=1)] = Field(
        default_factory=lambda: [2.0]
    )
    direction: Literal["promote", "demote"] = "promote"
    history_messages: Annotated[int, Field(ge=1)] = 16
    high_bytes_cap: Annotated[float, Field(gt=0, le=1)] = 1.0
    # Unset: the top tier (set by _top_tier_high), whatever the number of tiers.
    high: list[Annotated[int, Field(ge=0, le=14)]] = Field(default_factory=list)
    high_limit: Annotated[int, Field(ge=0, le=255)] = 4

    DEFAULT_WEIGHTS = (255, 255)
    MIN_LEVELS = 2

    @model_validator(mode="before")
    @classmethod
    def _top_tier_high(cls, data: Any) -> Any:
        """By default the top tier (the last weight or share) sits in the high-priority table;
        it had been VL1, the middle tier of three."""
        if isinstance(data, dict) and "high" not in data:
            given = data.get("weights") if data.get("weights") is not None else data.get("shares")
            tiers = len(given) if isinstance(given, list) else len(cls.DEFAULT_WEIGHTS)
            data = {**data, "high": [tiers - 1]}
        return data

    @model_validator(mode="after")
    def _tiers(self) -> PerMessage:
        tiers = self.levels
        if len(self.thresholds) != tiers - 1:
            raise problem(
                f"expected {tiers - 1} thresholds for {tiers} tiers (one {'share' if self.shares else 'weight'} per "
                f"tier), got {len(self.thresholds)}",
                "thresholds",
            )
        if any(b <= a for a, b in zip(self.thresholds, self.thresholds[1:])):
            raise problem(f"expected strictly increasing thresholds, got {self.thresholds}", "thresholds")
        return self

    def default_name(self) -> str:
        who = "all" if self.jobs == "all" else ",".join(self.jobs)
        return f"per-message[{who},{self.direction}]"

    def describe(self, granularity: Granularity | None = None) -> str:
        who = "every job" if self.jobs == "all" else ", ".join(self.jobs)
        return (
            f"{who}: each send's SL from past latency ({self.direction}, thresholds "
            f"{', '.join(f'{t:g}' for t in self.thresholds)}, history {self.history_messages} messages); "
            f"{self.arbitration().describe(granularity)}"
        )

    def check(self, jobs: list[str], ranks: dict[str, int], vls: QosVls) -> None:
        if self.jobs != "all":
            check_jobs_known("jobs", self.jobs, jobs)
        self.check_levels(vls)

    def apply(self, scenario: dict[str, Any], ctx: PolicyContext) -> dict[str, Any]:
        rule = {
            "kind": "latency-history",
            "sls": list(range(self.levels)),
            "thresholds": list(self.thresholds),
            "direction": self.direction,
            "history_messages": self.history_messages,
            "high_bytes_cap": self.high_bytes_cap,
        }
        chosen = ctx.jobs if self.jobs == "all" else self.jobs
        return with_jobs(scenario, self.arbitration().qos(ctx.granularity), {job: {"sl_policy": rule} for job in chosen})
