"""The workloads a job can run (``[jobs.workload]``): one pydantic model per kind, with its
parameters and their defaults. The engine generates the rank programs (crates/qoslab-engine/src/mpi);
these models only validate and resolve parameters. Application skeletons are in skeletons.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Literal, Union, get_args

from pydantic import Field, model_serializer, model_validator

from qoslab.errors import problem
from qoslab.skeletons import SKELETON_MODELS
from qoslab.workload_base import Bytes, Count, Iterations, Micros, Workload

if TYPE_CHECKING:
    import numpy as np


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


# GPCNeT (netbench/GPCNET v1.3, network_load_test): the engine's mpi/gpcnet.rs says how each
# test maps onto GPCNeT's code. At k ranks per node every GPCNeT workload runs once per node
# slice (local rank s of every node), all slices at once, as GPCNeT's node_slice_subcomms does.

Warmup = Annotated[int, Field(ge=0, lt=2**32)]
MIB = 1024 * 1024


@dataclass(frozen=True)
class GpcnetTest:
    """One of GPCNeT's network tests as a canary job's iterations, and how GPCNeT turns them into
    its figures (random_ring.c, collectives.c, utils.c summarize_performance)."""

    name: str  # GPCNeT's row name, e.g. "RR Two-sided Lat (8 B)"
    kind: Literal["latency", "bandwidth"]
    unit: str  # GPCNeT's unit: "usec" or "MiB/s/rank"
    # The timed iterations: (first, count) per ring (RR tests) or per allreduce test.
    blocks: tuple[tuple[int, int], ...]
    # RR Two-sided Lat reports half the iteration time ("count for the 2 sends").
    halve: bool = False
    # Bandwidth tests: bytes a rank sends per iteration (2 neighbours x outstanding x bytes).
    bytes_per_iteration: int = 0
    # GPCNeT averages a rank's samples per ring (RR tests), or over all of them (allreduce).
    average_per_block: bool = True

    def sample(self, time_ns: np.ndarray) -> np.ndarray:
        """GPCNeT's per-iteration sample: µs (half for RR latency), or MiB/s/rank."""
        if self.kind == "bandwidth":
            return self.bytes_per_iteration / (time_ns * 1e-9) / MIB
        return time_ns * 1e-3 / (2 if self.halve else 1)


def _rings(first: int, iterations: int, per_ring: int) -> tuple[tuple[int, int], ...]:
    return tuple((start, min(per_ring, first + iterations - start)) for start in range(first, first + iterations, per_ring))


class GpcnetRandomRingLatency(Workload):
    """GPCNeT canary "RR Two-sided Lat": a shuffled ring per node slice, `bytes` each way per
    iteration; a new ring every `iterations_per_ring` (GPCNeT's NUM_LAT_ITERS, 200)."""

    kind: Literal["gpcnet-rr-latency"]
    bytes: Bytes = 8
    iterations: Iterations = 1000
    outstanding: Count = 1
    iterations_per_ring: Count = 200

    def gpcnet_tests(self) -> list[GpcnetTest]:
        return [GpcnetTest(f"RR Two-sided Lat ({self.bytes} B)", "latency", "usec",
                           _rings(0, self.iterations, self.iterations_per_ring), halve=True)]


class GpcnetRandomRingBandwidth(Workload):
    """GPCNeT canary "RR Two-sided BW+Sync": per node slice, 8 messages of 128 KiB in flight to
    each ring neighbour, then a barrier of the slice; a new ring every `iterations_per_ring`
    (GPCNeT's NUM_BW_ITERS, 8)."""

    kind: Literal["gpcnet-rr-bandwidth"]
    bytes: Bytes = 131072
    iterations: Iterations = 20
    outstanding: Count = 8
    iterations_per_ring: Count = 8

    def gpcnet_tests(self) -> list[GpcnetTest]:
        return [GpcnetTest(f"RR Two-sided BW+Sync ({self.bytes} B)", "bandwidth", "MiB/s/rank",
                           _rings(0, self.iterations, self.iterations_per_ring),
                           bytes_per_iteration=2 * self.outstanding * self.bytes)]


class GpcnetAllreduce(Workload):
    """GPCNeT canary "Multiple Allreduce": an 8 B allreduce per iteration in every node slice."""

    kind: Literal["gpcnet-allreduce"]
    bytes: Bytes = 8
    iterations: Iterations = 1000
    compute_us: Micros = 0.0

    def gpcnet_tests(self) -> list[GpcnetTest]:
        return [GpcnetTest(f"Multiple Allreduce ({self.bytes} B)", "latency", "usec", ((0, self.iterations),),
                           average_per_block=False)]


class GpcnetCanaries(Workload):
    """GPCNeT's canary ranks as network_load_test runs them: RR Two-sided Lat, RR Two-sided
    BW+Sync and Multiple Allreduce one after the other, each over the whole canary node set.
    Each ring (or allreduce test) starts with GPCNeT's untimed synchronisation of all canary
    ranks (a barrier; for allreduce, its timeout check, an 8 B allreduce) and its untimed
    warm-up iterations. Defaults are GPCNeT's per ring and per test; GPCNeT runs 30 rings per
    measurement and as many measurements (up to 10000) or allreduce tests (up to 100000) as fit
    in 10 s, here `*_rings` and `allreduce_tests`."""

    kind: Literal["gpcnet-canaries"]
    latency_bytes: Bytes = 8
    latency_rings: Count = 3
    latency_iterations: Iterations = 200  # NUM_LAT_ITERS
    latency_warmup: Warmup = 200  # p2p_latency's i = -200..-1
    bandwidth_bytes: Bytes = 131072  # BW_MSG_COUNT = 16384 doubles
    bandwidth_outstanding: Count = 8  # BW_OUTSTANDING
    bandwidth_rings: Count = 3
    bandwidth_iterations: Iterations = 8  # NUM_BW_ITERS
    bandwidth_warmup: Warmup = 1
    allreduce_bytes: Bytes = 8
    allreduce_tests: Count = 3
    allreduce_iterations: Iterations = 200  # NUM_ALLREDUCE_ITERS
    allreduce_warmup: Warmup = 1

    @model_validator(mode="after")
    def _fits(self) -> GpcnetCanaries:
        if self.total_iterations() >= 2**32:
            raise problem(f"the three tests make {self.total_iterations()} iterations in all; at most 2^32 - 1 "
                          "(fewer rings, tests or iterations)", "latency_rings")
        return self

    def _layout(self) -> list[tuple[str, int, int, int]]:
        """(test, rings or tests, warm-up, timed) in GPCNeT's order."""
        return [("latency", self.latency_rings, self.latency_warmup, self.latency_iterations),
                ("bandwidth", self.bandwidth_rings, self.bandwidth_warmup, self.bandwidth_iterations),
                ("allreduce", self.allreduce_tests, self.allreduce_warmup, self.allreduce_iterations)]

    def total_iterations(self) -> int:
        return sum(count * (1 + warmup + timed) for _, count, warmup, timed in self._layout())

    def gpcnet_tests(self) -> list[GpcnetTest]:
        """The three tests with their timed iterations (each block: 1 sync, the warm-ups, then these)."""
        blocks: dict[str, list[tuple[int, int]]] = {}
        start = 0
        for test, count, warmup, timed in self._layout():
            for _ in range(count):
                blocks.setdefault(test, []).append((start + 1 + warmup, timed))
                start += 1 + warmup + timed
        return [
            GpcnetTest(f"RR Two-sided Lat ({self.latency_bytes} B)", "latency", "usec", tuple(blocks["latency"]), halve=True),
            GpcnetTest(f"RR Two-sided BW+Sync ({self.bandwidth_bytes} B)", "bandwidth", "MiB/s/rank",
                       tuple(blocks["bandwidth"]), bytes_per_iteration=2 * self.bandwidth_outstanding * self.bandwidth_bytes),
            GpcnetTest(f"Multiple Allreduce ({self.allreduce_bytes} B)", "latency", "usec", tuple(blocks["allreduce"]),
                       average_per_block=False),
        ]


class GpcnetAlltoall(Workload):
    """GPCNeT congestor "Alltoall": its own loop of MPI_Sendrecv of 4 KiB (512 doubles) with every
    other member of the node slice, XOR partners in a power-of-two slice (congestors.c)."""

    kind: Literal["gpcnet-alltoall"]
    bytes: Bytes = 4096
    iterations: Iterations = 20
    compute_us: Micros = 0.0


class _Rooted(Workload):
    bytes: Bytes = 4096
    iterations: Iterations = 100
    messages: Count = 1


class GpcnetIncast(_Rooted):
    """GPCNeT congestor "Two-sided Incast": in every node slice, every rank sends 4 KiB to the
    slice's first rank, which receives them all."""

    kind: Literal["gpcnet-incast"]


class GpcnetPutIncast(_Rooted):
    """GPCNeT congestor "Put Incast": every rank writes 4 KiB into its slice's first rank (one-sided)."""

    kind: Literal["gpcnet-put-incast"]


class GpcnetGetBcast(_Rooted):
    """GPCNeT congestor "Get Bcast": every rank reads 4 KiB from its slice's first rank (one-sided;
    that rank's HCA answers)."""

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
    GpcnetCanaries,
    GpcnetAlltoall,
    GpcnetIncast,
    GpcnetPutIncast,
    GpcnetGetBcast,
    Trace,
)
ALL_MODELS = BUILTIN_MODELS + tuple(SKELETON_MODELS)
WORKLOAD_KINDS = tuple(get_args(m.model_fields["kind"].annotation)[0] for m in ALL_MODELS)

if TYPE_CHECKING:
    AnyWorkload = Any  # a union built at run time from ALL_MODELS: a type checker cannot list it
else:
    # Union[...] of the tuple, not X | Y: the members are only known at run time.
    AnyWorkload = Annotated[Union[ALL_MODELS], Field(discriminator="kind")]  # noqa: UP007
