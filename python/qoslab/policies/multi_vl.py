"""Multi-VL spreading (Subramoni et al., ICPP'10, as in MVAPICH2's MV2_NUM_SLS): each job's
traffic spread over N SLs, SL v on VL v, all with equal weight, so one hot flow fills only its
share of each port's VL buffers and cannot head-of-line block the rest."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from qoslab.policies.arbitration import Arbitration
from qoslab.policies.base import (
    Policy,
    PolicyContext,
    PolicyError,
    QosVls,
    check_jobs_known,
    with_jobs,
)
from qoslab.vlarb import Granularity


class MultiVl(Policy):
    kind: Literal["multi-vl"]
    vls: Annotated[int, Field(ge=1, le=15)] | None = None  # None: every VL QoS may use (QosVls)
    by: Literal["connection", "destination", "message"] = "connection"
    jobs: list[str] | Literal["all"] = "all"
    weight: Annotated[int, Field(ge=1, le=255)] = 64  # per VL: one 4 KiB packet per turn

    def default_name(self) -> str:
        return f"multi-vl[{self.vls or 'all'},{self.by}]"

    def describe(self, granularity: Granularity | None = None) -> str:
        count = f"{self.vls} VLs" if self.vls else "every QoS VL"
        return f"traffic spread over {count} by {self.by}, equal weights ({self.weight})"

    def count(self, qos_vls: int) -> int:
        return self.vls or qos_vls

    def check(self, jobs: list[str], ranks: dict[str, int], vls: QosVls) -> None:
        if self.jobs != "all":
            check_jobs_known("jobs", self.jobs, jobs)
        if self.count(vls.count) > vls.count:
            raise PolicyError("vls", f"{self.vls} VLs, but {vls.why()}")

    def arbitrations(self, qos_vls: int) -> list[tuple[str, Arbitration]]:
        return [("weight", Arbitration(weights=[self.weight] * self.count(qos_vls)))]

    def apply(self, scenario: dict[str, Any], ctx: PolicyContext) -> dict[str, Any]:
        n = self.count(ctx.qos_vls)
        arbitration = Arbitration(weights=[self.weight] * n)
        rule = {"kind": "spread", "sls": list(range(n)), "by": self.by}
        chosen = ctx.jobs if self.jobs == "all" else self.jobs
        return with_jobs(scenario, arbitration.qos(), {job: {"sl_policy": rule} for job in chosen})
