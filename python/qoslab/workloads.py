"""The workloads a job can run (``[jobs.workload]``): one pydantic model per kind, with its
parameters and their defaults. The engine generates the rank programs (crates/qoslab-engine/src/mpi);
these models only validate and resolve parameters. Application skeletons are in skeletons.py.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import Field, model_serializer

from qoslab.skeletons import SKELETON_MODELS
from qoslab.workload_base import Bytes, Count, Iterations, Micros, Workload


class PingPong(Workload):
    """Ranks 0 and 1 bounce one message per iteration (the others only mark iterations)."""

    kind: Literal["ping-pong"]
    bytes: Bytes = 8
    iterations: Iterations = 100


class FloodPairs(Workload):
    """Savoie et al.'s Flood-Pairs: rank r and r + p/2 exchange `messages` messages of `bytes`
    per iteration, all in flight at once."""

    kind: Literal["flood-pairs"]
    bytes: Bytes = 65536
    messages: Count = 8
    iterations: Iterations = 20


class NearestNeighbor(Workload):
    """Halo exchange with both neighbours in every dimension of a periodic 2-, 3- or 4-D process
    grid (MPI_Dims_create shape), after `compute_us` of computation."""

    kind: Literal["nearest-neighbor"]
    dims: Literal[1, 2, 3, 4] = 3
    bytes: Bytes = 65536
    iterations: Iterations = 20
    compute_us: Micros = 10.0


class AllToAll(Workload):
    """One MPI_Alltoall of `bytes` per destination per iteration."""

    kind: Literal["all-to-all"]
    bytes: Bytes = 65536
    iterations: Iterations = 5
    compute_us: Micros = 0.0


class RandomPairs(Workload):
    """Every iteration a fresh random pairing of the ranks; partners exchange `bytes`."""

    kind: Literal["random-pairs"]
    bytes: Bytes = 65536
    iterations: Iterations = 20
    compute_us: Micros = 0.0


class CollectiveLoop(Workload):
    """One collective per iteration, each timed: the tail-latency study's measurement loop. With
    `barrier`, an untimed barrier opens each iteration (as the OSU collective benchmarks separate
    theirs), so a rooted collective (bcast, reduce) cannot pipeline across iterations."""

    kind: Literal["collective-loop"]
    collective: Literal["barrier", "bcast", "reduce", "allreduce", "alltoall", "allgather"] = "allreduce"
    bytes: Bytes = 8
    iterations: Iterations = 1000
    compute_us: Micros = 0.0
    barrier: bool = False

    @model_serializer(mode="wrap")
    def _without_default_barrier(self, handler: Any) -> Any:
        # Written only when set: loops from before the key keep their resolved form, so their run ids.
        data = handler(self)
        if isinstance(data, dict) and not self.barrier:
            data.pop("barrier", None)
        return data


class GpcnetRandomRingLatency(Workload):
    """GPCNeT canary "RR Two-sided Lat": a shuffled ring, 8 B each way per iteration."""

    kind: Literal["gpcnet-rr-latency"]
    bytes: Bytes = 8
    iterations: Iterations = 1000
    outstanding: Count = 1
    iterations_per_ring: Count = 200


class GpcnetRandomRingBandwidth(Workload):
    """GPCNeT canary "RR Two-sided BW+Sync": 8 messages of 128 KiB in flight each way, then a barrier."""

    kind: Literal["gpcnet-rr-bandwidth"]
    bytes: Bytes = 131072
    iterations: Iterations = 20
    outstanding: Count = 8
    iterations_per_ring: Count = 5


class GpcnetAllreduce(Workload):
    """GPCNeT canary "Multiple Allreduce": an 8 B allreduce per iteration."""

    kind: Literal["gpcnet-allreduce"]
    bytes: Bytes = 8
    iterations: Iterations = 1000
    compute_us: Micros = 0.0


class GpcnetAlltoall(Workload):
    """GPCNeT congestor: a 4 KiB (512 doubles) alltoall per iteration."""

    kind: Literal["gpcnet-alltoall"]
    bytes: Bytes = 4096
    iterations: Iterations = 20
    compute_us: Micros = 0.0


class _Rooted(Workload):
    bytes: Bytes = 4096
    iterations: Iterations = 100
    messages: Count = 1


class GpcnetIncast(_Rooted):
    """GPCNeT congestor "Two-sided Incast": every rank sends 4 KiB to rank 0, which receives them all."""

    kind: Literal["gpcnet-incast"]


class GpcnetPutIncast(_Rooted):
    """GPCNeT congestor "Put Incast": every rank writes 4 KiB into rank 0's memory (one-sided)."""

    kind: Literal["gpcnet-put-incast"]


class GpcnetGetBcast(_Rooted):
    """GPCNeT congestor "Get Bcast": every rank reads 4 KiB from rank 0 (one-sided; rank 0's HCA answers)."""

    kind: Literal["gpcnet-get-bcast"]


class Trace(Workload):
    """Replays an MPI trace: OTF2 (``traces.otf2`` anchor file) or DUMPI's ASCII form
    (``dumpi2ascii`` output, one file per rank). Compute gaps come from the timestamps, divided
    by `cpu_speedup`."""

    kind: Literal["trace"]
    path: str
    format: Literal["otf2", "dumpi"] | None = None  # None: from the file name
    cpu_speedup: Annotated[float, Field(gt=0, allow_inf_nan=False)] = 1.0

    def engine(self) -> dict[str, Any]:
        # The engine gets the rank programs separately (packed); only the kind is in the config.
        return {"kind": "trace"}


BUILTIN_MODELS: tuple[type[Workload], ...] = (
    PingPong,
    FloodPairs,
    NearestNeighbor,
    AllToAll,
    RandomPairs,
    CollectiveLoop,
    GpcnetRandomRingLatency,
    GpcnetRandomRingBandwidth,
    GpcnetAllreduce,
    GpcnetAlltoall,
    GpcnetIncast,
    GpcnetPutIncast,
    GpcnetGetBcast,
    Trace,
)
ALL_MODELS = BUILTIN_MODELS + tuple(SKELETON_MODELS)
WORKLOAD_KINDS = tuple(m.model_fields["kind"].annotation.__args__[0] for m in ALL_MODELS)

AnyWorkload = Annotated[Union[ALL_MODELS], Field(discriminator="kind")]  # type: ignore[valid-type]  # noqa: UP007 - a union of a tuple built at import
