"""The baseline: every job on SL 0, the scenario's own QoS tables untouched."""

from __future__ import annotations

from typing import Any, Literal

from qoslab.policies.base import Policy, PolicyContext, with_jobs
from qoslab.vlarb import Granularity


class Default(Policy):
    kind: Literal["default"]

    def describe(self, granularity: Granularity | None = None) -> str:
        return "every job on SL 0 (the baseline)"

    def jobs_by_level(self, jobs: list[str]) -> dict[int, list[str]] | None:
        return {0: list(jobs)} if jobs else {}

    def apply(self, scenario: dict[str, Any], ctx: PolicyContext) -> dict[str, Any]:
        return with_jobs(scenario, None, {})
