"""What every QoS policy is: a named, parameterised object that turns a placed scenario into the
scenario to simulate (job SLs, per-message SL rules, the fabric's QoS tables).

Policies act between engine calls: what must happen per message is an ``sl_policy`` the engine
runs (docs/jobs.md); what needs earlier results (a profiling run, the jobs alone) reads them from
the ``PolicyContext`` the study runner fills in.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Annotated, Any, ClassVar, Literal

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, model_validator

from qoslab.errors import problem
from qoslab.policies.arbitration import (
    DEFAULT_SHARE_TOLERANCE,
    Arbitration,
    Shares,
    ShareTolerance,
    Weights,
)
from qoslab.vlarb import Granularity

# What a policy may need before it can be applied (the runner provides it).
NEEDS_PROFILE = "profile"  # the "default" policy's shared run of the same repetition
NEEDS_ALONE = "alone"  # every job's alone run of the same repetition


@dataclass(frozen=True)
class QosVls:
    """The VLs a policy's levels may use in its runs, as Scenario.qos_vls counts them: the data VLs
    the ports operate divided among routing's VL layers (the higher VLs are the layers' copies),
    with where that count comes from, for errors."""

    data_vls: int  # the ports operate: the policy's data_vls or fabric.data_vls
    layers: int  # routing.vls
    own: bool  # data_vls is the policy's own key, not fabric.data_vls

    @property
    def count(self) -> int:
        return self.data_vls // self.layers

    def why(self) -> str:
        """'the ports operate only N data VLs (KEY = N)', naming the keys that set the count."""
        key = "this policy's data_vls" if self.own else "fabric.data_vls"
        if self.layers == 1:
            return f"the ports operate only {self.count} data VLs ({key} = {self.data_vls})"
        return (f"routing leaves only {self.count} VLs for QoS ({key} = {self.data_vls} divided among "
                f"routing.vls = {self.layers} routing layers)")


class _Table(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


@dataclass
class AloneRun:
    runtime_us: float | None
    iterations: pd.DataFrame  # rank, iteration, time_ns, mpi_wait_ns (the job's first run)
    levels: pd.DataFrame  # level, direction, bytes, links_used, busy_ns (see sweep/execute.py)
    link_gbps: float


@dataclass
class PolicyContext:
    """What a policy may read when it is applied to one repetition."""

    repetition: int
    seed: int
    jobs: list[str]
    ranks: dict[str, int]
    # The VLs the policy's levels may use in the run (QosVls.count): the data VLs the ports operate
    # (the policy's data_vls or the scenario's) divided among routing's VL layers.
    qos_vls: int
    profile: pd.DataFrame | None = None  # iterations of the default shared run
    # What weights mean on the study's fabric (MTU, header): shares are realised for it.
    granularity: Granularity | None = None
    alone: dict[str, AloneRun] = field(default_factory=dict)


class PolicyError(ValueError):
    """A policy that cannot be applied to the study's scenario (key relative to the policy)."""

    def __init__(self, key: str, message: str):
        self.key = key
        self.message = message
        super().__init__(f"{key}: {message}" if key else message)

    def __reduce__(self) -> tuple[Any, ...]:  # pickled whole, as qoslab.errors' are
        return type(self), (self.key, self.message)


DataVls = Literal[1, 2, 4, 8, 15]


class Policy(_Table):
    kind: str
    name: str | None = None  # None: derived from the kind and parameters (see label())
    # The data VLs every port operates in this policy's runs: fabric.data_vls for them, so a port
    # buffer is divided among this many VLs (1 VL x the whole buffer against N VLs x 1/N, as the
    # seeds compare). None: the scenario's fabric.data_vls.
    data_vls: DataVls | None = None

    needs: ClassVar[frozenset[str]] = frozenset()

    def label(self) -> str:
        if self.name:
            return self.name
        if self.data_vls is None:
            return self.default_name()
        return f"{self.default_name()} on {self.data_vls} VL{'s' if self.data_vls > 1 else ''}"

    def default_name(self) -> str:
        return self.kind

    def describe(self, granularity: Granularity | None = None) -> str:
        """One line for the report: what the policy does (its arbitration's effective shares at
        the fabric's MTU when `granularity` is given)."""
        return self.kind

    def levels_used(self, jobs: list[str]) -> set[int] | None:
        """The levels (VLs of its arbitration) the policy puts traffic on, when it says so
        statically; None: any of them may carry traffic."""
        by_level = self.jobs_by_level(jobs)
        return None if by_level is None else set(by_level)

    def jobs_by_level(self, jobs: list[str]) -> dict[int, list[str]] | None:
        """{level: the jobs the policy puts on it}, when it says so statically; None: any job may
        use any level."""
        return None

    def description(self, granularity: Granularity | None = None) -> str:
        """describe(), plus the VL count the ports operate when the policy sets it."""
        if self.data_vls is None:
            return self.describe(granularity)
        return f"{self.describe(granularity)}; ports operate {self.data_vls} data VL{'s' if self.data_vls > 1 else ''}"

    def operated_vls(self, scenario_vls: int) -> int:
        """The data VLs the ports operate in this policy's runs (given the scenario's)."""
        return self.data_vls or scenario_vls

    def qos_vls(self, scenario_vls: int, layers: int) -> QosVls:
        """The VLs this policy's levels may use (given the scenario's data VLs and routing.vls)."""
        return QosVls(self.operated_vls(scenario_vls), layers, self.data_vls is not None)

    def arbitrations(self, qos_vls: int) -> list[tuple[str, Arbitration]]:
        """The VLArb tables the policy may program on `qos_vls` VLs (QosVls.count), each with the
        key that states it (none: the policy keeps the scenario's tables)."""
        return []

    def required(self) -> frozenset[str]:
        """What this instance needs before apply (may depend on its parameters)."""
        return self.needs

    def expand(self, jobs: list[str]) -> list[Policy]:
        """The concrete policies this entry stands for (several for "every assignment")."""
        return [self]

    def check(self, jobs: list[str], ranks: dict[str, int], vls: QosVls) -> None:
        """Raises PolicyError if the policy cannot run on the study's jobs and fabric."""

    def apply(self, scenario: dict[str, Any], ctx: PolicyContext) -> dict[str, Any]:
        raise NotImplementedError


class Arbitrated(Policy):
    """A policy that owns the fabric's QoS tables: its priority levels are SLs 0..n-1, SL v on
    VL v, with ``weights`` (64-byte units, any size) or ``shares`` (of a saturated port, realised
    at the fabric's MTU within ``share_tolerance``), ``high`` VLs and ``high_limit``."""

    DEFAULT_WEIGHTS: ClassVar[tuple[int, ...] | None] = None  # None: weights or shares are required
    MIN_LEVELS: ClassVar[int] = 1

    weights: Weights | None = None
    shares: Shares | None = None
    share_tolerance: ShareTolerance = DEFAULT_SHARE_TOLERANCE
    high: list[Annotated[int, Field(ge=0, le=14)]] = Field(default_factory=list)
    high_limit: Annotated[int, Field(ge=0, le=255)] = 0

    @model_validator(mode="after")
    def _arbitration_expressible(self) -> Arbitrated:
        if self.shares is not None and self.weights is not None:
            raise problem("give either weights or shares, not both", "shares")
        if self.shares is None and self.weights is None:
            if self.DEFAULT_WEIGHTS is None:
                raise problem("required key is missing (or give shares)", "weights")
            self.weights = list(self.DEFAULT_WEIGHTS)
        if self.weights is not None and not any(self.weights) and not self.high:
            raise problem("every weight is 0: no VL would ever be served and every run would stall; give at least "
                          "one level a weight", "weights")
        if self.levels < self.MIN_LEVELS:
            raise problem(f"expected at least {self.MIN_LEVELS} levels, got {self.levels}", self.arbitration().key)
        self.arbitration()  # raises with the key named
        return self

    @property
    def levels(self) -> int:
        """Priority levels (SLs 0..levels-1): one per weight or share."""
        if self.shares is not None:
            return len(self.shares)
        return len(self.weights if self.weights is not None else self.DEFAULT_WEIGHTS or [])

    def arbitration(self) -> Arbitration:
        return Arbitration(weights=None if self.weights is None else list(self.weights),
                           shares=None if self.shares is None else list(self.shares),
                           share_tolerance=self.share_tolerance, high=list(self.high), high_limit=self.high_limit)

    def arbitrations(self, qos_vls: int) -> list[tuple[str, Arbitration]]:
        arbitration = self.arbitration()
        return [(arbitration.key, arbitration)]

    def check_levels(self, vls: QosVls) -> None:
        if self.levels > vls.count:
            key = self.arbitration().key
            default = self.DEFAULT_WEIGHTS is not None and self.weights == list(self.DEFAULT_WEIGHTS)
            given = f" (the default weights, {self.weights})" if default else ""
            raise PolicyError(
                key,
                f"the policy uses {self.levels} SLs{given}, each on its own VL, but {vls.why()}; use fewer levels "
                "or more VLs",
            )


def with_jobs(scenario: dict[str, Any], qos: dict[str, Any] | None, per_job: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """A copy of a placed scenario with new QoS tables (None: keep them) and job keys set per job
    name; every job not named goes back to SL 0 with the plain per-job rule."""
    out = copy.deepcopy(scenario)
    if qos is not None:
        out["qos"] = qos
    for job in out.get("jobs", []):
        job["sl"] = 0
        job.pop("sl_policy", None)  # absent: every message at the job's SL
        job.update(per_job.get(job["name"], {}))
    return out


def check_jobs_known(key: str, named: list[str], jobs: list[str]) -> None:
    for name in named:
        if name not in jobs:
            raise PolicyError(key, f"no job named {name!r} in the study's scenario (jobs: {', '.join(jobs)})")


def stated(weights: list[int] | None, shares: list[float] | None) -> str:
    """A policy's weights or shares in its name: "2286:254:9:1" or "s=0.9:0.1"."""
    if shares is not None:
        return "s=" + ":".join(f"{s:g}" for s in shares)
    return ":".join(map(str, weights or []))
