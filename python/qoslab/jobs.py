"""The scenario's ``[[jobs]]`` and ``[mpi]`` tables: MPI jobs, their placement keys, collective
algorithms, and the MPI layer's parameters. With scenario.py and the workload models, the only
place their defaults live.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from qoslab.errors import problem
from qoslab.host_lists import Hosts
from qoslab.workloads import AnyWorkload


class _Table(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class Collectives(_Table):
    """Which algorithm the job's MPI library uses for each collective."""

    allreduce: Literal["recursive-doubling", "ring"] = "recursive-doubling"
    alltoall: Literal["pairwise", "bruck"] = "pairwise"


class Job(_Table):
    name: str | None = None  # None: "job<index>"
    nodes: Annotated[int, Field(ge=1)] | None = None  # None: the length of `hosts`
    ranks_per_node: Annotated[int, Field(ge=1, le=4096)] = 1
    placement: Literal["contiguous", "random", "fragmented", "hosts"] = "contiguous"
    fragment_nodes: Annotated[int, Field(ge=1)] = 4  # fragmented: this job's nodes per leaf switch (F4, F8)
    hosts: Hosts | None = None  # placement = "hosts": the nodes, in rank order
    share_hosts: bool = False  # may use hosts other jobs use
    sl: Annotated[int, Field(ge=0, le=15)] = 0
    restart: bool = True  # keep running until every job has completed once
    workload: AnyWorkload
    collectives: Collectives = Field(default_factory=Collectives)

    @model_validator(mode="after")
    def _placement_keys(self) -> "Job":
        if self.placement == "hosts":
            if self.hosts is None:
                raise problem('placement = "hosts" needs the list of hosts', "hosts")
            if self.hosts == "all":
                return self
        elif self.hosts is not None:
            raise problem(f'hosts is only used with placement = "hosts" (placement is {self.placement!r})', "hosts")
        elif self.nodes is None:
            raise problem("required key is missing (how many nodes the job uses)", "nodes")
        return self


class Mpi(_Table):
    """The MPI layer: protocol switch-over, control message size, intra-node path."""

    eager_threshold_bytes: Annotated[int, Field(ge=0, lt=2**63)] = 16384
    control_bytes: Annotated[int, Field(ge=0, le=4096)] = 64
    shm_latency_ns: Annotated[float, Field(ge=0, allow_inf_nan=False)] = 300.0
    shm_gbps: Annotated[float, Field(gt=0, allow_inf_nan=False)] = 160.0

    def engine(self) -> dict[str, Any]:
        return {
            "eager_threshold_bytes": self.eager_threshold_bytes,
            "control_bytes": self.control_bytes,
            "shm_latency_ns": float(self.shm_latency_ns),
            "shm_gbps": float(self.shm_gbps),
        }
