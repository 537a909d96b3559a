"""The study file as pydantic models: a base scenario with jobs, the policies to compare, the
repetitions, and where the runs execute. Everything is checked before any simulation starts."""

from __future__ import annotations

import copy
import itertools
import json
import math
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)

from qoslab.errors import ScenarioError, from_validation_error, problem
from qoslab.policies import POLICY_KINDS, AnyPolicy, Default, Policy, PolicyError
from qoslab.policies.base import Policy as PolicyBase
from qoslab.scenario import Scenario, read_toml, with_data_vls
from qoslab.scenario_files import _assign
from qoslab.vlarb import OUTSIDE_SL0, Granularity, unweighted


class _Table(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class ExecutorConfig(_Table):
    """Where runs execute: "local" worker processes (default: one per core), an existing "dask"
    scheduler, or a "slurm" allocation made by dask-jobqueue with the [executor.slurm] keys."""

    kind: Literal["local", "dask", "slurm"] = "local"
    workers: Annotated[int, Field(ge=0)] = 0  # local: processes (0: every core); slurm: Slurm jobs (0: 1)
    scheduler: str | None = None  # dask: the scheduler's address, e.g. "tcp://10.0.0.1:8786"
    slurm: dict[str, Any] = Field(default_factory=dict)  # dask_jobqueue.SLURMCluster keywords
    # dask and slurm: a study whose cluster has had no worker this long stops, saying so.
    no_worker_timeout_s: Annotated[float, Field(gt=0, allow_inf_nan=False)] = 600.0

    @field_validator("slurm")
    @classmethod
    def _one_line_each(cls, slurm: dict[str, Any]) -> dict[str, Any]:
        # dask-jobqueue writes these into a job script's lines: a line break would start a command.
        def check(value: Any, key: str) -> None:
            if isinstance(value, str) and not all(ch.isprintable() or ch == "\t" for ch in value):
                raise problem(f"{value!r}: control characters (a line break) cannot go into a job script's line",
                              key)
            for item in value if isinstance(value, list) else value.values() if isinstance(value, dict) else ():
                check(item, key)

        for key, value in slurm.items():
            check(value, key)
        return slurm

    @model_validator(mode="after")
    def _keys_of_kind(self) -> ExecutorConfig:
        if self.kind == "dask" and not self.scheduler:
            raise problem('kind = "dask" needs the scheduler address (scheduler = "tcp://host:8786")', "scheduler")
        if self.kind != "dask" and self.scheduler:
            raise problem(f'scheduler is only used with kind = "dask" (kind is {self.kind!r})', "scheduler")
        if self.kind != "slurm" and self.slurm:
            raise problem(f'slurm is only used with kind = "slurm" (kind is {self.kind!r})', "slurm")
        return self

    def overridden(self, kind: str | None, slurm: dict[str, Any]) -> ExecutorConfig:
        """This table as the command line overrides it (--executor, and the Slurm options, which
        become [executor.slurm] keys); the same checks as the file's."""
        if kind is None and not slurm:
            return self
        data = self.model_dump(exclude_unset=True)
        if kind is not None:
            data["kind"] = kind
            if kind != "dask":
                data.pop("scheduler", None)
            if kind != "slurm":
                data.pop("slurm", None)
        if slurm and data.get("kind", "local") != "slurm":
            options = ", ".join(f"--{'partition' if k == 'queue' else k}" for k in slurm)
            raise ScenarioError([("executor", f"{options} apply to Slurm workers: add --executor slurm "
                                              "(or [executor] kind = \"slurm\")")])
        data["slurm"] = {**data.get("slurm", {}), **slurm}
        if not data["slurm"]:
            data.pop("slurm")
        try:
            return ExecutorConfig.model_validate(data)
        except ValidationError as error:
            problems = from_validation_error(error).problems
            raise ScenarioError([(f"executor.{key}" if key else "executor", message) for key, message in problems]) from None


FigureFormat = Literal["png", "svg", "pdf"]
FIGURE_FORMATS: tuple[str, ...] = ("png", "svg", "pdf")


class StudyFile(_Table):
    """What every study file shares: a base scenario (a file relative to the study file, or an
    inline table), an executor, the report's figure formats, and being read from a file whose
    name errors carry."""

    DEFAULT_TITLE: ClassVar[str] = "qoslab study"

    # The formats figures/ gets besides PNG, which is always written (report.html embeds it).
    # Output only: changing it reruns nothing.
    figure_formats: list[FigureFormat] = Field(default_factory=lambda: list[FigureFormat](["png"]))

    _source: str | None = PrivateAttr(default=None)
    _base: Scenario | None = PrivateAttr(default=None)

    def __init__(self, **data: Any):
        try:
            super().__init__(**data)
        except ValidationError as error:
            raise _study_error(error, None, type(self)) from None

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str | None = None) -> Any:
        if not isinstance(data, dict):
            raise ScenarioError([("", "expected a table of study keys")], source)
        try:
            study = cls(**data)
        except ScenarioError as error:
            raise error.with_source(source) from None
        study._source = source
        study._prepare()
        return study

    @classmethod
    def from_toml(cls, path: str | Path) -> Any:
        return cls.from_dict(read_toml(path), str(path))

    def _prepare(self) -> None:
        raise NotImplementedError

    @property
    def source(self) -> str | None:
        return self._source

    def base(self) -> Scenario:
        if self._base is None:  # built as Study(...), which reads no scenario file
            raise ScenarioError([("", f"a study made with {type(self).__name__}(...) is not ready to plan or run: "
                                      f"make it with {type(self).__name__}.from_dict(data, source) or "
                                      f".from_toml(path), which read and check its scenario")], self._source)
        return self._base

    def resolve(self, path: str) -> Path:
        """A path of the study file, relative to the file's folder."""
        base = Path(self._source).parent if self._source else Path.cwd()
        return (base / path) if not Path(path).is_absolute() else Path(path)

    def scenario_source(self) -> str | None:
        """The file the base scenario comes from (relative paths inside it are relative to it)."""
        if isinstance(self.scenario, str):  # type: ignore[attr-defined]
            return str(self.resolve(self.scenario))  # type: ignore[attr-defined]
        return self._source

    def title(self) -> str:
        return self.name or (Path(self._source).stem if self._source else self.DEFAULT_TITLE)  # type: ignore[attr-defined]

    def _error(self, key: str, message: str) -> ScenarioError:
        return ScenarioError([(key, message)], self._source)

    # -- the public API (docs/python-api.md) ------------------------------------------------------

    def plan(self) -> dict[str, Any]:
        """The study's size without simulating anything: what `qoslab study --plan` prints."""
        raise NotImplementedError

    def run(self, out: str | Path = "qoslab-out", executor: Any = None, workers: int = 0,
            progress: bool = False) -> Any:
        """Runs the study into `out` (resuming what is stored there) and returns its outcome:
        `.tables` (pandas DataFrames), `.figures`, `.report`. `executor`: None for the study
        file's [executor] table, "local", "dask" or "slurm" for that kind with the file's other
        keys, or an executor object (qoslab.sweep.executors); `workers` as --workers."""
        from qoslab.study.running import run_study

        return run_study(self, Path(out), executor, workers, progress)


MAX_SWEEP_POINTS = 100_000


class SweepAxis(_Table):
    """One [[sweep]] table: a scenario key (as --set writes it: "fabric.data_vls",
    "traffic[0].load", "jobs[1].workload.bytes") and the values it takes."""

    key: Annotated[str, Field(min_length=1)]
    values: Annotated[list[Any], Field(min_length=1)]


class Study(StudyFile):
    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str | None = None) -> Any:
        if isinstance(data, dict) and data.get("kind") == "tail-latency":
            raise ScenarioError([("kind", 'a tail-latency study: read it with qoslab.load_study (either kind) or '
                                          "qoslab.TailStudy.from_toml")], source)
        return super().from_dict(data, source)

    name: str | None = None
    description: str | None = None
    # The base scenario: a file (relative to the study file) or an inline table. Its jobs are the
    # ones compared; their placement is drawn once per repetition and shared by every run of it.
    scenario: str | dict[str, Any]
    repetitions: Annotated[int, Field(ge=1, le=10000)] = 1  # repetition r uses seed = scenario seed + r
    seeds: Annotated[list[Annotated[int, Field(ge=0, lt=2**64)]], Field(min_length=1)] | None = None  # explicit seeds instead
    policies: Annotated[list[AnyPolicy], Field(min_length=1)]
    executor: ExecutorConfig = Field(default_factory=ExecutorConfig)
    # Scenario keys to sweep (docs/study.md, "Sweeps"): every combination ("grid") or the i-th
    # value of each key together ("zip"); each point is a whole study of its own.
    sweep: list[SweepAxis] = Field(default_factory=list)
    sweep_mode: Literal["grid", "zip"] = "grid"
    point_reports: bool = False  # each sweep point's own report.html and figures (seconds a point)

    _expanded: list[Policy] = PrivateAttr(default_factory=list)
    _warnings: list[str] = PrivateAttr(default_factory=list)
    _points: list[dict[str, Any]] = PrivateAttr(default_factory=list)

    # -- derived -------------------------------------------------------------------------------

    def local_workers(self, workers: int) -> tuple[int, str | None]:
        """Local workers for this study: as asked (0: every core), fewer when that many of its
        largest runs (the base scenario, every job at once) would not fit in memory together,
        with a warning saying so (executors.workers_in_memory)."""
        from qoslab.resources import available_memory_bytes
        from qoslab.sweep.executors import cores, workers_in_memory

        return workers_in_memory(workers or cores(), self.base().estimated_memory_bytes(), available_memory_bytes())

    def seed_list(self) -> list[int]:
        if self.seeds is not None:
            return list(self.seeds)
        base = self.base().seed
        return [base + r for r in range(self.repetitions)]

    def concrete_policies(self) -> list[Policy]:
        """The policies after expansion ("every assignment"), the default baseline first."""
        return list(self._expanded)

    def warnings(self) -> list[str]:
        """Policies whose different weights (or shares) the fabric's MTU cannot tell apart or whose
        tables never send some jobs' traffic (a VL without weight: the baseline's too), then
        the base scenario's traffic keys its patterns ignore and congestion-control settings that
        change nothing. (What a trace's reader skips is told by the runs, which read the traces:
        StudyOutcome.notes.)"""
        base = self.base()
        cc = base.congestion_control
        if any(axis.key == "congestion_control.enabled" for axis in self.sweep):
            cc = cc.model_copy(update={"enabled": True})  # a sweep turns it on: its settings matter
        return list(self._warnings) + [f"scenario: {w}" for w in base.traffic_warnings() + cc.warnings()]

    def plan(self) -> dict[str, Any]:
        from qoslab.study.plan import study_size

        return {"study": self.title(), **study_size(self)}

    def points(self) -> list[dict[str, Any]]:
        """The sweep's points, each a {key: value} of the swept scenario keys; [] without a sweep."""
        return [dict(p) for p in self._points]

    def point_data(self, point: dict[str, Any] | None) -> dict[str, Any]:
        """The base scenario's given keys with a sweep point's values set."""
        data = self.base().given()
        for key, value in (point or {}).items():
            _assign(data, key, copy.deepcopy(value), self.scenario_source(), "sweep")
        return data

    # -- checks --------------------------------------------------------------------------------

    def _prepare(self) -> None:
        """Loads the base scenario and checks every policy against it: all before any run."""
        if isinstance(self.scenario, str):
            base = Scenario.from_toml(self.resolve(self.scenario))
        else:
            try:
                base = Scenario.from_dict(self.scenario, self._source)
            except ScenarioError as error:
                raise ScenarioError([(f"scenario.{k}" if k else "scenario", m) for k, m in error.problems], self._source) from None
        if not base.jobs:
            raise self._error("scenario", "nothing to compare: the scenario has no [[jobs]] (a study compares MPI jobs)")
        if self.seeds is not None and "repetitions" in self.model_fields_set:
            raise self._error("seeds", "give either repetitions or seeds, not both")
        if self.seeds is not None and len(set(self.seeds)) < len(self.seeds):
            twice = next(seed for seed in self.seeds if self.seeds.count(seed) > 1)
            raise self._error("seeds", f"seed {twice} is listed twice: a repetition would be counted twice")
        self._base = base
        baseline = "policy default (the scenario's [qos])"
        self._warnings = [f"{baseline}: {w}" for w in base.arbitration_warnings()]
        self._warnings += _unsent_warnings(Default(kind="default"), baseline, base.qos_vls(), Granularity.of(base), base)
        expanded, warnings = self._checked_policies(base)
        self._warnings += warnings
        labels = [p.label() for p in expanded]
        for i, label in enumerate(labels):
            if labels.index(label) != i:
                raise self._error("policies", f"two policies are both named {label!r}; give one a name")
        self._points = self._sweep_points(base)
        if "default" not in labels:
            # The baseline every comparison needs (and the per-rank policies' profiling run).
            expanded.insert(0, Default(kind="default"))
        else:
            expanded.insert(0, expanded.pop(labels.index("default")))
        self._expanded = expanded

    def _checked_policies(self, base: Scenario) -> tuple[list[Policy], list[str]]:
        """The policies expanded for `base` (the scenario, or a sweep point's), each checked
        against it, and their arbitration warnings; a problem raises naming the policy's key."""
        jobs = base.job_names()
        ranks = {name: len(hosts) * job.ranks_per_node for name, hosts, job in zip(jobs, base.placements(), base.jobs)}
        expanded: list[Policy] = []
        warnings: list[str] = []
        granularity = Granularity.of(base)
        layers = base.routing.vls or 1
        for i, policy in enumerate(self.policies):
            self._check_data_vls(i, policy, base)
            try:
                concrete = policy.expand(jobs)
                for each in concrete:
                    each.check(jobs, ranks, each.qos_vls(base.fabric.data_vls, layers))
                # Open-loop traffic keeps its own SLs under every policy: then any level may be used.
                used = None if base.traffic else policy.levels_used(jobs)
                qos_vls = policy.qos_vls(base.fabric.data_vls, layers).count
                warnings += _arbitration_warnings(policy, i, qos_vls, granularity, used)
                warnings += _capacity_warnings(policy, i, qos_vls, granularity, base.vlarb_entries_kept())
                if policy.arbitrations(qos_vls):  # a policy keeping the scenario's tables: the baseline's
                    warnings += _unsent_warnings(policy, f"policies[{i}] ({policy.label()})", qos_vls, granularity, base)
            except PolicyError as error:
                raise self._error(f"policies[{i}]" + (f".{error.key}" if error.key else ""), error.message) from None
            expanded.extend(concrete)
        return expanded, warnings

    def _sweep_points(self, base: Scenario) -> list[dict[str, Any]]:
        """Every point of the sweep, each checked as a scenario before anything runs."""
        if not self.sweep:
            for key in ("sweep_mode", "point_reports"):
                if key in self.model_fields_set:
                    raise self._error(key, "there is no [[sweep]] to apply it to")
            return []
        keys = [axis.key for axis in self.sweep]
        for i, key in enumerate(keys):
            if keys.index(key) != i:
                raise self._error(f"sweep[{i}].key", f"{key!r} is swept twice (sweep[{keys.index(key)}] too)")
            if key == "seed" or key.startswith("seed."):
                raise self._error(f"sweep[{i}].key", "seeds come from repetitions or seeds, not from a sweep")
        zipped = self.sweep_mode == "zip"
        if zipped:
            lengths = {len(axis.values) for axis in self.sweep}
            if len(lengths) > 1:
                raise self._error("sweep", "sweep_mode = \"zip\" takes the i-th value of every key together: give "
                                  f"each key as many values (got {', '.join(str(len(a.values)) for a in self.sweep)})")
        count = len(self.sweep[0].values) if zipped else math.prod(len(axis.values) for axis in self.sweep)
        if count > MAX_SWEEP_POINTS:
            raise self._error("sweep", f"{count} points; at most {MAX_SWEEP_POINTS} (split the sweep into studies)")
        for i, axis in enumerate(self.sweep):
            seen: set[str] = set()
            for value in axis.values:
                text = json.dumps(value, sort_keys=True, default=str)  # values may be tables
                if text in seen:
                    raise self._error(f"sweep[{i}].values", f"{value!r} is listed twice: its point would be run "
                                      "and counted twice")
                seen.add(text)
        if zipped:
            combos = list(zip(*(axis.values for axis in self.sweep)))
        else:
            combos = list(itertools.product(*(axis.values for axis in self.sweep)))
        points = [dict(zip(keys, combo)) for combo in combos]
        for point in points:
            try:
                # The point as a scenario, and every policy on it (a swept key such as
                # fabric.data_vls can leave a policy with more SLs than VLs).
                self._checked_policies(Scenario.from_dict(self.point_data(point), self.scenario_source()))
            except ScenarioError as error:
                where = ", ".join(f"{k} = {v!r}" for k, v in point.items())
                raise ScenarioError([(f"sweep ({where}): {k}" if k else f"sweep ({where})", m) for k, m in error.problems],
                                    self._source) from None
        return points

    def _check_data_vls(self, index: int, policy: Policy, base: Scenario) -> None:
        """A policy's data_vls must give a valid scenario: the port buffer must still hold a
        packet per VL, routing layers and explicit QoS tables must fit the VL count."""
        if policy.data_vls is None or policy.data_vls == base.fabric.data_vls:
            return
        try:
            Scenario.from_dict(with_data_vls(base.given(), policy.data_vls), self.scenario_source())
        except ScenarioError as error:
            problems = "; ".join(f"{key}: {message}" for key, message in error.problems)
            raise self._error(f"policies[{index}].data_vls",
                              f"with fabric.data_vls = {policy.data_vls} the scenario is invalid: {problems}") from None


def _capacity_warnings(policy: Policy, index: int, qos_vls: int, granularity: Granularity,
                       kept: int | None) -> list[str]:
    """A policy's VLArb tables longer than the ports hold (fabric.vlarb_capacity): simulated as
    the ports program them, their first entries, which share the link otherwise than the weights."""
    if kept is None:
        return []
    out = []
    for key, arbitration in policy.arbitrations(qos_vls):
        high, low = arbitration.entries(granularity)
        for name, entries in (("vlarb_high", high), ("vlarb_low", low)):
            if len(entries) > kept:
                out.append(f"policy {policy.label()} (policies[{index}].{key}): its {name} table has {len(entries)} "
                           f"entries, the ports hold {kept} (fabric.vlarb_capacity): simulated and exported as "
                           f"the first {kept}, which share the link otherwise than the weights say")
    return out


def _arbitration_warnings(policy: Policy, index: int, qos_vls: int, granularity: Granularity,
                          used: set[int] | None = None) -> list[str]:
    """Realises the policy's tables at the fabric's MTU (shares that cannot be are a PolicyError
    naming the key) and returns a warning for each group of VLs whose weights collapse, of those
    VLs at least two carry traffic (`used`: the levels the policy uses; None: all)."""
    out = []
    for key, arbitration in policy.arbitrations(qos_vls):
        try:
            found = arbitration.collapses(granularity)
        except ValueError as error:
            raise PolicyError(key, str(error)) from None
        for table, collapse in found:
            if used is not None and len(used.intersection(collapse.vls)) < 2:
                continue  # no two jobs' traffic the table fails to tell apart
            out.append(f"policies[{index}] ({policy.label()}), {key}: {collapse.message(table, granularity)}")
    return out


def _unsent_warnings(policy: Policy, where: str, qos_vls: int, granularity: Granularity, base: Scenario) -> list[str]:
    """The levels of a policy's tables (the scenario's own for a policy without any) that carry a
    job's traffic, or the scenario's open-loop traffic, but whose VL has no weight in either VLArb
    table as the ports hold it: that traffic is never sent, a job on it cannot finish, and `qoslab
    export opensm` refuses the tables (vlarb.unweighted: the rule `qoslab check` warns by)."""
    by_level = policy.jobs_by_level(base.job_names())
    traffic: dict[int, list[str]] = {}
    for i, source in enumerate(base.traffic):
        traffic.setdefault(source.sl, []).append(f"traffic[{i}]")
    arbitrations: list[tuple[str, int | None, dict[str, Any]]] = [
        (key, arbitration.levels, arbitration.qos(granularity)) for key, arbitration in policy.arbitrations(qos_vls)]
    if not arbitrations:
        arbitrations = [(f"qos.{port}", None, base.port_qos(port)) for port in ("ca", "swe")]
    out = []
    for key, levels, qos in arbitrations:
        if by_level is not None:
            users = {level: [f"job {name!r}" for name in names] for level, names in by_level.items()}
        else:  # any job may be put on any of the policy's levels
            users = {level: ["any job it puts there"] for level in range(levels or 0)}
        for sl, who in traffic.items():
            users.setdefault(sl, []).extend(who)
        users.setdefault(0, []).append(OUTSIDE_SL0)  # on a cluster SL 0 always carries traffic
        high, low = granularity.held(qos["vlarb_high"]), granularity.held(qos["vlarb_low"])
        for sl, vl in unweighted(qos["sl2vl"], high, low, users).items():
            message = (f"{where}, {key}: {', '.join(users[sl])} on SL{sl}, which maps to VL{vl}, and VL{vl} has no "
                       "weight in either VLArb table: that traffic is never sent (a job on it cannot finish), and "
                       "qoslab export opensm refuses such tables")
            if message not in out:
                out.append(message)
    return out


# Tables below a study file's root, by path (the root is the study's own class: Study or TailStudy).
_STUDY_TABLES: dict[tuple[str, ...], type[BaseModel]] = {("executor",): ExecutorConfig}


def _allowed(parent: tuple[Any, ...], root: type[BaseModel] = Study) -> list[str] | None:
    names = tuple(p for p in parent if isinstance(p, str))
    if names[:1] == ("policies",) and len(names) == 2:
        from qoslab import policies as module

        for model in (getattr(module, n) for n in module.__all__):
            if isinstance(model, type) and issubclass(model, PolicyBase) and "kind" in model.model_fields:
                args = getattr(model.model_fields["kind"].annotation, "__args__", ())
                if args and args[0] == names[1]:
                    return list(model.model_fields)
    model = root if not names else _STUDY_TABLES.get(names)
    return list(model.model_fields) if model else None


def _study_error(error: ValidationError, source: str | None, root: type[BaseModel] = Study) -> ScenarioError:
    return from_validation_error(error, source, skip_loc=[("[]", kind) for kind in POLICY_KINDS],
                                 allowed=lambda parent: _allowed(parent, root))
