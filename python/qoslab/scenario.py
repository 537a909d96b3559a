"""The scenario file as pydantic models: validation, every default, and the engine config.

The tables have modules of their own: scenario_network.py (``[fabric]``, ``[topology]``,
``[routing]``), scenario_qos.py (``[qos]``), scenario_run.py (``[[traffic]]``, ``[run]``),
scenario_mpi.py (``[mpi]``), jobs.py and the workload models (``[[jobs]]``, loaded only for a
scenario with jobs); scenario_files.py reads the TOML and applies
``--set``. This module holds the Scenario that joins them (the checks across tables that Python
owns, the values derived from them), what a study's run id hashes, and where a table's keys are
for error messages. Every name it held before the split can still be imported from it.

These modules are the only place defaults live. The engine receives a fully resolved config
(engine_config.py, its type and producer; docs/design/engine-boundary.md) and never sees a default
or a shorthand. The rules on resolved values are the engine's: a scenario asks it when it loads
(``_check_with_engine``) and reports its answer by the key the user wrote.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, Field, PlainValidator, PrivateAttr, ValidationError, model_validator

from qoslab.errors import ScenarioError, from_validation_error, problem, show
from qoslab.host_lists import expand_hosts, has_names, resolve_names
from qoslab.resources import (
    PACKET_BYTES,
    SEND_QUEUE_BYTES,
    available_memory_bytes,
    describe_bytes,
    estimated_bytes,
)
from qoslab.scenario_cc import CongestionControl
from qoslab.scenario_files import _assign, _parse_value, _relative_to, _resolve_path, _same_key, _Table, read_toml
from qoslab.scenario_mpi import Mpi
from qoslab.scenario_network import (
    DATA_VL_CHOICES,
    DEFAULT_PORT_BUFFER_BYTES,
    DRAGONFLY_PRESETS,
    DRAGONFLY_ROUTING,
    FAT_TREE_ROUTING,
    MAX_UNICAST_LIDS,
    MTU_CHOICES,
    TOPOLOGY_KINDS,
    DragonflyPlus,
    Fabric,
    Ibnetdiscover,
    Routing,
    SingleSwitch,
    Topology,
    Xgft,
    buffer_per_vl,
)
from qoslab.scenario_qos import (
    MAX_DATA_VL,
    MAX_VLARB_ENTRIES,
    SL_COUNT,
    HighLimit,
    PortQos,
    Qos,
    Sl2Vl,
    Sl2VlPair,
    VlArb,
    _json_qos,
    default_port_qos,
)
from qoslab.scenario_run import JOBS_TIME_LIMIT_US, OPEN_LOOP_DURATION_US, OPEN_LOOP_WARMUP_US, Load, Run, Traffic
from qoslab.vlarb import CREDIT_BYTES, OUTSIDE_SL0, Granularity, collapses, describe_fabric, unweighted

if TYPE_CHECKING:
    from qoslab.engine_config import EngineConfig, RoutingConfig, TopologyConfig
    from qoslab.jobs import Job

# What other modules, tests and scripts import from here, wherever it now lives.
__all__ = [
    "CREDIT_BYTES", "DATA_VL_CHOICES", "DEFAULT_PORT_BUFFER_BYTES", "DRAGONFLY_PRESETS", "DRAGONFLY_ROUTING",
    "FAT_TREE_ROUTING", "JOBS_TIME_LIMIT_US", "MAX_DATA_VL", "MAX_UNICAST_LIDS", "MAX_VLARB_ENTRIES", "MTU_CHOICES",
    "OPEN_LOOP_DURATION_US", "OPEN_LOOP_WARMUP_US", "SL_COUNT", "TOPOLOGY_KINDS", "DragonflyPlus", "Fabric",
    "HighLimit", "Ibnetdiscover", "Load", "PortQos", "Qos", "Routing", "Run", "Scenario", "SingleSwitch", "Sl2Vl",
    "Sl2VlPair", "Topology", "Traffic", "VlArb", "Xgft", "buffer_per_vl", "default_port_qos", "read_toml",
    "run_identity", "with_data_vls",
]


def _validate_jobs(value: Any) -> list[Any]:
    """[[jobs]] through jobs.py's models, which (with the workload and skeleton models) are loaded
    only for a scenario that has jobs: a third of the model classes a run without them would
    build at every start (docs/design/engine.md, "Start-up"). Errors keep their places
    (jobs[0].workload...): pydantic nests a ValidationError raised here under the field."""
    if isinstance(value, list) and not value:
        return []  # a list of its own, as pydantic's validation makes one
    from qoslab.jobs import JOBS

    return JOBS.validate_python(value)


DEFAULT_TOPOLOGY_KIND: Literal["single-switch"] = "single-switch"


@dataclass(frozen=True)
class Unsent:
    """Traffic a port type never sends: its SL maps to a VL without weight in either VLArb table."""

    key: str  # the table's key: qos.ca or qos.swe
    port: str  # "ca" or "swe"
    sl: int
    vl: int
    users: tuple[str, ...]  # who sends on the SL: traffic[i], job 'name'

    def message(self) -> str:
        return (f"{self.key}: traffic on SL{self.sl} maps to VL{self.vl}, which has no weight in vlarb_high or "
                f"vlarb_low: it will never be sent from {self.port} ports ({', '.join(self.users)})")


class Scenario(_Table):
    name: str | None = None
    seed: Annotated[int, Field(ge=0, lt=2**64)] = 1
    fabric: Fabric = Field(default_factory=Fabric)
    topology: Topology = Field(default_factory=lambda: SingleSwitch(kind=DEFAULT_TOPOLOGY_KIND))
    routing: Routing = Field(default_factory=Routing)
    qos: Qos = Field(default_factory=Qos)
    traffic: list[Traffic] = Field(default_factory=list)
    if TYPE_CHECKING:
        jobs: list[Job] = Field(default_factory=list)
    else:
        jobs: Annotated[list[Any], PlainValidator(_validate_jobs)] = Field(default_factory=list)
    mpi: Mpi = Field(default_factory=Mpi)
    run: Run = Field(default_factory=Run)
    congestion_control: CongestionControl = Field(default_factory=CongestionControl)

    _source: str | None = PrivateAttr(default=None)
    # Its folder as it was when the scenario was read: relative trace paths are read from there
    # when it runs, even if the process has changed directory since.
    _source_dir: Path | None = PrivateAttr(default=None)
    _placements: list[list[int]] = PrivateAttr(default_factory=list)
    # The job and traffic tables the scenario was checked and placed with: its lists can still be
    # changed in place (s.jobs[0] = ...), which would run unchecked (see unchanged()).
    _made_with: tuple[tuple[Any, ...], tuple[Any, ...]] = PrivateAttr(default=((), ()))

    def __init__(self, **data: Any):
        # Scenario(**dict) reports problems the same way a file does.
        try:
            super().__init__(**data)
        except ValidationError as error:
            raise _scenario_error(error, None) from None

    # -- construction --------------------------------------------------------------------------

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str | None = None) -> Scenario:
        if not isinstance(data, dict):
            raise ScenarioError([("", f"expected a table of scenario keys, got {show(data)}")], source)
        odd = next((key for key in data if not isinstance(key, str)), None)
        if odd is not None:
            raise ScenarioError([("", f"expected keys that are strings, got {show(odd)}")], source)
        try:
            # Through __init__, not model_validate: pydantic routes validation of a model with a
            # custom __init__ through it anyway, and would wrap our ScenarioError in its own.
            with _relative_to(source):
                scenario = cls(**data)
        except ScenarioError as error:
            raise error.with_source(source) from None
        scenario._source = source
        scenario._source_dir = Path(source).parent.resolve() if source else None
        return scenario

    @classmethod
    def from_toml(cls, path: str | Path, overrides: Iterable[str] = ()) -> Scenario:
        """The scenario of a TOML file, with ``KEY=VALUE`` overrides (see `with_overrides`)
        applied before it is checked, so that an override can mend what the file alone lacks."""
        return cls._overridden(read_toml(path), overrides, str(path))

    def with_overrides(self, items: Iterable[str]) -> Scenario:
        """A copy with ``KEY=VALUE`` items applied (``fabric.data_vls=8``, ``traffic[0].load=0.3``);
        the value is read as a TOML value, or else taken as a string."""
        changed = Scenario._overridden(self.given(), items, self._source)
        # Its trace paths are read from the scenario's folder as resolved when it was first read,
        # not as the working directory sees its source now (fabric and LFT paths are absolute).
        changed._source_dir = self._source_dir
        return changed

    @classmethod
    def _overridden(cls, data: dict[str, Any], items: Iterable[str], source: str | None) -> Scenario:
        if isinstance(items, str):  # a str is an iterable of one-letter items, each refused as "f"
            raise TypeError(f"overrides: expected a list of KEY=VALUE strings, got the string {items!r} "
                            f"(write [{items!r}])")
        items = list(items)
        if items and "topology" not in data:
            # As given() does: topology keys are read by the kind, the default one if none is given.
            data = {**data, "topology": {"kind": DEFAULT_TOPOLOGY_KIND}}
        keys = []
        for item in items:
            key, sep, raw = item.partition("=")
            key = key.strip()
            if not sep or not key:
                raise ScenarioError([("--set", f"expected KEY=VALUE, got {show(item)}")], source)
            _assign(data, key, _parse_value(raw.strip()), source)
            keys.append(key)
        try:
            return cls.from_dict(data, source)
        except ScenarioError as error:
            marked = [(k, f"{m} (from --set)" if _same_key(k, keys) else m) for k, m in error.problems]
            raise ScenarioError(marked, error.source) from None

    def given(self) -> dict[str, Any]:
        """The keys the scenario was given, defaults left out so that those derived from other
        keys (QoS tables and the port buffer's division from fabric.data_vls) are derived again
        when something changes: what --set and a study's policies start from."""
        data = self.model_dump(exclude_unset=True)
        # The kind is needed to read topology keys even when the topology is the default one.
        data.setdefault("topology", {"kind": self.topology.kind})
        return data

    @property
    def source(self) -> str | None:
        """The file this scenario was read from, if any (for error messages)."""
        return self._source

    @property
    def source_dir(self) -> Path | None:
        """The folder of the file the scenario was read from, resolved when it was read (None for a
        scenario built in Python): relative trace paths are read from there."""
        if self._source_dir is None and self._source:  # a source set after reading (studies do)
            return Path(self._source).parent
        return self._source_dir

    # -- derived values ------------------------------------------------------------------------

    def host_count(self) -> int:
        return self.topology.host_count()

    def hosts_per_leaf(self) -> int:
        """Hosts on the busiest leaf switch (fragmented placement deals leaf by leaf)."""
        t = self.topology
        return t._size("hosts_per_leaf") if isinstance(t, DragonflyPlus) else t.hosts_per_leaf()

    def host_names(self) -> list[str] | None:
        """Host i's name on an imported fabric (node descriptions); None where hosts are numbered."""
        t = self.topology
        return [e.name for e in t._fabric.endpoints()] if isinstance(t, Ibnetdiscover) else None

    def host_groups(self) -> list[int] | None:
        """Dragonfly+ group of every host (None on other topologies)."""
        t = self.topology
        if not isinstance(t, DragonflyPlus):
            return None
        return [t.group_of_host(h) for h in range(t.host_count())]

    def warnings(self) -> list[str]:
        """Everything a run or check warns about: what an imported fabric's reader read past, QoS
        tables that are almost certainly mistakes, traffic keys that the table's pattern or load
        ignores, and congestion-control settings that change nothing or stop all marking."""
        fabric: list[str] = getattr(self.topology, "reader_warnings", list)()  # an imported fabric's file
        return fabric + self.qos_warnings() + self.traffic_warnings() + self.congestion_control.warnings()

    def traffic_warnings(self) -> list[str]:
        """Keys a [[traffic]] table sets that its pattern or load never reads (a `shift` on a
        uniform pattern, say). Warned rather than refused: a stored study's resolved scenario
        lists every key with its default, which is not warned about."""
        warnings = []
        for i, source in enumerate(self.traffic):
            unread = source.unread_keys()
            if (source.pattern != "shift" and "shift" in source.model_fields_set
                    and self.traffic_shift(i) != self._default_shift(i)):
                unread.insert(0, ("shift", f'pattern = "{source.pattern}"', 'pattern = "shift"'))
            warnings += [f"traffic[{i}].{key}: ignored with {has} (only {reader} reads it)" for key, has, reader in unread]
        return warnings

    def qos_warnings(self) -> list[str]:
        """Configurations OpenSM accepts but that are almost certainly mistakes: traffic on an SL
        whose VL has no weight in either arbitration table of a port type never leaves that port."""
        warnings = self._capacity_warnings() + [unsent.message() for unsent in self.unsent_traffic()]
        return warnings + self.arbitration_warnings()

    def sl_users(self) -> dict[int, list[str]]:
        """{SL: who sends on it}: each [[traffic]] table (traffic[i]) and each job (job 'name'),
        every SL a job's messages can use."""
        users: dict[int, list[str]] = {}
        for i, source in enumerate(self.traffic):
            users.setdefault(source.sl, []).append(f"traffic[{i}]")
        for name, job in zip(self.job_names(), self.jobs, strict=True):
            for sl in job.service_levels():
                users.setdefault(sl, []).append(f"job {name!r}")
        return users

    def unsent_traffic(self, others: dict[int, list[str]] | None = None) -> list[Unsent]:
        """Per port type, each SL that carries traffic but whose VL has no weight in either VLArb
        table as the ports hold it (vlarb.unweighted, the one rule): its packets are never sent.
        `others`: senders outside the scenario, by SL (a fabric's other jobs and services)."""
        users = self.sl_users()
        for sl, who in (others or {}).items():
            users.setdefault(sl, []).extend(who)
        ports: tuple[tuple[Literal["ca", "swe"], str], ...] = (("ca", "qos.ca"), ("swe", "qos.swe"))
        found = []
        for port, key in ports:
            tables = self.port_qos(port)
            for sl, vl in unweighted(tables["sl2vl"], tables["vlarb_high"], tables["vlarb_low"], users).items():
                found.append(Unsent(key, port, sl, vl, tuple(users[sl])))
        return found

    def unsent_on_cluster(self) -> list[Unsent]:
        """`unsent_traffic` with SL 0 in use, as it is on a cluster (vlarb.OUTSIDE_SL0): the tables
        `qoslab export opensm` refuses, and the policies its default choice passes over."""
        return self.unsent_traffic({0: [OUTSIDE_SL0]})

    def _capacity_warnings(self) -> list[str]:
        """VLArb entries beyond what the ports hold (fabric.vlarb_capacity), which they drop."""
        kept = self.vlarb_entries_kept()
        if kept is None:
            return []
        warnings = []
        for key, tables in (("qos", self.qos), ("qos.ca", self.qos.ca), ("qos.swe", self.qos.swe)):
            for name in ("vlarb_high", "vlarb_low"):
                entries = getattr(tables, name)
                if entries is not None and len(entries) > kept:
                    warnings.append(f"{key}.{name}: {len(entries)} entries, but ports hold {kept} "
                                    f"(fabric.vlarb_capacity = {self.fabric.vlarb_capacity}): the rest "
                                    f"({', '.join(f'{vl}:{w}' for vl, w in list(entries)[kept:])}) are dropped, "
                                    "as the hardware drops them, and neither simulated nor exported")
        return warnings

    def arbitration_warnings(self) -> list[str]:
        """Different weights in one VLArb table that the fabric's MTU cannot tell apart (9 and 1
        both send one 4 KiB packet a turn), named by the key that set the table."""
        granularity = Granularity.of(self)
        warnings: list[str] = []
        for port in ("ca", "swe"):
            tables = self.port_qos(port)
            for name in ("vlarb_high", "vlarb_low"):
                if getattr(getattr(self.qos, port), name) is not None:
                    key = f"qos.{port}.{name}"
                elif getattr(self.qos, name) is not None:
                    key = f"qos.{name}"
                else:
                    key = f"qos.{name} (default)"
                for collapse in collapses(tables[name], granularity.credits):
                    message = f"{key}: {collapse.message(name, granularity)}"
                    if message not in warnings:
                        warnings.append(message)
        return warnings

    def vl_arbitration(self) -> dict[str, Any]:
        """What each port type's tables do at the fabric's MTU (qoslab.vlarb.describe_fabric)."""
        return describe_fabric({port: self.port_qos(port) for port in ("ca", "swe")}, self.qos_vls(), Granularity.of(self))

    def qos_vls(self) -> int:
        """VLs QoS can use: fabric.data_vls divided among routing's VL layers."""
        return self.fabric.data_vls // (self.routing.vls or 1)

    def engine_port_qos(self, port: Literal["ca", "swe"]) -> dict[str, Any]:
        """port_qos with every VLArb entry repeated for each routing layer (VL + k * qos_vls),
        same weight: the tables the switches hold (and OpenSM must be given)."""
        tables = dict(self.port_qos(port))
        step, layers = self.qos_vls(), self.routing.vls or 1
        for name in ("vlarb_high", "vlarb_low"):
            tables[name] = [(vl + k * step, w) for vl, w in tables[name] for k in range(layers)]
        return tables

    def port_qos(self, port: Literal["ca", "swe"]) -> dict[str, Any]:
        """QoS tables of one port type, resolved per field: [qos.<port>] -> [qos] -> default."""
        specific = getattr(self.qos, port)
        default = default_port_qos(max(self.qos_vls(), 1))  # 0: too many layers, the engine says so
        resolved = {}
        for field in ("sl2vl", "vlarb_high", "vlarb_low", "high_limit"):
            value = getattr(specific, field)
            if value is None:
                value = getattr(self.qos, field)
            resolved[field] = default[field] if value is None else value
        kept = self.vlarb_entries_kept()
        if kept is not None:
            # What the port programs: its first entries, each routing layer's copy counted.
            for name in ("vlarb_high", "vlarb_low"):
                resolved[name] = list(resolved[name])[:kept]
        return resolved

    def vlarb_entries_kept(self) -> int | None:
        """Entries of each VLArb table as written that a port programs (fabric.vlarb_capacity,
        shared among the routing layers' copies); None: every entry."""
        capacity = self.fabric.vlarb_capacity
        return None if capacity is None else capacity // (self.routing.vls or 1)

    def traffic_shift(self, index: int) -> int:
        """Shift of a shift pattern; default half the destinations (half the hosts for "all")."""
        source = self.traffic[index]
        return self._default_shift(index) if source.shift is None else source.shift % self._destination_count(index)

    def _default_shift(self, index: int) -> int:
        count = self._destination_count(index)
        return count // 2 % count

    def _destination_count(self, index: int) -> int:
        return len(expand_hosts(self.traffic[index].destinations, self.host_count()))

    def resolved(self) -> dict[str, Any]:
        """The scenario with every default filled in, as plain JSON types (provenance). It is itself
        a valid scenario: Scenario.from_dict(s.resolved()) gives the same engine config."""
        data = self.model_dump(mode="json")
        # Exactly one buffer key, the one the buffer comes from: a per-VL override stays one, so
        # a study that changes fabric.data_vls re-divides a port buffer but never an override.
        data["fabric"].pop("vl_buffer_bytes" if self.fabric.vl_buffer_bytes is None else "port_buffer_bytes")
        if not self.routing.flowlet_gap_us:
            # Off is the default: leaving it out keeps the run ids of studies stored before
            # flowlets existed (ids hash the resolved scenario).
            data["routing"].pop("flowlet_gap_us")
        for key in ("interference", "port_counters", "cc_trace"):  # outputs, off by default: the same
            if not getattr(self.run, key):
                data["run"].pop(key)
        if not self.congestion_control.enabled:  # off by default: run ids as before it existed
            data.pop("congestion_control")
        if self.fabric.vlarb_capacity is None:  # the default (whole tables): run ids as before it existed
            data["fabric"].pop("vlarb_capacity")
        data["qos"] = {port: _json_qos(self.port_qos(port)) for port in ("ca", "swe")}
        for i, source in enumerate(data["traffic"]):
            source["shift"] = self.traffic_shift(i)
        for job, name, hosts in zip(data["jobs"], self.job_names(), self.placements()):
            job.update(name=name, nodes=len(hosts), placement="hosts", hosts=hosts)
            job.pop("fragment_nodes", None)
            if job.get("record_iterations", True):  # the default: left out, as run ids were before it
                job.pop("record_iterations", None)
        return data

    def class_names(self) -> list[str]:
        """The engine's statistics classes, in its order: each traffic table, then each job."""
        return [f"traffic[{i}]" for i in range(len(self.traffic))] + self.job_names()

    def job_names(self) -> list[str]:
        return [job.name if job.name is not None else f"job{i}" for i, job in enumerate(self.jobs)]

    def unchanged(self) -> None:
        """Raises ScenarioError if its [[jobs]] or [[traffic]] lists were changed in place after it
        was made (the tables themselves are read-only): their checks and placements are stale."""
        made_jobs, made_traffic = self._made_with
        for key, made, now in (("jobs", made_jobs, self.jobs), ("traffic", made_traffic, self.traffic)):
            if len(made) != len(now) or any(a is not b for a, b in zip(made, now, strict=False)):
                raise ScenarioError([(key, "changed after the scenario was made (its checks and job placements are "
                                           "stale): make a changed copy with with_overrides([...]) instead")],
                                    self._source)

    def placements(self) -> list[list[int]]:
        """The hosts of every job, in rank order (see placement.py); placed once, at validation."""
        return self._placements

    def engine_topology(self) -> TopologyConfig:
        from qoslab.engine_config import engine_topology

        return engine_topology(self)

    def engine_routing(self) -> RoutingConfig:
        from qoslab.engine_config import engine_routing

        return engine_routing(self)

    def tool_fabric(self):
        """The fabric as the InfiniBand tools see it (GUIDs, port numbers from 1, link types):
        what exports write and what routing dumps are matched against."""
        if isinstance(self.topology, Ibnetdiscover):
            return self.topology._fabric
        from qoslab.io.fabric import from_engine
        from qoslab.simulate import cabling

        return from_engine(cabling(self), float(self.fabric.link_gbps))

    def forwarding_tables(self) -> list[list[int] | None]:
        """Per switch (engine order), the 0-based output port towards every host; None for a
        switch whose routing is chosen per packet or per source (random, adaptive, smodk)."""
        from qoslab.simulate import cabling

        return cabling(self, with_routes=True)["routes"]

    def to_engine_config(self) -> EngineConfig:
        """The resolved scenario the engine receives (qoslab.engine_config, its type and only producer)."""
        from qoslab.engine_config import engine_config

        return engine_config(self)

    # -- checks across tables ------------------------------------------------------------------

    def _resolve_routing(self) -> None:
        routing, imported = self.routing, isinstance(self.topology, Ibnetdiscover)
        dragonfly = isinstance(self.topology, DragonflyPlus)
        if routing.algorithm is None:
            routing.__dict__["algorithm"] = "minhop" if imported else "minimal" if dragonfly else "dmodk"
        # Which algorithm suits which topology, enough VL layers, flowlets: the engine's rules
        # (config.rs RoutingConfig::check_fits), reported by _check_with_engine. Here only the
        # default: the VL layers the algorithm needs (2 for non-minimal Dragonfly+ paths).
        topology = self.topology
        many_groups = isinstance(topology, DragonflyPlus) and topology._size("groups") > 2
        if routing.vls is None:
            routing.__dict__["vls"] = 2 if many_groups and routing.algorithm in ("valiant", "adaptive") else 1
        if routing.algorithm == "lft" and routing.lft is None:
            raise problem('expected the path of an ibroute dump (or a folder of them) for algorithm "lft"',
                          "routing.lft")
        if routing.algorithm != "lft" and routing.lft is not None:
            raise problem(f'routing.lft is only read by algorithm "lft", not {show(routing.algorithm)}', "routing.lft")
        if routing.algorithm == "lft":
            from qoslab.io.ibroute import RoutingFileError, read_dumps, routing_table

            assert routing.lft is not None  # refused above when missing
            path = _resolve_path(routing.lft)
            try:
                routing._table = routing_table(self.tool_fabric(), read_dumps(path))
            except RoutingFileError as error:
                raise problem(str(error), "routing.lft") from None
            routing.__dict__["lft"] = str(path.resolve())

    def _resolve_host_names(self) -> None:
        """Host lists given by name become indices (so the resolved scenario, and everything
        after this, sees indices only)."""
        owners: list[tuple[str, Any, str]] = [(f"traffic[{i}].{field}", source, field)
                  for i, source in enumerate(self.traffic) for field in ("hosts", "destinations")]
        owners += [(f"jobs[{i}].hosts", job, "hosts") for i, job in enumerate(self.jobs)]
        fabric_names = None
        for key, owner, field in owners:
            value = getattr(owner, field)
            if has_names(value):
                fabric_names = fabric_names or self.host_names()
                owner.__dict__[field] = resolve_names(value, fabric_names, key)

    @model_validator(mode="after")
    def _check_against_fabric(self) -> Scenario:
        self._resolve_host_names()
        self.run.resolve(with_jobs=bool(self.jobs))
        self.fabric.resolve(with_jobs=bool(self.jobs))
        self.run.check()
        if self.run.cc_trace and not self.congestion_control.enabled:
            raise problem("traces congestion control, which is off: set congestion_control.enabled = true "
                          "(or leave run.cc_trace out)", "run.cc_trace")
        self._resolve_routing()
        if self.vlarb_entries_kept() == 0:
            raise problem(f"{self.fabric.vlarb_capacity} entries cannot hold one entry per routing layer "
                          f"(routing.vls = {self.routing.vls})", "fabric.vlarb_capacity")
        names = self.job_names()
        for i, name in enumerate(names):
            if names.index(name) != i:
                raise problem(f"job name {name!r} is used twice", f"jobs[{i}].name")
        self._made_with = (tuple(self.jobs), tuple(self.traffic))
        if self.jobs:  # placement draws with numpy, which a run without jobs does not import
            from qoslab.placement import PlacementError, place_jobs

            try:
                self._placements = place_jobs(self.jobs, self.host_count(), self.hosts_per_leaf(), self.seed,
                                              self.host_groups())
            except PlacementError as error:
                raise problem(error.message, error.key) from None
        # A VLArb entry as the user wrote it is for a QoS VL; Python repeats it for every routing
        # layer, so only here can it be told from a layer's copy. (SL2VL values, table sizes and
        # routing.vls against fabric.data_vls are the engine's: _check_with_engine.)
        data_vls, qos_vls = self.fabric.data_vls, self.qos_vls()
        exist = f"only VL0..VL{data_vls - 1} exist (fabric.data_vls = {data_vls})"
        if qos_vls < data_vls:
            exist = (f"routing.vls = {self.routing.vls} leaves VL0..VL{qos_vls - 1} for QoS (fabric.data_vls = "
                     f"{data_vls}; the higher VLs are the routing layers' copies, weighted like their QoS VL)")
        for prefix, tables in (("qos", self.qos), ("qos.ca", self.qos.ca), ("qos.swe", self.qos.swe)):
            for name in ("vlarb_high", "vlarb_low"):
                for vl, weight in (getattr(tables, name) or []) if qos_vls else []:
                    if vl >= qos_vls:
                        raise problem(f'entry "{vl}:{weight}" is for VL{vl}, but {exist}', f"{prefix}.{name}")
        self._check_memory()
        count = self.host_count()
        for i, source in enumerate(self.traffic):
            for field in ("hosts", "destinations", "hotspot_hosts"):
                listed = expand_hosts(getattr(source, field), count)
                beyond = [h for h in listed if h >= count]
                if beyond:
                    raise problem(
                        f"host {beyond[0]} does not exist: the topology has {count} hosts (0..{count - 1})",
                        f"traffic[{i}].{field}",
                    )
        self._check_with_engine()
        return self

    def _check_with_engine(self) -> None:
        """The engine's checks of the resolved config (its values and the rules between them),
        reported like any other problem, by the key the user wrote."""
        from qoslab.simulate import check_engine_config

        failure = check_engine_config(self)
        if failure is not None:
            key, message = failure
            raise problem(message, self._written_key(key))

    def _written_key(self, key: str) -> str:
        """The scenario key behind an engine key: the engine sees each port type's QoS tables
        resolved, so `qos.ca.sl2vl` came from `qos.sl2vl` when [qos.ca] did not set it."""
        port, _, field = key.removeprefix("qos.").partition(".")
        written = key.startswith("qos.") and port in ("ca", "swe") and field in ("sl2vl", "vlarb_high", "vlarb_low")
        if written and getattr(getattr(self.qos, port), field) is None and getattr(self.qos, field) is not None:
            return f"qos.{field}"
        return key

    def _queued_packets(self, t: Any) -> int:
        """The most packets a sender of traffic table `t` can hold queued (messages are cut into
        packets when created): its saturate_depth messages' worth, or for an open-loop source its
        max_queued_messages', but never more than arrive during the run."""
        packets = max(1, -(-t.message_bytes // self.fabric.mtu_bytes))
        if t.load == "saturate":
            return int(t.saturate_depth) * packets
        wire_ps = (t.message_bytes + packets * self.fabric.header_bytes) * 8000.0 / self.fabric.link_gbps
        duration_us = self.run.duration_us
        assert duration_us is not None  # resolved by RunConfig before the scenario's checks
        arrivals = duration_us * 1e6 * t.load / wire_ps  # inf for absurd durations, refused later by name
        if not arrivals < t.max_queued_messages:
            return int(t.max_queued_messages) * packets
        return min(int(t.max_queued_messages), math.ceil(arrivals) + 1) * packets

    def estimated_memory_bytes(self) -> int:
        """The run's estimated peak memory (resources.py holds the estimate and says where its
        figures come from): what a study multiplies by the runs it holds at once."""
        return self._memory_need()[0]

    def _check_memory(self) -> None:
        """Refuses a run whose estimated peak memory exceeds what this machine has available."""
        available = available_memory_bytes()
        if available is None:
            return
        need, detail, where = self._memory_need()
        if need > available:
            raise problem(f"this run would need about {describe_bytes(need)} ({detail}), but this machine has "
                          f"{describe_bytes(available)} available; make it smaller", where)

    def _memory_need(self) -> tuple[int, str, str]:
        """The estimate, what it is made of, and the key most of it comes from."""
        ranks = [len(hosts) * job.ranks_per_node for job, hosts in zip(self.jobs, self._placements)]
        # An all-to-all workload posts every message at once: P * (P - 1) of them.
        at_once = sum(r * (r - 1) for r, job in zip(ranks, self.jobs) if job.workload.kind == "all-to-all")
        switches = getattr(self.topology, "switch_count", lambda: 0)()
        # Open-loop and saturating sources: every queued message's packets can wait at once.
        count = self.host_count()
        queued = [len(expand_hosts(t.hosts, count)) * self._queued_packets(t) for t in self.traffic]
        # A job's message is cut into packets when it is sent: each rank has at least one of its
        # messages' packets at once (a flood's `messages` each); 2^39 bytes are 134 M packets.
        job_packets = sum(r * getattr(job.workload, "messages", 1) * -(-getattr(job.workload, "bytes", 0)
                                                                         // self.fabric.mtu_bytes)
                          for r, job in zip(ranks, self.jobs))
        # The HCAs' send queues, for the SLs in use (and a CC flow each with congestion control).
        send_queues = count * len(self.sl_users()) * self.fabric.send_queues_per_sl()
        send_queue_bytes = send_queues * SEND_QUEUE_BYTES * (2 if self.congestion_control.enabled else 1)
        need = estimated_bytes(count + switches, sum(ranks), at_once, sum(queued) + job_packets) + send_queue_bytes
        detail = ", ".join([*([f"{sum(ranks):,} ranks"] if ranks else []),
                            *([f"{send_queues:,} HCA send queues"] if send_queue_bytes > need // 4 else []),
                            *([f"{at_once:,} all-to-all messages posted at once"] if at_once else []),
                            *([f"{job_packets:,} packets of the jobs' messages"] if job_packets else []),
                            *([f"up to {sum(queued):,} packets queued by [[traffic]]"] if sum(queued) else [])])
        largest = max(range(len(queued)), key=queued.__getitem__, default=None)
        if largest is not None and queued[largest] * PACKET_BYTES > need // 2:
            where = f"traffic[{largest}]"
        else:
            where = "jobs" if self.jobs else "topology"
        return need, detail, where


# ----------------------------------------------------------------------------------------------
# helpers


def with_data_vls(data: dict[str, Any], data_vls: int | None) -> dict[str, Any]:
    """Scenario keys with fabric.data_vls set, as a policy's data_vls sets it (None: unchanged)."""
    if data_vls is None:
        return data
    return {**data, "fabric": {**data.get("fabric", {}), "data_vls": data_vls}}


def run_identity(resolved: dict[str, Any]) -> dict[str, Any]:
    """What a study's run id hashes for a resolved scenario: the buffer as the engine gets it,
    per VL. A port buffer and the per-VL override that give the same share run identically, and
    stored runs from before port buffers (their resolved scenarios held vl_buffer_bytes) keep
    their ids wherever the share did not change."""
    fabric = resolved.get("fabric")
    if not isinstance(fabric, dict) or "port_buffer_bytes" not in fabric:
        return resolved
    fabric = dict(fabric)
    port = fabric.pop("port_buffer_bytes")
    fabric["vl_buffer_bytes"] = buffer_per_vl(port, fabric.get("data_vls", Fabric.model_fields["data_vls"].default))
    return {**resolved, "fabric": fabric}


# Where a table's allowed keys are, for "unknown key" hints. Paths as pydantic reports them,
# list indices removed and the topology kind kept; those under [[jobs]] are jobs.py's (TABLES).
_TABLES: dict[tuple[str, ...], type[BaseModel]] = {
    (): Scenario,
    ("fabric",): Fabric,
    ("topology", "single-switch"): SingleSwitch,
    ("topology", "xgft"): Xgft,
    ("topology", "dragonfly-plus"): DragonflyPlus,
    ("topology", "ibnetdiscover"): Ibnetdiscover,
    ("routing",): Routing,
    ("qos",): Qos,
    ("qos", "ca"): PortQos,
    ("qos", "swe"): PortQos,
    ("traffic",): Traffic,
    ("run",): Run,
    ("mpi",): Mpi,
}


def _allowed_keys(parent: tuple[Any, ...]) -> list[str] | None:
    path = tuple(p for p in parent if isinstance(p, str))
    if path[:1] == ("jobs",):  # only reached when there are jobs, so jobs.py is loaded
        from qoslab.jobs import TABLES

        model = TABLES.get(path[1:])
    else:
        model = _TABLES.get(path)
    return list(model.model_fields) if model else None


def _scenario_error(error: ValidationError, source: str | None) -> ScenarioError:
    skip_loc = [("topology", kind) for kind in TOPOLOGY_KINDS]
    if any(e["loc"][:1] == ("jobs",) for e in error.errors()):
        from qoslab.jobs import SKIP_LOC

        skip_loc += SKIP_LOC
    return from_validation_error(error, source, skip_loc=skip_loc, allowed=_allowed_keys)
