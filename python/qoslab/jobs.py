"""The scenario's ``[[jobs]]`` table: MPI jobs, their placement keys, collective algorithms and
SL policies. With the workload models, the only place their defaults live. Loaded only when a
scenario has jobs (scenario.py validates them through `JOBS`).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, model_validator

from qoslab.errors import problem
from qoslab.host_lists import Hosts
from qoslab.scenario_files import _Table
from qoslab.workload_base import MAX_MESSAGE_BYTES
from qoslab.workloads import ALL_MODELS, WORKLOAD_KINDS, AnyWorkload


class Collectives(_Table):
    """Which algorithm the job's MPI library uses for each collective."""

    allreduce: Literal["recursive-doubling", "ring"] = "recursive-doubling"
    alltoall: Literal["pairwise", "bruck"] = "pairwise"


SlNumber = Annotated[int, Field(ge=0, le=15)]
Fraction = Annotated[float, Field(gt=0, le=1, allow_inf_nan=False)]


class JobSl(_Table):
    """Every message at the job's `sl`."""

    kind: Literal["job"]

    def engine(self) -> dict[str, Any]:
        return {"kind": self.kind}

    def service_levels(self) -> list[int]:
        return []


class RankSl(_Table):
    """Messages sent by (source), to (destination) or either end of `ranks` go at `sl`."""

    kind: Literal["ranks"]
    ranks: list[Annotated[int, Field(ge=0)]]
    sl: SlNumber = 1
    match: Literal["source", "destination", "either"] = "source"

    def engine(self) -> dict[str, Any]:
        return {"kind": self.kind, "ranks": sorted(set(self.ranks)), "sl": self.sl, "match": self.match}

    def service_levels(self) -> list[int]:
        return [self.sl]


class SlowestRanksSl(_Table):
    """The engine picks the ranks after `after_iterations` iterations of the first run: the top
    ceil(fraction x ranks) by `metric` ("least-wait": the critical path; "most-wait";
    "slowest-sends": the highest mean latency of the rank's delivered messages)."""

    kind: Literal["slowest-ranks"]
    fraction: Fraction = 0.1
    after_iterations: Annotated[int, Field(ge=1, lt=2**32)] = 1
    metric: Literal["least-wait", "most-wait", "slowest-sends"] = "least-wait"
    sl: SlNumber = 1
    match: Literal["source", "destination", "either"] = "source"

    def engine(self) -> dict[str, Any]:
        return {"kind": self.kind, "fraction": float(self.fraction), "after_iterations": self.after_iterations,
                "metric": self.metric, "sl": self.sl, "match": self.match}

    def service_levels(self) -> list[int]:
        return [self.sl]


class SpreadSl(_Table):
    """Every message on one of `sls`: per rank pair ("connection"), per destination rank, or
    round robin per sending rank ("message")."""

    kind: Literal["spread"]
    sls: Annotated[list[SlNumber], Field(min_length=1)]
    by: Literal["connection", "destination", "message"] = "connection"

    def engine(self) -> dict[str, Any]:
        return {"kind": self.kind, "sls": list(self.sls), "by": self.by}

    def service_levels(self) -> list[int]:
        return list(self.sls)


class LatencyHistorySl(_Table):
    """A tier per message from the latency its sender saw to that destination before
    (docs/jobs.md): SLs lowest priority first, one threshold fewer than SLs."""

    kind: Literal["latency-history"]
    sls: Annotated[list[SlNumber], Field(min_length=1)]
    thresholds: list[Annotated[float, Field(gt=0, allow_inf_nan=False)]]
    direction: Literal["promote", "demote"] = "promote"
    history_messages: Annotated[int, Field(ge=1, lt=2**32)] = 16
    high_bytes_cap: Fraction = 1.0

    @model_validator(mode="after")
    def _tiers(self) -> LatencyHistorySl:
        if len(self.thresholds) != len(self.sls) - 1:
            raise problem(f"expected {len(self.sls) - 1} thresholds for {len(self.sls)} SLs, got {len(self.thresholds)}",
                          "thresholds")
        if any(b <= a for a, b in zip(self.thresholds, self.thresholds[1:])):
            raise problem(f"expected strictly increasing ratios, got {self.thresholds}", "thresholds")
        return self

    def engine(self) -> dict[str, Any]:
        return {"kind": self.kind, "sls": list(self.sls), "thresholds": [float(t) for t in self.thresholds],
                "direction": self.direction, "history_messages": self.history_messages,
                "high_bytes_cap": float(self.high_bytes_cap)}

    def service_levels(self) -> list[int]:
        return list(self.sls)


SlPolicy = Annotated[JobSl | RankSl | SlowestRanksSl | SpreadSl | LatencyHistorySl, Field(discriminator="kind")]
SL_POLICY_KINDS = ("job", "ranks", "slowest-ranks", "spread", "latency-history")
SL_POLICY_MODELS = (JobSl, RankSl, SlowestRanksSl, SpreadSl, LatencyHistorySl)


# Workloads whose collectives can gather every rank's block into one message.
COLLECTIVE_KINDS = frozenset({"collective-loop", "all-to-all", "gpcnet-alltoall", "gpcnet-allreduce"})


class Job(_Table):
    name: str | None = None  # None: "job<index>"
    nodes: Annotated[int, Field(ge=1)] | None = None  # None: the length of `hosts`
    ranks_per_node: Annotated[int, Field(ge=1, le=4096)] = 1
    # same-group, spread-groups and scheduler need Dragonfly+ groups (placement.py).
    placement: Literal["contiguous", "random", "fragmented", "hosts", "same-group", "spread-groups",
                       "scheduler"] = "contiguous"
    fragment_nodes: Annotated[int, Field(ge=1)] = 4  # fragmented: this job's nodes per leaf switch (F4, F8)
    hosts: Hosts | None = None  # placement = "hosts": the nodes, in rank order
    share_hosts: bool = False  # may use hosts other jobs use
    sl: Annotated[int, Field(ge=0, le=15)] = 0
    restart: bool = True  # keep running until every job has completed once
    workload: AnyWorkload
    collectives: Collectives = Field(default_factory=Collectives)
    sl_policy: SlPolicy = Field(default_factory=lambda: JobSl(kind="job"))  # how each message's SL is chosen
    # False: the job runs, but its iterations are not recorded (iterations.parquet, the summary's
    # iteration figures): background jobs of thousands of ranks would outweigh the measured ones.
    record_iterations: bool = True

    def requested_nodes(self) -> int:
        """`nodes`, for a placement other than "hosts" (where the validator requires it)."""
        if self.nodes is None:
            raise ValueError(f"job {self.name!r}: nodes is unset (placement {self.placement!r})")
        return self.nodes

    def service_levels(self) -> list[int]:
        """Every SL the job's messages can use."""
        return sorted({self.sl, *self.sl_policy.service_levels()})

    @model_validator(mode="after")
    def _collective_messages(self) -> Job:
        # A collective can gather a block of every rank into one message (Bruck's alltoall sends
        # up to all of them at once), and a message's packets are numbered in 32 bits.
        bytes_ = getattr(self.workload, "bytes", None)
        if self.workload.kind in COLLECTIVE_KINDS and self.nodes is not None and bytes_ is not None:
            ranks = self.nodes * self.ranks_per_node
            if bytes_ * ranks >= MAX_MESSAGE_BYTES:
                raise problem(f"{bytes_} bytes x {ranks} ranks: a collective can put that much into one message, "
                              f"beyond the engine's {MAX_MESSAGE_BYTES} bytes (2^39) a message", "workload.bytes")
        return self

    @model_validator(mode="after")
    def _placement_keys(self) -> Job:
        if self.placement == "hosts":
            if self.hosts is None:
                raise problem('placement = "hosts" needs the list of hosts', "hosts")
            if self.hosts == "all":
                return self
        elif self.hosts is not None:
            raise problem(f'hosts is only used with placement = "hosts" (placement is {self.placement!r})', "hosts")
        elif self.nodes is None:
            raise problem("required key is missing (how many nodes the job uses)", "nodes")
        # Set to another value than its default: a resolved scenario (model_dump, summary.json)
        # lists every key with its default, which is not a mistake.
        if (self.placement != "fragmented" and "fragment_nodes" in self.model_fields_set
                and self.fragment_nodes != type(self).model_fields["fragment_nodes"].default):
            raise problem(f'fragment_nodes is only used with placement = "fragmented" (placement is '
                          f'{self.placement!r})', "fragment_nodes")
        return self


# How scenario.py validates [[jobs]] (it loads this module only for a scenario with jobs): strict,
# as the scenario's own fields are, so a tuple or a set is refused as it was in the Scenario model.
JOBS: TypeAdapter[list[Job]] = TypeAdapter(list[Job], config=ConfigDict(strict=True))


def _kind(model: type[BaseModel]) -> str:
    return str(get_args(model.model_fields["kind"].annotation)[0])


# Where each table under [[jobs]] has its allowed keys (scenario.py's "unknown key" hints), by its
# path below jobs, and the union tags pydantic puts in error locations, which the errors leave out.
TABLES: dict[tuple[str, ...], type[BaseModel]] = {
    (): Job,
    ("collectives",): Collectives,
    **{("sl_policy", _kind(model)): model for model in SL_POLICY_MODELS},
    **{("workload", _kind(model)): model for model in ALL_MODELS},
}
SKIP_LOC = [("workload", kind) for kind in WORKLOAD_KINDS] + [("sl_policy", kind) for kind in SL_POLICY_KINDS]
