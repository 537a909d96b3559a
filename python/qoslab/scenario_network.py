"""The scenario's ``[fabric]``, ``[topology]`` and ``[routing]`` tables: links, switches and the
division of a port's input buffer among its data VLs (``buffer_per_vl``, the only place that rule
lives), the four topology kinds with their size checks (single switch, XGFT, Dragonfly+, a fabric
read from ibnetdiscover output), and the routing algorithm. Which routing suits which topology,
its VL layers against fabric.data_vls and flowlets are the engine's rules (config.rs
RoutingConfig::check_fits), which the Scenario asks it about.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import Field, PrivateAttr, model_validator

from qoslab.errors import problem
from qoslab.scenario_files import _resolve_path, _Table
from qoslab.vlarb import CREDIT_BYTES

MTU_CHOICES = (256, 512, 1024, 2048, 4096)
DATA_VL_CHOICES = (1, 2, 4, 8, 15)
# HCA send queues per SL when the scenario does not say. With jobs, as many as a queue id's byte
# holds: MPI over RC opens a queue pair per peer, and at the seeds' 22 ranks per node 8 queues
# made most of a halo exchange's messages share one (docs/jobs.md, HCAs). Open-loop traffic
# alone keeps 8: one process per host, and the figures the benchmarks and the peer simulators'
# comparisons were measured with.
# The most the engine allows (a message names its queue in a byte: MAX_HCA_SEND_QUEUES_PER_SL).
MAX_HCA_SEND_QUEUES_PER_SL = 256
HCA_SEND_QUEUES_WITH_JOBS = MAX_HCA_SEND_QUEUES_PER_SL
HCA_SEND_QUEUES_OPEN_LOOP = 8


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
    # QPs per SL in each HCA, served round robin packet by packet (the engine's hca.rs assigns them).
    # None until resolved: HCA_SEND_QUEUES_WITH_JOBS or HCA_SEND_QUEUES_OPEN_LOOP.
    hca_send_queues_per_sl: Annotated[int, Field(ge=1, le=MAX_HCA_SEND_QUEUES_PER_SL)] | None = None
    # Entries each VLArb table of a port holds (PortInfo VLArbitrationHighCap/LowCap; 8 on many
    # switches and on ibsim): a port programs the first entries only. None: the whole table.
    vlarb_capacity: Annotated[int, Field(ge=1, le=64)] | None = None

    def packet_credit_bytes(self) -> int:
        """Buffer space one MTU packet occupies: payload + header, rounded up to whole credits."""
        return math.ceil((self.mtu_bytes + self.header_bytes) / CREDIT_BYTES) * CREDIT_BYTES

    def resolve(self, with_jobs: bool) -> None:
        """Fills the defaults that depend on whether there are jobs, without marking them set."""
        if self.hca_send_queues_per_sl is None:
            default = HCA_SEND_QUEUES_WITH_JOBS if with_jobs else HCA_SEND_QUEUES_OPEN_LOOP
            self.__dict__["hca_send_queues_per_sl"] = default

    def send_queues_per_sl(self) -> int:
        """The HCA send queues per SL, which `resolve` has filled once the scenario is valid."""
        assert self.hca_send_queues_per_sl is not None, "resolved at validation"
        return self.hca_send_queues_per_sl

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

    def reader_warnings(self) -> list[str]:
        """What the file's reader noticed and read past (cable ends that disagree on their rate,
        a LID given twice, a port line without a link type), each naming the file and line."""
        return [f"topology.path: {message}" for message in self._warnings]

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

    def ib_ports(self) -> dict[tuple[int, int], int]:
        """Per engine (node, port), the IB port number the dump gives it: what the run's tables
        show an administrator (a switch's port as numbered in the dump, a host's HCA port), where
        the engine numbers a switch's ports from 0 and a host's only port 0."""
        return {engine: ib for engine, (_, ib) in self._fabric.engine_ports().items()}


# Assumed, not published: Marconi100's groups and switch counts (docs/dragonfly.md). 36-port EDR
# switches in the balanced Dragonfly+ building block: leaves with 18 hosts and 18 up-links, one
# to each of 18 spines; spines with 18 leaf ports and 18 global ports. 3 groups of 324 hosts =
# 972, close to the machine's 980 nodes.
DRAGONFLY_PRESETS: dict[str, dict[str, int]] = {
    "marconi100": {"groups": 3, "leaves_per_group": 18, "spines_per_group": 18, "hosts_per_leaf": 18,
                   "global_links_per_spine": 18, "switch_radix": 36},
}
# Two ways to give the global links: a user's key replaces a preset's value of the other.
_GLOBAL_LINKS_KEYS = {"global_links_per_spine": "global_links_per_pair", "global_links_per_pair": "global_links_per_spine"}


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
                if key not in self.model_fields_set and _GLOBAL_LINKS_KEYS.get(key) not in self.model_fields_set:
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
