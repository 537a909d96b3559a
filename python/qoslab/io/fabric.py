"""A fabric as the InfiniBand tools see it: nodes with GUIDs and descriptions, numbered ports,
cables with width and speed. Imported fabrics (ibnetdiscover, ibsim) and generated ones (a qoslab
topology, through the engine's cabling) meet here, and the exporters write it back out."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal

# Data rate per lane in Gb/s after line coding (formats.md section 2): what a 1x link carries.
LANE_GBPS = {
    "SDR": 2.0,
    "DDR": 4.0,
    "QDR": 8.0,
    "FDR10": 10.0,
    "FDR": 14.0625 * 64 / 66,
    "EDR": 25.78125 * 64 / 66,
    "HDR": 50.0,
    "NDR": 100.0,
    "XDR": 200.0,
}
WIDTH_LANES = {"1x": 1, "2x": 2, "4x": 4, "8x": 8, "12x": 12}
# ibsim net-file codes (PortInfo encodings): w= LinkWidth bit, s= LinkSpeed bit, e= extended speed.
IBSIM_WIDTH = {"1x": 1, "4x": 2, "8x": 4, "12x": 8, "2x": 16}
IBSIM_SPEED = {"SDR": (1, 0), "DDR": (2, 0), "QDR": (4, 0), "FDR": (4, 1), "EDR": (4, 2), "HDR": (4, 4), "NDR": (4, 8)}
# Node GUIDs of exported qoslab topologies: fixed, so ibroute dumps map back to nodes. CA GUIDs
# leave room for port GUIDs (node GUID + port number, as ibsim assigns them).
SWITCH_GUID_BASE = 0x0002C90300000000
CA_GUID_BASE = 0x0002C90400000000
CA_GUID_STRIDE = 0x100


def link_gbps(width: str, speed: str) -> float:
    """Data rate of a `4xEDR`-style link; KeyError for unknown strings."""
    return WIDTH_LANES[width] * LANE_GBPS[speed]


def width_speed(gbps: float) -> tuple[str, str] | None:
    """The 4x (or other width) link type with this data rate, if there is one."""
    for width in ("4x", "1x", "2x", "8x", "12x"):
        for speed in LANE_GBPS:
            if abs(link_gbps(width, speed) - gbps) < 1e-6 * gbps:
                return width, speed
    return None


@dataclass
class Node:
    kind: Literal["switch", "ca"]
    guid: int
    description: str
    ports: int
    # CA port -> port GUID; a switch's only port GUID is its node GUID (port 0).
    port_guids: dict[int, int] = field(default_factory=dict)
    line: int = 0  # where its record starts in the file it came from (0: generated)
    # LIDs the dump gives: a switch's base LID at port 0, a CA's per port (empty: not given),
    # and their LMCs (a port answers at 2^LMC LIDs from its base; absent: 0).
    lids: dict[int, int] = field(default_factory=dict)
    lmcs: dict[int, int] = field(default_factory=dict)
    enhanced_port0: bool = False  # a switch whose record says "enhanced port 0" (written back as such)

    @property
    def ident(self) -> str:
        return f'{"S" if self.kind == "switch" else "H"}-{self.guid:016x}'

    def port_guid(self, port: int) -> int:
        if self.kind == "switch":
            return self.guid
        return self.port_guids.get(port, self.guid + port)


@dataclass
class Cable:
    a: tuple[int, int]  # (node index, IB port number, from 1)
    b: tuple[int, int]
    width: str | None  # None: the file does not say (the link runs at fabric.link_gbps)
    speed: str | None
    line: int = 0

    @property
    def gbps(self) -> float | None:
        return link_gbps(self.width, self.speed) if self.width and self.speed else None


@dataclass
class Endpoint:
    """A host as qoslab simulates it: one cabled CA port."""

    node: int
    port: int
    name: str


@dataclass
class Fabric:
    nodes: list[Node]
    cables: list[Cable]
    source: str = "<generated>"
    names: dict[int, str] = field(default_factory=dict)  # node index -> qoslab name, when given
    _ca_name_cache: dict[int, str] | None = field(default=None, init=False, repr=False, compare=False)

    # -- what qoslab simulates -------------------------------------------------------------------

    def endpoints(self) -> list[Endpoint]:
        """Hosts in natural name order (node2 before node10): each cabled CA port."""
        cabled: dict[int, list[int]] = {}
        for c in self.cables:
            for node, port in (c.a, c.b):
                if self.nodes[node].kind == "ca":
                    cabled.setdefault(node, []).append(port)
        base = {n: self.host_name(n) for n in cabled}
        hosts = []
        for node, ports in cabled.items():
            for port in sorted(ports):
                name = base[node] if len(ports) == 1 else f"{base[node]}/P{port}"
                hosts.append(Endpoint(node, port, name))
        hosts.sort(key=lambda e: _natural(e.name))
        return hosts

    def host_name(self, node: int) -> str:
        """A CA's host name: given, else the first word of its description ("node001 HCA-1" ->
        "node001") when no other CA shares it, else the whole description, else with the GUID."""
        if node in self.names:
            return self.names[node]
        return self._ca_names()[node]

    def _ca_names(self) -> dict[int, str]:
        # Worked out once for all CAs: per host it was quadratic (24 s to read a 4096-host dump).
        if self._ca_name_cache is None:
            cas = [i for i, n in enumerate(self.nodes) if n.kind == "ca"]
            self._ca_name_cache = _unique_names(self.nodes, cas, first_word=True)
        return self._ca_name_cache

    def switch_names(self) -> dict[int, str]:
        switches = [i for i, n in enumerate(self.nodes) if n.kind == "switch"]
        if all(i in self.names for i in switches):
            return {i: self.names[i] for i in switches}
        return _unique_names(self.nodes, switches, first_word=False)

    def switch_indices(self) -> list[int]:
        return [i for i, n in enumerate(self.nodes) if n.kind == "switch"]

    def lid(self, node: int, port: int) -> int:
        """The LID that addresses a port's counters: a switch's base LID (every port of a switch
        answers at it), a CA port's own. From the dump when it gives them; otherwise numbered in
        node order from 1 (switches one each, CA ports one each), as a subnet manager might,
        passing over every LID the dump gives (a perfquery dump names a port by LID: a numbered
        LID equal to a real one would pair its counters with the wrong port)."""
        n = self.nodes[node]
        own = n.lids.get(0 if n.kind == "switch" else port)
        if own:
            return own
        return self._numbered_lids()[(node, 0 if n.kind == "switch" else port)]

    def _numbered_lids(self) -> dict[tuple[int, int], int]:
        if not hasattr(self, "_lid_cache"):
            taken = {lid + k for n in self.nodes for port, lid in n.lids.items()
                     for k in range(1 << n.lmcs.get(port, 0))}
            numbered, lid = {}, 1
            for i, n in enumerate(self.nodes):
                for port in ([0] if n.kind == "switch" else range(1, n.ports + 1)):
                    if n.lids.get(port):
                        continue
                    while lid in taken:
                        lid += 1
                    numbered[(i, port)] = lid
                    lid += 1
            self._lid_cache = numbered
        return self._lid_cache

    def engine_ports(self) -> dict[tuple[int, int], tuple[int, int]]:
        """How the engine's `graph` topology numbers this fabric's ports: (engine node, engine
        port) -> (node index here, IB port number). Engine nodes are the hosts (one per cabled CA
        port, with port 0) in endpoints() order, then the switches (port = IB port - 1)."""
        hosts = self.endpoints()
        ports = {(i, 0): (e.node, e.port) for i, e in enumerate(hosts)}
        for k, node in enumerate(self.switch_indices()):
            for port in range(1, self.nodes[node].ports + 1):
                ports[(len(hosts) + k, port - 1)] = (node, port)
        return ports

    def engine_topology(self, default_gbps: float) -> dict[str, Any]:
        """The engine's `graph` topology: hosts (one per cabled CA port), then switches, numbered
        as engine_ports() says; links whose rate the file does not give run at `default_gbps`."""
        hosts = self.endpoints()
        switches = self.switch_indices()
        end = {ib: engine for engine, ib in self.engine_ports().items()}
        names = self.switch_names()
        cables = [[*end[c.a], *end[c.b]] for c in self.cables]
        return {
            "kind": "graph",
            "host_names": [e.name for e in hosts],
            "switch_names": [names[n] for n in switches],
            "switch_ports": [self.nodes[n].ports for n in switches],
            "cables": cables,
            "cable_gbps": [c.gbps or default_gbps for c in self.cables],
        }


def _natural(name: str) -> list[Any]:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]


def _unique_names(nodes: list[Node], indices: list[int], first_word: bool) -> dict[int, str]:
    def pick(candidate) -> dict[int, str]:
        names = {i: candidate(nodes[i]) for i in indices}
        counts: dict[str, int] = {}
        for n in names.values():
            counts[n] = counts.get(n, 0) + 1
        return {i: n for i, n in names.items() if n and counts[n] == 1}

    result: dict[int, str] = {}
    tries = [lambda n: n.description.strip()]
    if first_word:
        tries.insert(0, lambda n: (n.description.split() or [""])[0])
    for candidate in tries:
        for i, n in pick(candidate).items():
            result.setdefault(i, n)
    for i in indices:
        if i not in result:
            desc = nodes[i].description.strip()
            result[i] = f"{desc} {nodes[i].ident}" if desc else nodes[i].ident
    return result


def from_engine(fabric: dict[str, Any], link_gbps_default: float) -> Fabric:
    """A qoslab topology as the tools would see it (the engine's cabling, `_engine.fabric`): node
    names become descriptions, GUIDs are fixed by position, ports are numbered from 1."""
    hosts, names = fabric["hosts"], fabric["node_names"]
    base, peer, rates = fabric["port_base"], fabric["port_peer"], fabric["port_gbps"]
    port_node = {}
    nodes: list[Node] = []
    for n, name in enumerate(names):
        ports = base[n + 1] - base[n]
        if n < hosts:
            guid = CA_GUID_BASE + n * CA_GUID_STRIDE
            nodes.append(Node("ca", guid, name, ports))
        else:
            nodes.append(Node("switch", SWITCH_GUID_BASE + (n - hosts), name, ports))
        for p in range(base[n], base[n + 1]):
            port_node[p] = (n, p - base[n] + 1)
    cables = []
    for p, q in enumerate(peer):
        if q < 0 or q < p:
            continue
        gbps = rates[p] if rates else link_gbps_default
        ws = width_speed(gbps)
        if ws is None:
            raise ValueError(f"a link of {gbps:g} Gb/s is no InfiniBand width x speed (4x EDR is 100)")
        cables.append(Cable(port_node[p], port_node[q], *ws))
    return Fabric(nodes, cables, names=dict(enumerate(names)))
