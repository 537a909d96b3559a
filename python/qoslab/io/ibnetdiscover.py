"""Reads `ibnetdiscover` output and ibsim net files (one grammar: ibsim's is a superset) into a
:class:`Fabric`, and writes a fabric back out in both forms.

Real dumps are messy (formats.md section 3.1): stray tool messages at the top, blank lines lost,
tabs and trailing blanks, parallel cables, multi-port HCAs, a switch cabled to itself, degraded
links. Records are keyed off lines starting with a node type or ``[``, never off blank lines.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from qoslab.errors import FileLineError
from qoslab.io.fabric import (
    CA_GUID_BASE,
    IBSIM_SPEED,
    IBSIM_WIDTH,
    LANE_GBPS,
    SWITCH_GUID_BASE,
    WIDTH_LANES,
    Cable,
    Fabric,
    Node,
)
from qoslab.io.files import NotReadable, read_bytes
from qoslab.io.lines import IBSIM_LINE_BYTES, comment, comment_lines


class FabricFileError(FileLineError):
    """A fabric file qoslab cannot read; names the file and line."""


_NODE = re.compile(r'^(Switch|Ca|Hca|Rt)\s+(\d+)\s+"([^"]+)"(.*)$')
_PORT = re.compile(
    r'^\[(\d+)\](?:\[ext \d+\])?(?:\(([0-9a-fA-F]+)\))?\s*"([^"]+)"(?:\[(\d+)\])?(?:\[ext \d+\])?'
    r"(?:\s*\(([0-9a-fA-F]+)\))?(.*)$"
)
_GUID = re.compile(r"^(switchguid|caguid|hcaguids|rtguid)\s*([=+])\s*(0x[0-9a-fA-F]+|\d+)")
_DESCRIPTION = re.compile(r'#\s*"([^"]*)"')
# A port line's link type ends it, but for what ibnetdiscover.c appends after it: with -f (full)
# the raw PortInfo codes " s=<speed> w=<width> v=<vlcap>[ e=<ext speed>]", on Xsigo devices
# " slot N" or " (scp)".
_LINK = re.compile(r"(\d+x|\?\?)(SDR|DDR|QDR|FDR10|FDR|EDR|HDR|NDR|XDR|\?\?\?)"
                   r"(?:\s+s=\d+\s+w=\d+\s+v=\d+(?:\s+e=\d+)?)?(?:\s+slot \d+|\s+\(scp\))?\s*$")
_OPTION = re.compile(r"\b([wse])=(\d+)")
# LIDs: a switch record's port-0 LID, a CA port line's own "# lid N lmc M" (before the peer's
# quoted description, whose "lid N" is the peer's). 0 means unassigned (a dump taken before the SM ran).
# A switch record ends "base port 0 lid N lmc M" or "enhanced port 0 lid N lmc M" (ibnetdiscover.c
# prints the switch's LID either way; only port 0's kind differs), after its description, which
# is printed raw, quotes and all: read from the end of the line.
_SWITCH_TAIL = re.compile(r"\s(base|enhanced) port 0 lid (\d+) lmc (\d+)\s*$")
_OWN_LID = re.compile(r"\s*#\s*lid (\d+)(?: lmc (\d+))?")
_IBSIM_WIDTHS = {code: width for width, code in IBSIM_WIDTH.items()}
_IBSIM_SPEEDS = {code: speed for speed, code in IBSIM_SPEED.items()}


@dataclass
class _Port:
    node: int
    port: int
    remote: str
    remote_port: int
    width: str | None
    speed: str | None
    line: int


def read_fabric(path: str | Path) -> tuple[Fabric, list[str]]:
    """Parses a file; returns the fabric and warnings (each naming its line)."""
    source = str(path)
    try:
        text = read_bytes(path).decode("utf-8", errors="replace")
    except NotReadable as error:
        raise FabricFileError(source, 0, str(error)) from None
    except FileNotFoundError:
        raise FabricFileError(source, 0, "file not found") from None
    except IsADirectoryError:
        raise FabricFileError(source, 0, "is a directory, expected an ibnetdiscover or ibsim net file") from None
    except OSError as error:
        raise FabricFileError(source, 0, f"cannot read: {error.strerror or error}") from None
    return parse_fabric(text, source)


def parse_fabric(text: str, source: str = "<text>") -> tuple[Fabric, list[str]]:
    warnings: list[str] = []
    nodes: list[Node] = []
    ids: dict[str, int] = {}
    ports: list[_Port] = []
    listed: set[tuple[int, int]] = set()  # (node, port) of every port line read, for a linear-time check
    current: int | None = None
    pending_guid: int | None = None
    next_guid = {"switch": SWITCH_GUID_BASE + 0x8000, "ca": CA_GUID_BASE + 0x800000}

    def fail(line: int, message: str) -> FabricFileError:
        return FabricFileError(source, line, message)

    given: dict[int, int] = {}  # each LID the dump gives -> the line giving it

    def give_lid(node: Node, port: int, lid: int, lmc: int, line: int) -> None:
        node.lids[port], node.lmcs[port] = lid, min(lmc, 7)  # LMC is a 3-bit field
        for value in range(lid, lid + (1 << node.lmcs[port])):
            first = given.setdefault(value, line)
            if first != line:  # LIDs are unique in a subnet; a perfquery dump names a port by one
                warnings.append(f"{source}:{line}: LID {value} is given at line {first} too: a perfquery dump "
                                "naming it may mean either port")
                return

    # Lines end at \n only, as ibnetdiscover writes them and the IB tools read them: splitlines()
    # would also end one at a \r or \x0c inside a node description.
    for number, raw in enumerate(text.split("\n"), start=1):
        line = raw.rstrip()
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        guid = _GUID.match(stripped)
        if guid:
            value = int(guid[3], 0)
            pending_guid = value if guid[2] == "=" else (pending_guid or 0) + value
            continue
        node = _NODE.match(stripped)
        if node:
            kind_word, count, ident, rest = node[1], int(node[2]), node[3], node[4]
            if kind_word == "Rt":
                raise fail(number, f'router "{ident}": routers are not modelled (qoslab simulates one subnet)')
            if ident in ids:
                raise fail(number, f'node "{ident}" has a second record (the first is at line {nodes[ids[ident]].line})')
            if not 1 <= count <= 255:
                raise fail(number, f'node "{ident}": expected 1..255 ports, got {count}')
            kind: Literal["switch", "ca"] = "switch" if kind_word == "Switch" else "ca"
            described = _DESCRIPTION.search(rest)
            description = described[1] if described else ident
            id_guid = re.fullmatch(r"[SHR]-([0-9a-fA-F]{16})", ident)
            if id_guid:
                node_guid = int(id_guid[1], 16)
            elif pending_guid is not None:
                node_guid = pending_guid
            else:
                node_guid = next_guid[kind]
                next_guid[kind] += 0x100
            pending_guid = None
            ids[ident] = len(nodes)
            nodes.append(Node(kind, node_guid, description, count, line=number))
            tail = _SWITCH_TAIL.search(rest)
            if kind == "switch" and tail:
                nodes[-1].enhanced_port0 = tail[1] == "enhanced"
                if int(tail[2]):
                    give_lid(nodes[-1], 0, int(tail[2]), int(tail[3]), number)
            current = len(nodes) - 1
            continue
        if stripped.startswith("["):
            port = _PORT.match(stripped)
            if not port:
                raise fail(number, f'expected a port line like [1] "S-0002c90300000001"[3] ..., got {stripped[:60]!r}')
            if current is None:
                raise fail(number, "a port line before any Switch or Ca record")
            local = int(port[1])
            owner = nodes[current]
            if not 1 <= local <= owner.ports:
                raise fail(number, f'port [{local}] of "{owner.ident if owner.line else owner.description}": '
                                   f"the record declares {owner.ports} ports (1..{owner.ports})")
            if (current, local) in listed:
                raise fail(number, f"port [{local}] is listed twice in this record")
            listed.add((current, local))
            if port[2] and owner.kind == "ca":
                owner.port_guids[local] = int(port[2], 16)
            own_lid = _OWN_LID.match(port[6] or "")
            if owner.kind == "ca" and own_lid and int(own_lid[1]):
                give_lid(owner, local, int(own_lid[1]), int(own_lid[2] or 0), number)
            width, speed = _link_type(port[6], number, warnings, source)
            ports.append(_Port(current, local, port[3], int(port[4] or 1), width, speed, number))
            continue
        # Tool noise ("ibwarn: ...", "src/query_smp.c:195; umad ... timed out"), chassis headers
        # and ibsim directives we have no use for (vendid=, devid=, do, module, include).
        if nodes and not re.match(r"^(vendid|devid|sysimgguid|Chassis|Non-Chassis|do |module |include )", stripped):
            warnings.append(f"{source}:{number}: ignored a line qoslab does not understand: {stripped[:60]!r}")
        current = None

    if not nodes:
        raise fail(0, "no Switch or Ca records: expected ibnetdiscover output or an ibsim net file")
    cables = _cables(nodes, ids, ports, source, warnings)
    cabled = {c.a[0] for c in cables} | {c.b[0] for c in cables}
    for i, n in enumerate(nodes):
        if n.kind == "ca" and i not in cabled:
            warnings.append(f"{source}:{n.line}: CA {n.description!r} has no cabled port; it is left out")
    if not any(n.kind == "switch" for n in nodes):
        raise fail(0, "no switches: qoslab needs at least one switch")
    return Fabric(nodes, cables, source=source), warnings


def _port_gbps(p: _Port) -> float:
    """A port's rate; only for ports with a known link type (width and speed come together)."""
    assert p.width is not None and p.speed is not None
    return WIDTH_LANES[p.width] * LANE_GBPS[p.speed]


def _link_type(rest: str, line: int, warnings: list[str], source: str) -> tuple[str | None, str | None]:
    found = _LINK.search(rest)
    if found:
        width, speed = found[1], found[2]
        if width == "??" or speed == "???" or width not in WIDTH_LANES:
            warnings.append(f"{source}:{line}: link type {width}{speed} is unknown; it runs at fabric.link_gbps")
            return None, None
        return width, speed
    options = {k: int(v) for k, v in _OPTION.findall(rest.split("#", 1)[0])}  # not from a comment
    if not options:
        if re.search(r"#.*\blid \d+", rest):  # ibnetdiscover's form, whose link type we did not find
            warnings.append(f"{source}:{line}: no link type (width x speed, like 4xEDR) at the end of this port "
                            "line; it runs at fabric.link_gbps")
        return None, None
    width = _IBSIM_WIDTHS.get(options.get("w", 2))
    speed = _IBSIM_SPEEDS.get((options.get("s", 1), options.get("e", 0)))
    if width is None or speed is None:
        warnings.append(f"{source}:{line}: ibsim link options {rest.strip()!r} name no width x speed qoslab knows; "
                        "it runs at fabric.link_gbps")
        return None, None
    return width, speed


def _cables(nodes: list[Node], ids: dict[str, int], ports: list[_Port], source: str, warnings: list[str]) -> list[Cable]:
    by_end: dict[tuple[int, int], _Port] = {}
    for p in ports:
        by_end[(p.node, p.port)] = p
    cables: list[Cable] = []
    seen: set[tuple[int, int]] = set()
    for p in ports:
        if (p.node, p.port) in seen:
            continue
        if p.remote not in ids:
            raise FabricFileError(source, p.line, f'port [{p.port}] is cabled to "{p.remote}", which has no record '
                                                  "in the file (a truncated dump?)")
        remote = ids[p.remote]
        r = nodes[remote]
        if not 1 <= p.remote_port <= r.ports:
            raise FabricFileError(source, p.line, f'port [{p.port}] is cabled to port [{p.remote_port}] of "{p.remote}", '
                                                  f"which has {r.ports} ports")
        if (remote, p.remote_port) == (p.node, p.port):
            raise FabricFileError(source, p.line, f"port [{p.port}] is cabled to itself")
        if nodes[p.node].kind == "ca" and r.kind == "ca":
            raise FabricFileError(source, p.line, "two CAs cabled back to back: qoslab needs a switch between hosts")
        other = by_end.get((remote, p.remote_port))
        width, speed = p.width, p.speed
        if other is not None:
            if ids.get(other.remote) != p.node or other.remote_port != p.port:
                raise FabricFileError(source, p.line, f'port [{p.port}] is cabled to "{p.remote}"[{p.remote_port}], but '
                                                      f"line {other.line} cables that port elsewhere")
            if (other.width, other.speed) != (width, speed) and None not in (other.width, width):
                slower = min((p, other), key=_port_gbps)
                warnings.append(f"{source}:{p.line}: the two ends of this link disagree ({p.width}{p.speed} here, "
                                f"{other.width}{other.speed} at line {other.line}); using the slower")
                width, speed = slower.width, slower.speed
            width, speed = (width or other.width), (speed or other.speed)
        seen.add((p.node, p.port))
        seen.add((remote, p.remote_port))
        cables.append(Cable((p.node, p.port), (remote, p.remote_port), width, speed, p.line))
    return cables


# -- writers ---------------------------------------------------------------------------------------


def _ibsim_options(cable: Cable) -> str:
    if cable.width is None or cable.speed not in IBSIM_SPEED:
        return ""
    s, e = IBSIM_SPEED[cable.speed]
    return f"\tw={IBSIM_WIDTH[cable.width]} s={s}" + (f" e={e}" if e else "")


def _links_by_port(fabric: Fabric) -> dict[tuple[int, int], tuple[tuple[int, int], Cable]]:
    ends: dict[tuple[int, int], tuple[tuple[int, int], Cable]] = {}
    for c in fabric.cables:
        ends[c.a] = (c.b, c)
        ends[c.b] = (c.a, c)
    return ends


def write_ibsim(fabric: Fabric) -> str:
    """An ibsim net file: switches, then CAs, every link from both ends, fixed GUIDs."""
    ends = _links_by_port(fabric)
    out = [*comment_lines(f"ibsim net file written by qoslab from {fabric.source}", IBSIM_LINE_BYTES),
           "# start with: ibsim -s <this file>", ""]
    order = sorted(range(len(fabric.nodes)), key=lambda i: fabric.nodes[i].kind != "switch")
    names = {**fabric.switch_names(), **{i: fabric.host_name(i) for i, n in enumerate(fabric.nodes) if n.kind == "ca"}}
    for i in order:
        n = fabric.nodes[i]
        directive = "switchguid" if n.kind == "switch" else "caguid"
        header = "Switch" if n.kind == "switch" else "Hca"
        # ibsim gives a CA's port p the GUID caguid + p: the base is chosen so that the ports keep
        # the GUIDs the fabric has (a dump's port 1 often has the node's own GUID), which the
        # exported qos-policy.conf names; the node GUID then reads one lower in ibsim.
        base = n.guid if n.kind == "switch" else n.port_guid(1) - 1
        kept = n.kind == "switch" or all(n.port_guid(p) == base + p for p in range(1, n.ports + 1))
        if not kept:
            out += comment_lines(f"note: ibsim cannot give {names[i]}'s ports their GUIDs ("
                                 + ", ".join(f"{n.port_guid(p):#x}" for p in range(1, n.ports + 1))
                                 + "); a qos-policy.conf naming them will not match in ibsim", IBSIM_LINE_BYTES)
        # ibsim reads lines into 256 bytes: keep descriptions short (bytes, escapes counted).
        desc = comment(names[i][:60]).replace('"', "'").encode()[:120].decode(errors="ignore")
        out += [f"{directive}=0x{base:016x}", f'{header}\t{n.ports} "{n.ident}"\t# "{desc}"']
        for port in range(1, n.ports + 1):
            if (i, port) in ends:
                (peer, peer_port), cable = ends[(i, port)]
                out.append(f'[{port}]\t"{fabric.nodes[peer].ident}"[{peer_port}]{_ibsim_options(cable)}')
        out.append("")
    return "\n".join(out)


def write_ibnetdiscover(fabric: Fabric) -> str:
    """Text in `ibnetdiscover`'s default format, with each node's description and LIDs as its dump
    gave them. A LID the fabric does not have (a generated topology: no subnet manager has run)
    prints as 0, unassigned, as ibnetdiscover prints it before the SM has run."""
    ends = _links_by_port(fabric)
    out = ["#", f"# Topology file: written by qoslab from {comment(fabric.source)}", "#", ""]

    def link(cable: Cable) -> str:
        return f"{cable.width}{cable.speed}" if cable.width else "??" + "???"

    def lid(node: int, port: int) -> int:  # the LID a port line names: a switch's at its port 0
        n = fabric.nodes[node]
        return n.lids.get(0 if n.kind == "switch" else port, 0)

    def lmc(node: int, port: int) -> int:
        n = fabric.nodes[node]
        return n.lmcs.get(0 if n.kind == "switch" else port, 0)

    for i in sorted(range(len(fabric.nodes)), key=lambda i: fabric.nodes[i].kind != "switch"):
        n = fabric.nodes[i]
        out += ["vendid=0x2c9", "devid=0x0", f"sysimgguid=0x{n.guid:x}"]
        if n.kind == "switch":
            port0 = "enhanced" if n.enhanced_port0 else "base"
            out += [f"switchguid=0x{n.guid:x}({n.guid:x})",
                    f'Switch\t{n.ports} "{n.ident}"\t\t# "{n.description}" {port0} port 0 lid {lid(i, 0)} lmc {lmc(i, 0)}']
            for port in range(1, n.ports + 1):
                if (i, port) not in ends:
                    continue
                (peer, peer_port), cable = ends[(i, port)]
                p = fabric.nodes[peer]
                guid = f"({p.port_guid(peer_port):x}) " if p.kind == "ca" else ""
                out.append(f'[{port}]\t"{p.ident}"[{peer_port}]{guid}\t\t# "{p.description}" lid {lid(peer, peer_port)} '
                           f"{link(cable)}")
        else:
            out += [f"caguid=0x{n.guid:x}", f'Ca\t{n.ports} "{n.ident}"\t\t# "{n.description}"']
            for port in range(1, n.ports + 1):
                if (i, port) not in ends:
                    continue
                (peer, peer_port), cable = ends[(i, port)]
                p = fabric.nodes[peer]
                out.append(f'[{port}]({n.port_guid(port):x}) \t"{p.ident}"[{peer_port}]\t\t# lid {lid(i, port)} '
                           f'lmc {lmc(i, port)} "{p.description}" lid {lid(peer, peer_port)} {link(cable)}')
        out.append("")
    return "\n".join(out)
