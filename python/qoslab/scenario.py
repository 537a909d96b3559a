"""The scenario file as pydantic models: validation, every default, and the engine config.

This module is the only place defaults live. The engine receives a fully resolved JSON document
(docs/design/engine-boundary.md) and never sees a default or a shorthand.
"""

from __future__ import annotations

import contextlib
import math
import re
import tomllib
from collections.abc import Iterable
from contextvars import ContextVar
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    model_validator,
)

from qoslab.errors import ScenarioError, from_validation_error, problem, show
from qoslab.host_lists import Hosts, expand_hosts, has_names, resolve_names
from qoslab.host_lists import is_int as _is_int
from qoslab.jobs import SL_POLICY_KINDS, SL_POLICY_MODELS, Collectives, Job, Mpi
from qoslab.placement import PlacementError, place_jobs
from qoslab.resources import available_memory_bytes, describe_bytes, estimated_bytes
from qoslab.vlarb import CREDIT_BYTES, Granularity, collapses, describe_fabric
from qoslab.workloads import ALL_MODELS, WORKLOAD_KINDS

MTU_CHOICES = (256, 512, 1024, 2048, 4096)
DATA_VL_CHOICES = (1, 2, 4, 8, 15)
MAX_DATA_VL = 14  # VL15 is management (OpenSM: "drop" in SL2VL)
MAX_VLARB_ENTRIES = 64
SL_COUNT = 16

# Relative paths in a scenario (fabric files, routing dumps) are read from the scenario file's
# folder; this holds that folder while a file is validated.
_BASE_DIR: ContextVar[Path | None] = ContextVar("qoslab_scenario_dir", default=None)


@contextlib.contextmanager
def _relative_to(source: str | None):
    token = _BASE_DIR.set(Path(source).parent if source else None)
    try:
        yield
    finally:
        _BASE_DIR.reset(token)


def _resolve_path(value: str) -> Path:
    path = Path(value).expanduser()
    base = _BASE_DIR.get()
    return path if path.is_absolute() or base is None else base / path


class _Table(BaseModel):
    # strict: a TOML file has real types; "8" for an integer is a mistake, not a convenience.
    model_config = ConfigDict(extra="forbid", strict=True)


# ----------------------------------------------------------------------------------------------
# [fabric]


# A port's input buffer when the scenario gives none: 2048 credits (128 KiB), the input buffer
# of a 4x port in Mellanox's InfiniBand flit-level model for OMNeT++ (ib_flit_sim, IBInBuf
# totalBufferSize), whose per-VL reservation there (maxStatic, 512 credits) divides it exactly
# among 4 VLs. See docs/design/engine.md, "Input buffers".
DEFAULT_PORT_BUFFER_BYTES = 2048 * CREDIT_BYTES


def buffer_per_vl(port_buffer_bytes: int, data_vls: int) -> int:
    """The division rule, the only place it lives: a port's input buffer split equally among the
    data VLs it operates, each share rounded down to whole credits (a credit is never split)."""
    return port_buffer_bytes // data_vls // CREDIT_BYTES * CREDIT_BYTES


class Fabric(_Table):
    link_gbps: Annotated[float, Field(gt=0, allow_inf_nan=False)] = 100.0
    link_latency_ns: Annotated[float, Field(ge=0, allow_inf_nan=False)] = 20.0
    switch_latency_ns: Annotated[float, Field(ge=0, allow_inf_nan=False)] = 100.0
    mtu_bytes: Literal[256, 512, 1024, 2048, 4096] = 4096
    header_bytes: Annotated[int, Field(ge=0, le=4096)] = 26
    data_vls: Literal[1, 2, 4, 8, 15] = 4
    # Every input port's buffer, divided among its data VLs (buffer_per_vl). None until resolved:
    # DEFAULT_PORT_BUFFER_BYTES unless vl_buffer_bytes is given instead.
    port_buffer_bytes: Annotated[int, Field(gt=0, lt=2**32)] | None = None
    # An explicit buffer per VL instead, whatever the VL count (the model before port buffers).
    vl_buffer_bytes: Annotated[int, Field(gt=0, lt=2**32)] | None = None
    # QPs per SL in each HCA, served round robin packet by packet (message to d joins d mod n).
    hca_send_queues_per_sl: Annotated[int, Field(ge=1, le=64)] = 8

    def packet_credit_bytes(self) -> int:
        """Buffer space one MTU packet occupies: payload + header, rounded up to whole credits."""
        return math.ceil((self.mtu_bytes + self.header_bytes) / CREDIT_BYTES) * CREDIT_BYTES

    def buffer_per_vl(self) -> int:
        """Bytes of input buffer each data VL of a port has: what the engine is given."""
        if self.vl_buffer_bytes is not None:
            return self.vl_buffer_bytes
        assert self.port_buffer_bytes is not None, "resolved at validation"
        return buffer_per_vl(self.port_buffer_bytes, self.data_vls)

    @model_validator(mode="after")
    def _buffer_holds_a_packet(self) -> Fabric:
        if self.port_buffer_bytes is not None and self.vl_buffer_bytes is not None:
            raise problem(
                f"give fabric.port_buffer_bytes (one buffer per port, divided among the data VLs) or "
                f"fabric.vl_buffer_bytes (the same buffer for every VL, whatever their number), not both; "
                f"got {self.port_buffer_bytes} and {self.vl_buffer_bytes}",
                "port_buffer_bytes",
            )
        need = self.packet_credit_bytes()
        packet = (f"one MTU packet: {self.mtu_bytes} + {self.header_bytes} header bytes, rounded up to "
                  f"{CREDIT_BYTES}-byte credits")
        if self.vl_buffer_bytes is not None:
            if self.vl_buffer_bytes < need:
                raise problem(f"expected at least {need} bytes ({packet}), got {self.vl_buffer_bytes}",
                              "vl_buffer_bytes")
            return self
        if self.port_buffer_bytes is None:
            # Filled in without marking it set, so --set fabric.vl_buffer_bytes still works.
            self.__dict__["port_buffer_bytes"] = DEFAULT_PORT_BUFFER_BYTES
        port = self.port_buffer_bytes
        assert port is not None
        if buffer_per_vl(port, self.data_vls) < need:
            raise problem(
                f"expected at least {need * self.data_vls} bytes for {self.data_vls} data VLs "
                f"(fabric.data_vls = {self.data_vls}): each VL's share must hold {packet} ({need} bytes); "
                f"got {port}, which leaves {buffer_per_vl(port, self.data_vls)} bytes per VL",
                "port_buffer_bytes",
            )
        return self


# ----------------------------------------------------------------------------------------------
# [topology]


# One InfiniBand subnet gives every HCA port and every switch a unicast LID (0x0001-0xBFFF);
# qoslab simulates one subnet, so a topology with more nodes is refused before anything is
# built (a typo like m = [1000000000] must be an error, not an attempt to allocate it).
MAX_UNICAST_LIDS = 0xBFFF


def _check_subnet_size(hosts: int, switches: int, key: str) -> None:
    if hosts + switches > MAX_UNICAST_LIDS:
        raise problem(f"{hosts:,} hosts and {switches:,} switches need {hosts + switches:,} LIDs; one InfiniBand "
                      f"subnet has {MAX_UNICAST_LIDS:,} unicast LIDs", key)


class SingleSwitch(_Table):
    kind: Literal["single-switch"]
    hosts: Annotated[int, Field(ge=2)] = 32

    @model_validator(mode="after")
    def _size(self) -> SingleSwitch:
        _check_subnet_size(self.hosts, 1, "hosts")
        return self

    def host_count(self) -> int:
        return self.hosts

    def hosts_per_leaf(self) -> int:
        return self.hosts

    def engine(self) -> dict[str, Any]:
        return {"kind": self.kind, "hosts": self.hosts}


class Xgft(_Table):
    """XGFT(h; m; w): m[l] children per node at level l+1, w[l] parents per node at level l."""

    kind: Literal["xgft"]
    m: Annotated[list[Annotated[int, Field(gt=0)]], Field(min_length=1)]
    w: Annotated[list[Annotated[int, Field(gt=0)]], Field(min_length=1)]

    @model_validator(mode="after")
    def _shape(self) -> Xgft:
        if len(self.w) != len(self.m):
            raise problem(f"expected as many entries as m ({len(self.m)}), got {len(self.w)}", "w")
        if self.w[0] != 1:
            raise problem(
                f"expected 1 (one HCA port per host; multi-port HCAs are not modelled yet), got {self.w[0]}",
                "w[0]",
            )
        _check_subnet_size(self.host_count(), self.switch_count(), "m")
        return self

    def host_count(self) -> int:
        return math.prod(self.m)

    def switch_count(self) -> int:
        """XGFT(h; m; w): level i (1..h) has m[i+1] * ... * m[h] * w[1] * ... * w[i] switches."""
        h = len(self.m)
        return sum(math.prod(self.m[level:]) * math.prod(self.w[:level]) for level in range(1, h + 1))

    def hosts_per_leaf(self) -> int:
        return self.m[0]

    def engine(self) -> dict[str, Any]:
        return {"kind": self.kind, "m": list(self.m), "w": list(self.w)}


class Ibnetdiscover(_Table):
    """A real fabric: `ibnetdiscover` output or an ibsim net file (io/ibnetdiscover.py). Each
    cabled HCA port is a host; link rates come from the file's width x speed."""

    kind: Literal["ibnetdiscover"]
    path: str

    _fabric: Any = PrivateAttr(default=None)
    _warnings: list[str] = PrivateAttr(default_factory=list)

    @model_validator(mode="after")
    def _read(self) -> Ibnetdiscover:
        from qoslab.io.ibnetdiscover import FabricFileError, read_fabric

        path = _resolve_path(self.path)
        try:
            self._fabric, self._warnings = read_fabric(path)
        except FabricFileError as error:
            raise problem(str(error), "path") from None
        if len(self._fabric.endpoints()) < 2:
            raise problem(f"{path}: expected at least 2 cabled HCA ports, found {len(self._fabric.endpoints())}", "path")
        # Absolute from here on: runs in other processes or folders read the same file.
        self.__dict__["path"] = str(path.resolve())
        return self

    def host_count(self) -> int:
        return len(self._fabric.endpoints())

    def hosts_per_leaf(self) -> int:
        counts: dict[int, int] = {}
        peer = {}
        for c in self._fabric.cables:
            peer[c.a], peer[c.b] = c.b, c.a
        for e in self._fabric.endpoints():
            switch = peer[(e.node, e.port)][0]
            counts[switch] = counts.get(switch, 0) + 1
        return max(counts.values())

    def engine(self, link_gbps: float = 100.0) -> dict[str, Any]:
        return self._fabric.engine_topology(link_gbps)


# Assumed, not published: Marconi100's groups and switch counts (docs/dragonfly.md). 36-port EDR
# switches in the balanced Dragonfly+ building block: leaves with 18 hosts and 18 up-links, one
# to each of 18 spines; spines with 18 leaf ports and 18 global ports. 3 groups of 324 hosts =
# 972, close to the machine's 980 nodes.
DRAGONFLY_PRESETS: dict[str, dict[str, int]] = {
    "marconi100": {"groups": 3, "leaves_per_group": 18, "spines_per_group": 18, "hosts_per_leaf": 18,
                   "global_links_per_spine": 18, "switch_radix": 36},
}


class DragonflyPlus(_Table):
    """Groups of two-level leaf/spine fat trees; every spine has global links to spines of other
    groups, the same number to every other group (docs/dragonfly.md)."""

    kind: Literal["dragonfly-plus"]
    preset: Literal["marconi100"] | None = None
    groups: Annotated[int, Field(ge=2, le=4096)] | None = None
    leaves_per_group: Annotated[int, Field(ge=1, le=4096)] | None = None
    spines_per_group: Annotated[int, Field(ge=1, le=4096)] | None = None
    hosts_per_leaf: Annotated[int, Field(ge=1, le=4096)] | None = None
    global_links_per_spine: Annotated[int, Field(ge=1, le=4096)] | None = None
    global_links_per_pair: Annotated[int, Field(ge=1)] | None = None
    switch_radix: Annotated[int, Field(ge=2, le=1024)] = 36

    @model_validator(mode="after")
    def _shape(self) -> DragonflyPlus:
        if self.preset is not None:
            for key, value in DRAGONFLY_PRESETS[self.preset].items():
                if key not in self.model_fields_set:
                    self.__dict__[key] = value
        for key in ("groups", "leaves_per_group", "spines_per_group", "hosts_per_leaf"):
            if getattr(self, key) is None:
                raise problem('expected a number (or preset = "marconi100")', key)
        g, s = self._size("groups"), self._size("spines_per_group")
        leaves, hosts = self._size("leaves_per_group"), self._size("hosts_per_leaf")
        per_spine, per_pair = self.global_links_per_spine, self.global_links_per_pair
        if per_spine is None:
            if per_pair is None:
                raise problem("expected global_links_per_spine or global_links_per_pair", "global_links_per_spine")
            if (per_pair * (g - 1)) % s:
                raise problem(f"{per_pair} links to each of the {g - 1} other groups ({per_pair * (g - 1)} per group) "
                              f"do not split evenly over {s} spines", "global_links_per_pair")
            per_spine = per_pair * (g - 1) // s
            self.__dict__["global_links_per_spine"] = per_spine
        slots = s * per_spine
        if slots % (g - 1):
            raise problem(f"{s} spines x {per_spine} global links = {slots} per group do not split evenly over the "
                          f"{g - 1} other groups (all-to-all needs a multiple of {g - 1})", "global_links_per_spine")
        if per_pair is not None and per_pair != slots // (g - 1):
            raise problem(f"{s} spines x {per_spine} global links give {slots // (g - 1)} links per group pair, "
                          f"not {per_pair}", "global_links_per_pair")
        self.__dict__["global_links_per_pair"] = slots // (g - 1)
        radix = self.switch_radix
        leaf_ports = hosts + s
        if leaf_ports > radix:
            raise problem(f"a leaf needs {hosts} host ports + {s} spine ports = {leaf_ports}, more than "
                          f"switch_radix = {radix}", "hosts_per_leaf")
        spine_ports = leaves + per_spine
        if spine_ports > radix:
            raise problem(f"a spine needs {leaves} leaf ports + {per_spine} global ports = "
                          f"{spine_ports}, more than switch_radix = {radix}", "global_links_per_spine")
        _check_subnet_size(self.host_count(), g * (leaves + s), "groups")
        return self

    def _size(self, key: str) -> int:
        """A size key, which `_shape` has filled (from the preset or the keys) once the model is valid."""
        value = getattr(self, key)
        assert isinstance(value, int), key
        return value

    def host_count(self) -> int:
        return self._size("groups") * self.hosts_per_group()

    def hosts_per_group(self) -> int:
        return self._size("leaves_per_group") * self._size("hosts_per_leaf")

    def group_of_host(self, host: int) -> int:
        return host // self.hosts_per_group()

    def engine(self) -> dict[str, Any]:
        return {"kind": self.kind, "groups": self.groups, "leaves_per_group": self.leaves_per_group,
                "spines_per_group": self.spines_per_group, "hosts_per_leaf": self.hosts_per_leaf,
                "global_links_per_spine": self.global_links_per_spine}


Topology = Annotated[SingleSwitch | Xgft | Ibnetdiscover | DragonflyPlus, Field(discriminator="kind")]
TOPOLOGY_KINDS = ("single-switch", "xgft", "dragonfly-plus", "ibnetdiscover")


# ----------------------------------------------------------------------------------------------
# [routing]


FAT_TREE_ROUTING = ("dmodk", "smodk", "random", "adaptive")
DRAGONFLY_ROUTING = ("minimal", "valiant")


class Routing(_Table):
    # None: "dmodk" on fat trees, "minimal" on a Dragonfly+, "minhop" on an imported fabric
    # (resolved by the Scenario).
    algorithm: Literal["dmodk", "smodk", "random", "adaptive", "minhop", "lft", "minimal", "valiant"] | None = None
    lft: str | None = None  # "lft": an ibroute dump, or a folder of them (one per switch)
    # VL layers routing consumes for deadlock freedom; QoS gets fabric.data_vls // vls VLs.
    # None: what the algorithm needs (2 for valiant/adaptive on a Dragonfly+, else 1).
    vls: Annotated[int, Field(ge=1, le=15)] | None = None
    # Dragonfly+ adaptive: a flow (source, destination) keeps its last decision's path while its
    # packets come less than this apart (flowlet switching); 0: every packet decides.
    flowlet_gap_us: Annotated[float, Field(ge=0, allow_inf_nan=False)] = 0.0

    _table: list[int] | None = PrivateAttr(default=None)

    def layers(self) -> int:
        """`vls`, which the scenario's routing check fills when it is not given."""
        assert self.vls is not None
        return self.vls


# ----------------------------------------------------------------------------------------------
# [qos]: OpenSM vocabulary (weights in 64-byte units, high_limit in 4 KiB units)


def _parse_sl2vl(value: Any) -> list[int]:
    """16 VLs, SL0..SL15: a list, or OpenSM's "0,1,2,..." string."""
    if isinstance(value, str):
        parts = [p.strip() for p in value.split(",")]
        if not all(p.isdigit() for p in parts):
            raise problem(f'expected 16 comma-separated VL numbers like "0,1,2,3,...", got {show(value)}')
        value = [int(p) for p in parts]
    if not isinstance(value, (list, tuple)):
        raise problem(f"expected a list of 16 VLs (one per SL), got {show(value)}")
    if len(value) != SL_COUNT:
        raise problem(f"expected {SL_COUNT} entries (SL0..SL15), got {len(value)}")
    for sl, vl in enumerate(value):
        if not _is_int(vl):
            raise problem(f"SL{sl}: expected an integer VL, got {show(vl)}")
        if not 0 <= vl <= MAX_DATA_VL:
            raise problem(f"SL{sl} -> VL{vl}: expected a data VL 0..{MAX_DATA_VL} (VL15 'drop' is not modelled)")
    return list(value)


_VLARB_ENTRY = re.compile(r"^\s*(\d+)\s*:\s*(\d+)\s*$")


def _vlarb_entry(vl: int, weight: int, shown: str) -> tuple[int, int]:
    if not 0 <= vl <= MAX_DATA_VL:
        raise problem(f"bad entry {shown}: VL {vl} is out of range, expected 0..{MAX_DATA_VL}")
    if not 0 <= weight <= 255:
        raise problem(f"bad entry {shown}: weight {weight} is out of range, expected 0..255 (64-byte units)")
    return (vl, weight)


def _parse_vlarb(value: Any) -> list[tuple[int, int]]:
    """OpenSM's "VL:WEIGHT,VL:WEIGHT" string, or a list of [vl, weight] pairs."""
    entries: list[tuple[int, int]] = []
    if isinstance(value, str):
        if value.strip():
            for text in value.split(","):
                match = _VLARB_ENTRY.match(text)
                if not match:
                    raise problem(f'bad entry {show(text.strip())}: expected VL:WEIGHT, as in "0:64,1:128"')
                entries.append(_vlarb_entry(int(match[1]), int(match[2]), show(text.strip())))
    elif isinstance(value, (list, tuple)):
        for item in value:
            if not (isinstance(item, (list, tuple)) and len(item) == 2 and all(_is_int(x) for x in item)):
                raise problem(f"bad entry {show(item)}: expected a [vl, weight] pair of integers")
            entries.append(_vlarb_entry(item[0], item[1], show(list(item))))
    else:
        raise problem(f'expected "VL:WEIGHT,..." or a list of [vl, weight] pairs, got {show(value)}')
    if len(entries) > MAX_VLARB_ENTRIES:
        raise problem(f"expected at most {MAX_VLARB_ENTRIES} entries, got {len(entries)}")
    return entries


Sl2Vl = Annotated[list[int], BeforeValidator(_parse_sl2vl)]
VlArb = Annotated[list[tuple[int, int]], BeforeValidator(_parse_vlarb)]
HighLimit = Annotated[int, Field(ge=0, le=255)]


class PortQos(_Table):
    """QoS tables for one port type; unset fields fall back to the generic [qos] value, then the default."""

    sl2vl: Sl2Vl | None = None
    vlarb_high: VlArb | None = None
    vlarb_low: VlArb | None = None
    high_limit: HighLimit | None = None


class Sl2VlPair(_Table):
    """One switch's SL2VL table for a single (input port, output port) pair, as the hardware holds
    them (SLtoVLMappingTable with attribute modifier in_port << 8 | out_port). Ports are 0-based."""

    switch: Annotated[int, Field(ge=0)]
    in_port: Annotated[int, Field(ge=0)]
    out_port: Annotated[int, Field(ge=0)]
    sl2vl: Sl2Vl


class Qos(PortQos):
    ca: PortQos = Field(default_factory=PortQos)  # HCA ports (OpenSM qos_ca_*)
    swe: PortQos = Field(default_factory=PortQos)  # external switch ports (OpenSM qos_swe_*)
    sl2vl_pairs: list[Sl2VlPair] = Field(default_factory=list)  # per (input, output) switch overrides


def default_port_qos(data_vls: int) -> dict[str, Any]:
    """SL s -> VL (s mod data_vls); every data VL weight 255 in the low table; no high table."""
    return {
        "sl2vl": [sl % data_vls for sl in range(SL_COUNT)],
        "vlarb_high": [],
        "vlarb_low": [(vl, 255) for vl in range(data_vls)],
        "high_limit": 0,
    }


# ----------------------------------------------------------------------------------------------
# [[traffic]]

def _parse_load(value: Any) -> float | str:
    if value == "saturate":
        return value
    if (_is_int(value) or isinstance(value, float)) and 0 < value <= 1:
        return float(value)
    raise problem(f'expected a fraction in (0, 1] of link_gbps or "saturate", got {show(value)}')


Load = Annotated[float | Literal["saturate"], BeforeValidator(_parse_load)]


class Traffic(_Table):
    pattern: Literal["uniform", "permutation", "shift", "hotspot", "incast"] = "uniform"
    hosts: Hosts = "all"
    destinations: Hosts = "all"
    load: Load  # no default: a source without a rate is an oversight
    message_bytes: Annotated[int, Field(ge=1, lt=2**64)] = 4096
    sl: Annotated[int, Field(ge=0, le=15)] = 0
    arrival: Literal["poisson", "periodic"] = "poisson"
    shift: int | None = None  # None: half the number of destinations
    hotspot_hosts: list[Annotated[int, Field(ge=0)]] = Field(default_factory=lambda: [0])
    hotspot_fraction: Annotated[float, Field(ge=0, le=1)] = 0.5
    saturate_depth: Annotated[int, Field(ge=1, lt=2**32)] = 2
    max_queued_messages: Annotated[int, Field(ge=1, lt=2**32)] = 64


# ----------------------------------------------------------------------------------------------
# [run]


# Without jobs the run lasts duration_us; with jobs it ends when every job has completed once,
# and duration_us is only the limit (1 simulated second unless given).
OPEN_LOOP_DURATION_US = 500.0
OPEN_LOOP_WARMUP_US = 50.0
JOBS_TIME_LIMIT_US = 1_000_000.0


class Run(_Table):
    # None: resolved by the Scenario, which knows whether there are jobs (see above).
    duration_us: Annotated[float, Field(gt=0, allow_inf_nan=False)] | None = None
    warmup_us: Annotated[float, Field(ge=0, allow_inf_nan=False)] | None = None
    messages: bool = False  # write messages.parquet (one row per message)
    interference: bool = False  # charge waits at output ports to who caused them (interference.parquet)
    port_counters: bool = False  # perfquery's counters per port (port_counters.parquet and .txt)

    def resolve(self, with_jobs: bool) -> None:
        """Fills the defaults that depend on whether there are jobs, without marking them set."""
        if self.duration_us is None:
            self.__dict__["duration_us"] = JOBS_TIME_LIMIT_US if with_jobs else OPEN_LOOP_DURATION_US
        if self.warmup_us is None:
            self.__dict__["warmup_us"] = 0.0 if with_jobs else OPEN_LOOP_WARMUP_US

    def resolved(self) -> tuple[float, float]:
        """(duration_us, warmup_us), which `resolve` has filled once the scenario is valid."""
        assert self.duration_us is not None and self.warmup_us is not None
        return self.duration_us, self.warmup_us

    def check(self) -> None:
        duration_us, warmup_us = self.resolved()
        if warmup_us >= duration_us:
            # Say which side is a default: a user who set only duration_us never wrote warmup_us.
            warmup = f"{self.warmup_us:g}" + ("" if "warmup_us" in self.model_fields_set else
                                             " (the default for open-loop traffic; set run.warmup_us)")
            duration = f"{self.duration_us:g}" + ("" if "duration_us" in self.model_fields_set else ", the default")
            raise problem(f"expected less than run.duration_us ({duration}), got {warmup}", "run.warmup_us")


# ----------------------------------------------------------------------------------------------
# The scenario


class Scenario(_Table):
    name: str | None = None
    seed: Annotated[int, Field(ge=0, lt=2**64)] = 1
    fabric: Fabric = Field(default_factory=Fabric)
    topology: Topology = Field(default_factory=lambda: SingleSwitch(kind="single-switch"))
    routing: Routing = Field(default_factory=Routing)
    qos: Qos = Field(default_factory=Qos)
    traffic: list[Traffic] = Field(default_factory=list)
    jobs: list[Job] = Field(default_factory=list)
    mpi: Mpi = Field(default_factory=Mpi)
    run: Run = Field(default_factory=Run)

    _source: str | None = PrivateAttr(default=None)
    _placements: list[list[int]] = PrivateAttr(default_factory=list)

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
        try:
            # Through __init__, not model_validate: pydantic routes validation of a model with a
            # custom __init__ through it anyway, and would wrap our ScenarioError in its own.
            with _relative_to(source):
                scenario = cls(**data)
        except ScenarioError as error:
            raise error.with_source(source) from None
        scenario._source = source
        return scenario

    @classmethod
    def from_toml(cls, path: str | Path) -> Scenario:
        return cls.from_dict(read_toml(path), str(path))

    def with_overrides(self, items: Iterable[str]) -> Scenario:
        """A copy with ``KEY=VALUE`` items applied (``fabric.data_vls=8``, ``traffic[0].load=0.3``);
        the value is read as a TOML value, or else taken as a string."""
        items = list(items)
        data = self.given()
        keys = []
        for item in items:
            key, sep, raw = item.partition("=")
            key = key.strip()
            if not sep or not key:
                raise ScenarioError([("--set", f"expected KEY=VALUE, got {show(item)}")], self._source)
            _assign(data, key, _parse_value(raw.strip()), self._source)
            keys.append(key)
        try:
            return Scenario.from_dict(data, self._source)
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

    def qos_warnings(self) -> list[str]:
        """Configurations OpenSM accepts but that are almost certainly mistakes: traffic on an SL
        whose VL has no weight in either arbitration table of a port type never leaves that port."""
        warnings = []
        used_sls = sorted({t.sl for t in self.traffic} | {sl for j in self.jobs for sl in j.service_levels()})
        ports: tuple[tuple[Literal["ca", "swe"], str], ...] = (("ca", "qos.ca"), ("swe", "qos.swe"))
        for port, key in ports:
            tables = self.port_qos(port)
            weighted = {vl for vl, w in list(tables["vlarb_high"]) + list(tables["vlarb_low"]) if w > 0}
            for sl in used_sls:
                vl = tables["sl2vl"][sl]
                if vl not in weighted:
                    warnings.append(f"{key}: traffic on SL{sl} maps to VL{vl}, which has no weight in "
                                    f"vlarb_high or vlarb_low: it will never be sent from {port} ports")
        return warnings + self.arbitration_warnings()

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
        default = default_port_qos(self.qos_vls())
        resolved = {}
        for field in ("sl2vl", "vlarb_high", "vlarb_low", "high_limit"):
            value = getattr(specific, field)
            if value is None:
                value = getattr(self.qos, field)
            resolved[field] = default[field] if value is None else value
        return resolved

    def traffic_shift(self, index: int) -> int:
        """Shift of a shift pattern; default half the destinations (half the hosts for "all")."""
        source = self.traffic[index]
        count = len(expand_hosts(source.destinations, self.host_count()))
        shift = count // 2 if source.shift is None else source.shift
        return shift % count

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
        for key in ("interference", "port_counters"):  # outputs, off by default: the same
            if not getattr(self.run, key):
                data["run"].pop(key)
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

    def placements(self) -> list[list[int]]:
        """The hosts of every job, in rank order (see placement.py); placed once, at validation."""
        return self._placements

    def engine_topology(self) -> dict[str, Any]:
        if isinstance(self.topology, Ibnetdiscover):
            return self.topology.engine(float(self.fabric.link_gbps))
        return self.topology.engine()

    def engine_routing(self) -> dict[str, Any]:
        if self.routing.algorithm == "lft":
            return {"algorithm": "lft", "lft": self.routing._table, "vls": self.routing.vls}
        routing: dict[str, Any] = {"algorithm": self.routing.algorithm, "vls": self.routing.vls}
        if self.routing.flowlet_gap_us:
            routing["flowlet_gap_us"] = float(self.routing.flowlet_gap_us)
        return routing

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

    def to_engine_config(self) -> dict[str, Any]:
        """The engine config of docs/design/engine-boundary.md: every key present, no shorthand."""
        hosts = self.host_count()
        f = self.fabric
        return {
            "seed": self.seed,
            "fabric": {
                "link_gbps": float(f.link_gbps),
                "link_latency_ns": float(f.link_latency_ns),
                "switch_latency_ns": float(f.switch_latency_ns),
                "mtu_bytes": f.mtu_bytes,
                "header_bytes": f.header_bytes,
                "data_vls": f.data_vls,
                "vl_buffer_bytes": f.buffer_per_vl(),  # the engine takes the divided share
                "hca_send_queues_per_sl": f.hca_send_queues_per_sl,
            },
            "topology": self.engine_topology(),
            "routing": self.engine_routing(),
            "qos": {
                **{port: _json_qos(self.engine_port_qos(port)) for port in ("ca", "swe")},
                "sl2vl_pairs": [
                    {"switch": p.switch, "in_port": p.in_port, "out_port": p.out_port, "sl2vl": list(p.sl2vl)}
                    for p in self.qos.sl2vl_pairs
                ],
            },
            "traffic": [
                {
                    "pattern": t.pattern,
                    "hosts": expand_hosts(t.hosts, hosts),
                    "destinations": expand_hosts(t.destinations, hosts),
                    "load": None if t.load == "saturate" else float(t.load),
                    "message_bytes": t.message_bytes,
                    "sl": t.sl,
                    "arrival": t.arrival,
                    "shift": self.traffic_shift(i),
                    "hotspot_hosts": list(t.hotspot_hosts),
                    "hotspot_fraction": float(t.hotspot_fraction),
                    "saturate_depth": t.saturate_depth,
                    "max_queued_messages": t.max_queued_messages,
                }
                for i, t in enumerate(self.traffic)
            ],
            "run": {
                "duration_us": float(self.run.resolved()[0]),
                "warmup_us": float(self.run.resolved()[1]),
                "messages": self.run.messages,
                **({"interference": True} if self.run.interference else {}),
                **({"port_counters": True} if self.run.port_counters else {}),
            },
            "jobs": [
                {
                    "name": name,
                    "hosts": hosts,
                    "ranks_per_node": job.ranks_per_node,
                    "sl": job.sl,
                    "restart": job.restart,
                    "workload": job.workload.engine(),
                    "collectives": {"allreduce": job.collectives.allreduce, "alltoall": job.collectives.alltoall},
                    "sl_policy": job.sl_policy.engine(),
                    "record_iterations": job.record_iterations,
                }
                for job, name, hosts in zip(self.jobs, self.job_names(), self.placements())
            ],
            "mpi": self.mpi.engine(),
        }

    # -- checks across tables ------------------------------------------------------------------

    def _resolve_routing(self) -> None:
        routing, imported = self.routing, isinstance(self.topology, Ibnetdiscover)
        dragonfly = isinstance(self.topology, DragonflyPlus)
        if routing.algorithm is None:
            routing.__dict__["algorithm"] = "minhop" if imported else "minimal" if dragonfly else "dmodk"
        if imported and routing.algorithm in FAT_TREE_ROUTING + DRAGONFLY_ROUTING:
            raise problem(f"{show(routing.algorithm)} routing needs a fat tree or a Dragonfly+; route an "
                          'imported fabric with "minhop" or "lft"', "routing.algorithm")
        if dragonfly and routing.algorithm in ("dmodk", "smodk", "random"):
            raise problem(f"{show(routing.algorithm)} routing needs a fat tree; route a Dragonfly+ with "
                          '"minimal", "valiant", "adaptive", "minhop" or "lft"', "routing.algorithm")
        if not dragonfly and routing.algorithm in ("minimal", "valiant"):
            raise problem(f"{show(routing.algorithm)} routing needs a dragonfly-plus topology", "routing.algorithm")
        # Non-minimal Dragonfly+ paths need a second VL layer to stay deadlock-free.
        topology = self.topology
        many_groups = isinstance(topology, DragonflyPlus) and topology._size("groups") > 2
        needed = 2 if many_groups and routing.algorithm in ("valiant", "adaptive") else 1
        vls = routing.vls
        if vls is None:
            vls = needed
            routing.__dict__["vls"] = vls
        elif vls < needed:
            raise problem(f"{routing.algorithm} routing needs {needed} VL layers to be deadlock-free (its "
                          f"non-minimal paths turn down and up in the intermediate group), got {vls}",
                          "routing.vls")
        data_vls = self.fabric.data_vls
        if vls > data_vls:
            raise problem(f"routing needs {vls} VL layers but fabric.data_vls = {data_vls}: set "
                          f"fabric.data_vls to at least {vls}", "routing.vls")
        if routing.flowlet_gap_us > 0 and not (dragonfly and routing.algorithm == "adaptive"):
            raise problem(f"flowlets apply to adaptive routing on a Dragonfly+ (routing.algorithm is "
                          f"{show(routing.algorithm)} on {self.topology.kind}); remove the key or set it to 0",
                          "routing.flowlet_gap_us")
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
        self.run.check()
        self._resolve_routing()
        names = self.job_names()
        for i, name in enumerate(names):
            if names.index(name) != i:
                raise problem(f"job name {name!r} is used twice", f"jobs[{i}].name")
        try:
            self._placements = place_jobs(self.jobs, self.host_count(), self.hosts_per_leaf(), self.seed,
                                          self.host_groups())
        except PlacementError as error:
            raise problem(error.message, error.key) from None
        data_vls, qos_vls = self.fabric.data_vls, self.qos_vls()
        exist = f"only VL0..VL{data_vls - 1} exist (fabric.data_vls = {data_vls})"
        if qos_vls < data_vls:
            exist = (f"routing.vls = {self.routing.vls} leaves VL0..VL{qos_vls - 1} for QoS (fabric.data_vls = "
                     f"{data_vls}; the higher VLs are the routing layers' copies, weighted like their QoS VL)")
        for prefix, tables in (("qos", self.qos), ("qos.ca", self.qos.ca), ("qos.swe", self.qos.swe)):
            if tables.sl2vl is not None:
                for sl, vl in enumerate(tables.sl2vl):
                    if vl >= qos_vls:
                        raise problem(f"SL{sl} maps to VL{vl}, but {exist}", f"{prefix}.sl2vl")
            for name in ("vlarb_high", "vlarb_low"):
                entries = getattr(tables, name) or []
                for vl, weight in entries:
                    if vl >= qos_vls:
                        raise problem(f'entry "{vl}:{weight}" is for VL{vl}, but {exist}', f"{prefix}.{name}")
                layers = self.routing.layers()
                if len(entries) * layers > MAX_VLARB_ENTRIES:
                    raise problem(f"{len(entries)} entries, one per routing layer ({layers}) each, exceed "
                                  f"the {MAX_VLARB_ENTRIES} a VLArb table holds", f"{prefix}.{name}")
        for i, pair in enumerate(self.qos.sl2vl_pairs):
            for sl, vl in enumerate(pair.sl2vl):
                if vl >= qos_vls:
                    raise problem(f"SL{sl} maps to VL{vl}, but {exist}", f"qos.sl2vl_pairs[{i}].sl2vl")
        self._check_memory()
        for i, (job, hosts) in enumerate(zip(self.jobs, self._placements)):
            size = len(hosts) * job.ranks_per_node
            ranks = getattr(job.sl_policy, "ranks", [])
            beyond = [r for r in ranks if r >= size]
            if beyond:
                raise problem(f"rank {beyond[0]} is not in the job: it has {size} ranks (0..{size - 1})",
                              f"jobs[{i}].sl_policy.ranks")
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
        return self


    def _check_memory(self) -> None:
        """Refuses a run whose estimated peak memory exceeds what this machine has available
        (resources.py holds the estimate and says where its figures come from)."""
        available = available_memory_bytes()
        if available is None:
            return
        ranks = [len(hosts) * job.ranks_per_node for job, hosts in zip(self.jobs, self._placements)]
        # An all-to-all workload posts every message at once: P * (P - 1) of them.
        at_once = sum(r * (r - 1) for r, job in zip(ranks, self.jobs) if job.workload.kind == "all-to-all")
        switches = getattr(self.topology, "switch_count", lambda: 0)()
        need = estimated_bytes(self.host_count() + switches, sum(ranks), at_once)
        if need > available:
            detail = f"{sum(ranks):,} ranks" + (f", {at_once:,} all-to-all messages posted at once" if at_once else "")
            raise problem(f"this run would need about {describe_bytes(need)} ({detail}), but this machine has "
                          f"{describe_bytes(available)} available; make it smaller", "jobs" if self.jobs else "topology")


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


def read_toml(path: str | Path) -> dict[str, Any]:
    """Reads a TOML file; every failure is a ScenarioError naming the file (and line)."""
    source = str(path)
    try:
        text = Path(path).read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise ScenarioError([("", "file not found")], source) from None
    except IsADirectoryError:
        raise ScenarioError([("", "is a directory, expected a TOML file")], source) from None
    except UnicodeDecodeError:
        raise ScenarioError([("", "not a text file (expected UTF-8 TOML)")], source) from None
    except OSError as error:
        raise ScenarioError([("", f"cannot read: {error.strerror or error}")], source) from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        message = str(error)
        match = re.match(r"^(.*) \(at line (\d+), column (\d+)\)$", message)
        if match:
            where = f"line {match[2]}, column {match[3]}"
            raise ScenarioError([(where, f"TOML syntax error: {match[1]}")], source) from None
        raise ScenarioError([("", f"TOML syntax error: {message}")], source) from None


def _json_qos(tables: dict[str, Any]) -> dict[str, Any]:
    return {
        "sl2vl": list(tables["sl2vl"]),
        "vlarb_high": [[vl, w] for vl, w in tables["vlarb_high"]],
        "vlarb_low": [[vl, w] for vl, w in tables["vlarb_low"]],
        "high_limit": tables["high_limit"],
    }


# Where a table's allowed keys are, for "unknown key" hints. Paths as pydantic reports them,
# list indices removed and the topology kind kept.
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
    ("jobs",): Job,
    ("jobs", "collectives"): Collectives,
    **{("jobs", "sl_policy", get_args(model.model_fields["kind"].annotation)[0]): model for model in SL_POLICY_MODELS},
    ("mpi",): Mpi,
    **{("jobs", "workload", get_args(model.model_fields["kind"].annotation)[0]): model for model in ALL_MODELS},
}


def _allowed_keys(parent: tuple[Any, ...]) -> list[str] | None:
    model = _TABLES.get(tuple(p for p in parent if isinstance(p, str)))
    return list(model.model_fields) if model else None


def _scenario_error(error: ValidationError, source: str | None) -> ScenarioError:
    return from_validation_error(
        error,
        source,
        skip_loc=[("topology", kind) for kind in TOPOLOGY_KINDS] + [("workload", kind) for kind in WORKLOAD_KINDS]
        + [("sl_policy", kind) for kind in SL_POLICY_KINDS],
        allowed=_allowed_keys,
    )


def _parse_value(raw: str) -> Any:
    try:
        return tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        return raw


_KEY_PART = re.compile(r"^([A-Za-z_][A-Za-z0-9_-]*|\d+)((?:\[\d+\])*)$")


def _key_steps(key: str) -> list[str | int] | None:
    """"traffic[0].load" (or "traffic.0.load") -> ["traffic", 0, "load"]; None if malformed."""
    steps: list[str | int] = []
    for part in key.split("."):
        match = _KEY_PART.match(part.strip())
        if not match:
            return None
        name = match[1]
        steps.append(int(name) if name.isdigit() else name)
        steps.extend(int(i) for i in re.findall(r"\[(\d+)\]", match[2]))
    return steps


def _assign(data: dict[str, Any], key: str, value: Any, source: str | None) -> None:
    """Sets data[key path] = value, creating tables on the way; lists must already hold the index."""
    steps = _key_steps(key)

    def fail(message: str) -> ScenarioError:
        return ScenarioError([(f"--set {key}", message)], source)

    if not steps or isinstance(steps[0], int):
        raise fail('expected a key path like "fabric.data_vls" or "traffic[0].load"')
    node: Any = data
    for depth, step in enumerate(steps):
        last = depth == len(steps) - 1
        if isinstance(step, int):
            if not isinstance(node, list):
                raise fail(f"{_path(steps[:depth])} is not a list")
            if step >= len(node):
                raise fail(f"{_path(steps[:depth])} has {len(node)} entries, no index {step}")
        elif not isinstance(node, dict):
            raise fail(f"{_path(steps[:depth])} is a value, not a table")
        if last:
            node[step] = value
        else:
            if isinstance(node, dict) and step not in node:
                node[step] = [] if isinstance(steps[depth + 1], int) else {}
            node = node[step]


def _path(steps: list[str | int]) -> str:
    out = ""
    for step in steps:
        out += f"[{step}]" if isinstance(step, int) else (f".{step}" if out else step)
    return out


def _same_key(problem_key: str, overridden: list[str]) -> bool:
    normal = _path(_key_steps(problem_key) or [])
    return any(normal == _path(_key_steps(k) or []) for k in overridden)
