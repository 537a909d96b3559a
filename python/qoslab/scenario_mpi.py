"""The scenario's ``[mpi]`` table: the MPI layer's parameters, the only place their defaults live.
Apart from jobs.py so that a scenario without jobs does not load the job and workload models."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from qoslab.scenario_files import _Table


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
