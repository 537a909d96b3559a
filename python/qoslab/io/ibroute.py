"""Linear forwarding tables from `ibroute` dumps, turned into the engine's routing table.

`ibroute <switch LID>` prints one switch's unicast LFT::

    Unicast lids [0x0-0x6] of switch Lid 1 guid 0x0000000000200000 (Switch1):
      Lid  Out   Destination
           Port     Info
    0x0002 001 : (Channel Adapter portguid 0x0000000000100001: 'Hca1')
    6 valid lids dumped

A file may hold several dumps one after another, or a folder one file per switch. Switches are
matched to the fabric by node GUID, destination LIDs to hosts by the port GUID the dump names.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from qoslab.errors import FileLineError
from qoslab.io.fabric import Endpoint, Fabric
from qoslab.io.files import NotReadable, read_bytes

NO_ROUTE = 0xFFFF

_HEADER = re.compile(r"^Unicast lids \[(0x[0-9a-fA-F]+)-(0x[0-9a-fA-F]+)\] of switch (?:Lid (\d+) )?guid (0x[0-9a-fA-F]+)(?: \((.*)\))?:?\s*$")
_ENTRY = re.compile(r"^(0x[0-9a-fA-F]+)\s+(\d+)\s*:\s*\((Channel Adapter|Switch|Router) portguid (0x[0-9a-fA-F]+):\s*'(.*)'\)\s*$")
_FOOTER = re.compile(r"^(\d+) (?:valid )?lids dumped")


class RoutingFileError(FileLineError):
    """A routing dump qoslab cannot use; names the file and line."""


@dataclass
class Entry:
    lid: int
    port: int
    kind: str
    guid: int
    description: str
    line: int


@dataclass
class SwitchDump:
    guid: int
    description: str
    source: str
    line: int
    entries: list[Entry] = field(default_factory=list)


def read_dumps(path: str | Path) -> list[SwitchDump]:
    """Every switch dump in a file, or in the files of a folder (in name order)."""
    p = Path(path)
    if p.is_dir():
        files = sorted(f for f in p.iterdir() if f.is_file() and not f.name.startswith("."))
        if not files:
            raise RoutingFileError(str(p), 0, "the folder holds no ibroute dumps")
    elif p.exists():
        files = [p]
    else:
        raise RoutingFileError(str(p), 0, "no such file or folder")
    dumps: list[SwitchDump] = []
    for f in files:
        try:
            text = read_bytes(f).decode("utf-8", errors="replace")
        except NotReadable as error:
            raise RoutingFileError(str(f), 0, str(error)) from None
        except OSError as error:
            raise RoutingFileError(str(f), 0, f"cannot read: {error.strerror or error}") from None
        dumps += parse_dumps(text, str(f))
    return dumps


def parse_dumps(text: str, source: str = "<text>") -> list[SwitchDump]:
    dumps: list[SwitchDump] = []
    current: SwitchDump | None = None
    finished = True
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        header = _HEADER.match(line)
        if header:
            if current is not None and not finished:
                raise RoutingFileError(source, number, f"a new dump starts before the one at line {current.line} "
                                                       "ended with its 'N valid lids dumped' line (truncated?)")
            current = SwitchDump(int(header[4], 16), header[5] or "", source, number)
            dumps.append(current)
            finished = False
            continue
        if current is None or finished:
            continue  # tool noise ("ibwarn: ...") between dumps
        if line.startswith(("Lid", "Port")):
            continue
        entry = _ENTRY.match(line)
        if entry:
            current.entries.append(Entry(int(entry[1], 16), int(entry[2]), entry[3], int(entry[4], 16), entry[5], number))
            continue
        footer = _FOOTER.match(line)
        if footer:
            if int(footer[1]) != len(current.entries):
                raise RoutingFileError(source, number, f"the dump says {footer[1]} LIDs, but {len(current.entries)} "
                                                       f"entries follow its header at line {current.line}")
            finished = True
            continue
        raise RoutingFileError(source, number, f"expected an LFT entry like \"0x0002 001 : (Channel Adapter portguid "
                                               f"0x...: 'name')\", got {line[:60]!r}")
    if current is not None and not finished:
        raise RoutingFileError(source, current.line, "the dump never ends with its 'N valid lids dumped' line (truncated?)")
    if not dumps:
        raise RoutingFileError(source, 0, "no 'Unicast lids [...] of switch ...' dump found: expected ibroute output")
    return dumps


def routing_table(fabric: Fabric, dumps: list[SwitchDump]) -> list[int]:
    """The engine's table (`s * hosts + d` -> 0-based output port) for the fabric's switches and
    hosts, from the dumps; every problem names the dump's file and line."""
    hosts = fabric.endpoints()
    switches = fabric.switch_indices()
    names = fabric.switch_names()
    host_by_guid = {fabric.nodes[e.node].port_guid(e.port): i for i, e in enumerate(hosts)}
    switch_by_guid = {fabric.nodes[n].guid: s for s, n in enumerate(switches)}
    # LID -> host, from what every dump says the LID is.
    base_lid: dict[int, int] = {}  # host -> its base LID
    for dump in dumps:
        for e in dump.entries:
            if e.kind == "Channel Adapter":
                if e.guid not in host_by_guid:
                    raise RoutingFileError(dump.source, e.line, f"LID {e.lid:#06x} is CA port GUID {e.guid:#018x} "
                                                                f"({e.description!r}), which is not in the fabric")
                host = host_by_guid[e.guid]
                # With LMC > 0 a port has several LIDs; the base (lowest) one is what MPI uses.
                base_lid[host] = min(base_lid.get(host, e.lid), e.lid)
    table = [NO_ROUTE] * (len(switches) * len(hosts))
    dumped: dict[int, SwitchDump] = {}
    for dump in dumps:
        if dump.guid not in switch_by_guid:
            raise RoutingFileError(dump.source, dump.line, f"switch GUID {dump.guid:#018x} ({dump.description!r}) "
                                                           "is not in the fabric")
        s = switch_by_guid[dump.guid]
        if s in dumped:
            raise RoutingFileError(dump.source, dump.line, f"a second dump of switch {names[switches[s]]!r} "
                                                           f"(the first: {dumped[s].source}:{dumped[s].line})")
        dumped[s] = dump
        ports = fabric.nodes[switches[s]].ports
        by_lid = {e.lid: e for e in dump.entries}
        for h, lid in base_lid.items():
            entry = by_lid.get(lid)
            if entry is None:
                continue
            if entry.port == 0 or entry.port > ports:
                raise RoutingFileError(dump.source, entry.line, f"LID {lid:#06x} leaves through port {entry.port}, "
                                                                f"but switch {names[switches[s]]!r} has data ports "
                                                                f"1..{ports}")
            table[s * len(hosts) + h] = entry.port - 1
    missing = [h for h in range(len(hosts)) if h not in base_lid]
    if missing:
        raise RoutingFileError(dumps[0].source, 0, f"no dump names a LID for host {hosts[missing[0]].name!r} "
                                                   f"({len(missing)} hosts without a LID)")
    check_paths(fabric, hosts, switches, table, dumped, base_lid)
    return table


def check_paths(fabric: Fabric, hosts: list[Endpoint], switches: list[int], table: list[int],
                dumped: dict[int, SwitchDump], base_lid: dict[int, int]) -> None:
    """Every host reaches every other: no missing entry, uncabled port, wrong delivery or loop."""
    names = fabric.switch_names()
    switch_of = {n: s for s, n in enumerate(switches)}
    host_of = {(e.node, e.port): i for i, e in enumerate(hosts)}
    peer: dict[tuple[int, int], tuple[int, int]] = {}
    for c in fabric.cables:
        peer[c.a], peer[c.b] = c.b, c.a
    attached = [switch_of[peer[(e.node, e.port)][0]] for e in hosts]
    n = len(hosts)

    def where(s: int) -> str:
        d = dumped.get(s)
        return f"switch {names[switches[s]]!r}" + (f" ({d.source}:{d.line})" if d else " (no dump)")

    for d in range(n):
        good: set[int] = set()  # switches known to deliver to d
        for src in range(n):
            s, walk = attached[src], list[int]()
            while s not in good:
                if s in walk:
                    loop = " -> ".join(names[switches[x]] for x in walk[walk.index(s):] + [s])
                    raise RoutingFileError(*_place(dumped, s), f"a routing loop towards {hosts[d].name!r} "
                                                              f"(LID {base_lid[d]:#06x}): {loop}")
                walk.append(s)
                port = table[s * n + d]
                if port == NO_ROUTE:
                    raise RoutingFileError(*_place(dumped, s), f"{where(s)} has no route to {hosts[d].name!r} "
                                                              f"(LID {base_lid[d]:#06x}), needed from {hosts[src].name!r}")
                node = switches[s]
                nxt = peer.get((node, port + 1))
                if nxt is None:
                    raise RoutingFileError(*_place(dumped, s), f"{where(s)} sends LID {base_lid[d]:#06x} out of port "
                                                              f"{port + 1}, which is not cabled")
                if fabric.nodes[nxt[0]].kind == "ca":
                    if host_of.get(nxt) != d:
                        raise RoutingFileError(*_place(dumped, s), f"{where(s)} delivers LID {base_lid[d]:#06x} "
                                                                  f"({hosts[d].name!r}) to another host")
                    break
                s = switch_of[nxt[0]]
            good.update(walk)


def _place(dumped: dict[int, SwitchDump], s: int) -> tuple[str, int]:
    d = dumped.get(s)
    return (d.source, d.line) if d else ("<routing dumps>", 0)
