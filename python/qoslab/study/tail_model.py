"""The tail-latency study file (``kind = "tail-latency"``): a measured job repeating a collective
(``[target]``, or several under ``[[targets]]``), placed with each locality, routed with each
algorithm, beside many background snapshots drawn from a synthetic scheduler or from real
scheduler logs (Salimi Beni & Cosenza, docs/dragonfly.md)."""

from __future__ import annotations

import re
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BeforeValidator, Field, model_validator

from qoslab.errors import ScenarioError, problem, show
from qoslab.scenario import DragonflyPlus, Scenario
from qoslab.study.model import ExecutorConfig, StudyFile, _Table
from qoslab.workloads import AnyWorkload

LOCALITIES = ("same-group", "spread-groups", "scheduler", "random")
Locality = Literal["same-group", "spread-groups", "scheduler", "random"]
BACKGROUND_JOB = re.compile(r"bg[0-9]+")  # the names the plan gives background jobs
NAMED_SOURCES = ("sacct", "sacct-json", "jobcomp")  # logs whose jobs name their hosts


def _default_target_workload() -> dict[str, Any]:
    return {"kind": "collective-loop", "collective": "alltoall", "bytes": 4096, "iterations": 1000}


class Target(_Table):
    """The measured job: each iteration of its workload is one latency sample."""

    name: str = "target"
    nodes: Annotated[int, Field(ge=2)]
    ranks_per_node: Annotated[int, Field(ge=1, le=4096)] = 1
    workload: AnyWorkload = Field(default_factory=_default_target_workload, validate_default=True)  # type: ignore[arg-type]
    # The SL its messages go at (background jobs: SL 0): with the scenario's [qos] tables, a
    # priority for the measured job. Two [[targets]] differing only in sl compare QoS on the same
    # snapshots.
    sl: Annotated[int, Field(ge=0, le=15)] = 0


def _default_background_workloads() -> list[dict[str, Any]]:
    return [
        {"kind": "all-to-all", "bytes": 65536, "iterations": 2},
        {"kind": "nearest-neighbor", "dims": 3, "bytes": 65536, "iterations": 4},
        {"kind": "collective-loop", "collective": "allreduce", "bytes": 1048576, "iterations": 2},
        {"kind": "random-pairs", "bytes": 262144, "iterations": 4},
    ]


class Background(_Table):
    """Where the other users' jobs come from, and what they run."""

    source: Literal["synthetic", "sacct", "sacct-json", "jobcomp", "swf"] = "synthetic"
    # sacct -P output, sacct --json output, a jobcomp/filetxt log or an SWF file, relative to the study file
    log: str | None = None
    # sacct, sacct-json, jobcomp: the cluster's host names in fabric order, as a hostlist ("r[001-972]"); default H0..
    host_names: str | None = None
    procs_per_node: Annotated[int, Field(ge=1)] = 1  # SWF: processors per node
    # SWF: the log's machine scaled to the fabric (its hosts / the log's nodes): a job of n > 1
    # nodes gets round(n x scale_nodes), a one-node job becomes round(scale_nodes) one-node jobs
    scale_nodes: Annotated[float, Field(ge=1, allow_inf_nan=False)] | None = None
    # SWF: a log that records no wait times (-1) read with its jobs submitted when they started.
    assume_zero_wait: bool = False
    placement: Literal["scheduler", "random"] = "scheduler"  # synthetic and SWF jobs
    # synthetic: the busy fraction of the hosts, drawn uniformly in [low, high]
    occupancy: Annotated[list[Annotated[float, Field(ge=0, lt=1)]], Field(min_length=2, max_length=2)] = Field(
        default_factory=lambda: [0.3, 0.9])
    # synthetic: job sizes, drawn log-uniformly in [low, high]
    job_nodes: Annotated[list[Annotated[int, Field(ge=1)]], Field(min_length=2, max_length=2)] = Field(
        default_factory=lambda: [2, 64])
    single_node_fraction: Annotated[float, Field(ge=0, le=1)] = 0.2  # synthetic: one-node jobs (no network)
    workloads: Annotated[list[AnyWorkload], Field(min_length=1)] = Field(  # type: ignore[valid-type]
        default_factory=_default_background_workloads, validate_default=True)

    @model_validator(mode="after")
    def _keys(self) -> Background:
        if self.source != "synthetic" and self.log is None:
            raise problem(f'source = "{self.source}" needs the log file (log = "...")', "log")
        if self.source == "synthetic" and self.log is not None:
            raise problem('log is only read with source = "sacct", "sacct-json", "jobcomp" or "swf"', "log")
        if self.host_names is not None and self.source not in NAMED_SOURCES:
            raise problem('host_names is only used with source = "sacct", "sacct-json" or "jobcomp"', "host_names")
        if self.assume_zero_wait and self.source != "swf":
            raise problem(f'assume_zero_wait is only used with source = "swf", not "{self.source}"', "assume_zero_wait")
        if self.scale_nodes is not None and self.source != "swf":
            raise problem(f'scale_nodes is only used with source = "swf" (SWF logs have node counts, not hosts), '
                          f'not "{self.source}"', "scale_nodes")
        low, high = self.occupancy
        if not 0 <= low <= high < 1:
            raise problem(f"expected 0 <= low <= high < 1, got {show(list(self.occupancy))}", "occupancy")
        low, high = self.job_nodes
        if not 1 <= low <= high:
            raise problem(f"expected 1 <= low <= high, got {show(list(self.job_nodes))}", "job_nodes")
        return self


def _default_localities() -> list[Locality]:
    return ["same-group", "spread-groups"]


def _routing_choice(value: Any) -> Any:
    """A routing name is shorthand for a table with only the algorithm."""
    return {"algorithm": value} if isinstance(value, str) else value


class RoutingChoice(_Table):
    """One routing of the study: a Dragonfly+ algorithm, and flowlets for adaptive routing."""

    algorithm: Literal["minimal", "valiant", "adaptive"]
    flowlet_gap_us: Annotated[float, Field(ge=0, allow_inf_nan=False)] = 0.0

    @property
    def label(self) -> str:
        """How runs and the report name it: the algorithm, with the flowlet gap when there is one."""
        return self.algorithm if self.flowlet_gap_us == 0 else f"{self.algorithm}-flowlet-{self.flowlet_gap_us:g}us"

    def scenario_routing(self) -> dict[str, Any]:
        routing: dict[str, Any] = {"algorithm": self.algorithm}
        if self.flowlet_gap_us:
            routing["flowlet_gap_us"] = self.flowlet_gap_us
        return routing


class TailStudy(StudyFile):
    kind: Literal["tail-latency"]
    name: str | None = None
    description: str | None = None
    scenario: str | dict[str, Any]  # fabric, topology (dragonfly-plus), qos, mpi; its jobs are ignored
    target: Target | None = None  # the measured job; or several, each named, under [[targets]]
    targets: list[Target] | None = None
    localities: Annotated[list[Locality], Field(min_length=1)] = Field(default_factory=_default_localities)
    # names ("minimal", "valiant", "adaptive") or tables ({ algorithm = "adaptive", flowlet_gap_us = 20 })
    routings: Annotated[list[Annotated[RoutingChoice, BeforeValidator(_routing_choice)]], Field(min_length=1)] = Field(
        default_factory=lambda: [RoutingChoice(algorithm="minimal"), RoutingChoice(algorithm="adaptive")])
    snapshots: Annotated[int, Field(ge=1, le=100000)] = 20
    # Congestion control off and/or on for every run (the scenario's [congestion_control] settings,
    # `enabled` set per value): the runs with it on are labelled "<routing>+cc". Not given: as the
    # scenario has it, and routing labels (and so run ids) as without this key.
    congestion_control: Annotated[list[bool], Field(min_length=1, max_length=2)] | None = None
    baseline: bool = True  # also each locality x routing with no background at all
    background: Background = Field(default_factory=Background)
    heuristic: str = "salimi-beni"  # background-traffic definition (qoslab.io.scheduler.HEURISTICS)
    tail_quantile: Annotated[float, Field(gt=0, lt=1)] = 0.9
    executor: ExecutorConfig = Field(default_factory=ExecutorConfig)

    DEFAULT_TITLE: ClassVar[str] = "tail-latency study"

    def plan(self) -> dict[str, Any]:
        from qoslab.study.tail_plan import TailPlan

        return {"study": self.title(), **TailPlan(self).size()}

    @model_validator(mode="after")
    def _one_kind_of_target(self) -> TailStudy:
        if self.target is not None and self.targets is not None:
            raise problem("give [target] (one measured job) or [[targets]] (several), not both", "targets")
        if self.target is None and self.targets is None:
            raise problem("missing: give the measured job as [target], or several as [[targets]]", "target")
        if self.targets is not None:
            if not self.targets:
                raise problem("expected at least one [[targets]] table, got an empty list", "targets")
            seen: dict[str, int] = {}
            for i, t in enumerate(self.targets):
                # Several targets share tables and run labels: each needs its own, written name.
                if "name" not in t.model_fields_set:
                    raise problem("each of the [[targets]] needs a name (it labels its runs and rows)",
                                  f"targets[{i}].name")
                if t.name in seen:
                    raise problem(f"{t.name!r} is already the name of targets[{seen[t.name]}]", f"targets[{i}].name")
                seen[t.name] = i
        for key, t in self.named_targets():
            if not t.name.strip():
                raise problem("expected a non-empty name", f"{key}.name")
            if BACKGROUND_JOB.fullmatch(t.name):
                raise problem(f"{t.name!r} is a background job's name (bg0, bg1, ...); choose another", f"{key}.name")
        return self

    def named_targets(self) -> list[tuple[str, Target]]:
        """Each measured job with the key it was given under: ("target", t) or ("targets[i]", t)."""
        if self.targets is not None:
            return [(f"targets[{i}]", t) for i, t in enumerate(self.targets)]
        return [("target", self.target)] if self.target is not None else []

    def all_targets(self) -> list[Target]:
        """The measured jobs, in the file's order (one for [target])."""
        return [t for _, t in self.named_targets()]

    @property
    def several_targets(self) -> bool:
        """Written as [[targets]]: run labels and tables then carry each target's name."""
        return self.targets is not None

    def _prepare(self) -> None:
        from qoslab.io.scheduler import HEURISTICS

        if isinstance(self.scenario, str):
            base = Scenario.from_toml(self.resolve(self.scenario))
        else:
            try:
                base = Scenario.from_dict({k: v for k, v in self.scenario.items() if k != "jobs"}, self._source)
            except ScenarioError as error:
                raise ScenarioError([(f"scenario.{k}" if k else "scenario", m) for k, m in error.problems],
                                    self._source) from None
        if not isinstance(base.topology, DragonflyPlus):
            raise self._error("scenario.topology", f"the tail-latency study needs a dragonfly-plus topology "
                              f"(its localities are groups), got {base.topology.kind!r}")
        for key, t in self.named_targets():
            if t.nodes > base.host_count():
                raise self._error(f"{key}.nodes", f"{t.nodes} nodes, but the fabric has {base.host_count()} hosts")
        if self.heuristic not in HEURISTICS:
            raise self._error("heuristic", f"unknown definition {self.heuristic!r} (known: {', '.join(sorted(HEURISTICS))})")
        if self.congestion_control is not None:
            if len(set(self.congestion_control)) != len(self.congestion_control):
                raise self._error("congestion_control", f"each value once, got {show(self.congestion_control)}")
            if True in self.congestion_control:
                try:  # the scenario's settings, switched on, must be a valid scenario
                    cc = {**base.given().get("congestion_control", {}), "enabled": True}
                    Scenario.from_dict({**base.given(), "congestion_control": cc}, self._source)
                except ScenarioError as error:
                    raise self._error("congestion_control", "with congestion control on the scenario is invalid: "
                                      + "; ".join(f"{k}: {m}" for k, m in error.problems)) from None
        labels = [r.label for r in self.routings]
        for i, label in enumerate(labels):
            if labels.index(label) != i:
                raise self._error(f"routings[{i}]", f"{label!r} is listed twice")
        for i, routing in enumerate(self.routings):
            # Whether a routing suits the fabric (flowlets only with adaptive routing, VL layers) is
            # the engine's rule: ask it through the scenario, and name the study's key.
            try:
                Scenario.from_dict({**base.given(), "routing": routing.scenario_routing()}, self._source)
            except ScenarioError as error:
                raise ScenarioError([(f"routings[{i}]{k.removeprefix('routing')}", m) if k.split(".")[0] == "routing"
                                     else (f"routings[{i}]", f"with {routing.label!r} the scenario is invalid: {k}: {m}")
                                     for k, m in error.problems], self._source) from None
        if self.background.log is not None:
            path = self.resolve(self.background.log)
            if not path.is_file():
                raise self._error("background.log", f"{path}: file not found")
        self._base = base


