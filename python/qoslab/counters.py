"""Port counters as a cluster shows them (`run.port_counters`), real `perfquery` dumps read back,
and the two set side by side (`qoslab compare-counters`).

What each counter means, as InfiniBand defines it (IBA vol. 1, PortCounters and
PortCountersExtended; PortVLXmitWaitCounters) and as the engine measures it:

- PortXmitData / PortRcvData: octets of every packet between the start delimiter and the VCRC,
  divided by 4. A packet on the wire is its payload plus `fabric.header_bytes` (LRH, BTH, ICRC and
  the 2-byte VCRC), so a packet counts (wire bytes - 2) / 4; the totals are summed in bytes and
  divided once.
- PortXmitPkts / PortRcvPkts: packets.
- PortXmitWait: ticks during which the port had data to send but sent nothing (no credits, or no
  arbitration). A tick is a number of byte times at the port's rate: NVIDIA's Quantum switches
  count one every 8 bytes (`tick_bytes` = 8, the default), Switch-IB ones every 32 bytes per lane
  (ibdiagnet's "Congestion Assessment on InfiniBand Links"). The engine measures the time a port
  sat idle while its packets were stalled for credits; its arbiter never leaves a port idle while
  a VL may send, so that is all of it.
- PortVLXmitWait<v>: the same per VL. Measured: the time VL v had a packet ready but no credits.
  The spec also counts time a VL waits while another VL sends; the engine does not (qoslab).
- PortXmitDataVL<v>: qoslab's per-VL PortXmitData (the spec counts data per SL, not per VL).

Counts are over the measurement window (`run.warmup_us` to the end). Real counters are read
twice, over an interval; the differences are what is compared.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from qoslab import arrow
from qoslab.errors import FileLineError
from qoslab.io.files import NotReadable, read_bytes

TICK_BYTES = 8  # Quantum, Quantum-2, Quantum-3: one PortXmitWait tick per 8 bytes of link time
VCRC_BYTES = 2  # counted in the wire size, not in PortXmitData
PORT_FIELDS = ("PortXmitData", "PortRcvData", "PortXmitPkts", "PortRcvPkts", "PortXmitWait")


class CounterDumpError(FileLineError):
    """A perfquery dump qoslab cannot use; names the file and line."""


def _port_map(scenario: Any) -> tuple[Any, dict[tuple[int, int], tuple[int, int]]]:
    """The tool fabric and, per engine (node, local port), the tool (node, IB port number)."""
    from qoslab.scenario import Ibnetdiscover

    fabric = scenario.tool_fabric()
    if not isinstance(scenario.topology, Ibnetdiscover):
        # from_engine: the same nodes in the same order, ports numbered from 1.
        return fabric, {(n, p): (n, p + 1) for n, node in enumerate(fabric.nodes) for p in range(node.ports)}
    return fabric, fabric.engine_ports()


def port_counters(scenario: Any, links: pa.Table, port_waits: pa.Table, tick_bytes: int = TICK_BYTES) -> pa.Table:
    """One row per cabled port: its node (name, GUID), IB port number, LID and counters. `links`
    is the engine's link table, ports numbered as the engine numbers them."""
    fabric, mapping = _port_map(scenario)
    vls = scenario.fabric.data_vls
    rows = links.select(["link", "vl", "src_node", "src_port", "dst_node", "dst_port", "packets", "bytes",
                         "credit_stall_ns"]).to_pylist()
    wait = dict(zip(port_waits.column("link").to_pylist(), port_waits.column("xmit_wait_ns").to_pylist()))
    rate = _rates(scenario, fabric, mapping)
    out: dict[tuple[int, int], dict[str, Any]] = {}
    received: dict[tuple[int, int], list[int]] = {}
    for r in rows:
        me = mapping[(r["src_node"], r["src_port"])]
        peer = mapping[(r["dst_node"], r["dst_port"])]
        entry = out.setdefault(me, {"link": r["link"], "bytes": 0, "packets": 0, "vl_bytes": [0] * vls,
                                    "vl_packets": [0] * vls, "vl_stall_ns": [0.0] * vls})
        entry["bytes"] += r["bytes"]
        entry["packets"] += r["packets"]
        entry["vl_bytes"][r["vl"]] += r["bytes"]
        entry["vl_packets"][r["vl"]] += r["packets"]
        entry["vl_stall_ns"][r["vl"]] += r["credit_stall_ns"]
        into = received.setdefault(peer, [0, 0])
        into[0] += r["bytes"]
        into[1] += r["packets"]
    table: dict[str, list[Any]] = {k: [] for k in ("node", "node_guid", "port", "lid", "link_gbps", *PORT_FIELDS)}
    for v in range(vls):
        table[f"PortVLXmitWait{v}"] = []
    for v in range(vls):
        table[f"PortXmitDataVL{v}"] = []
    names = {**{i: fabric.host_name(i) for i, n in enumerate(fabric.nodes) if n.kind == "ca"}, **fabric.switch_names()}
    for (node, port), e in sorted(out.items()):
        gbps = rate[(node, port)]

        def ticks(ns, gbps=gbps):
            return int(ns * gbps / 8 / tick_bytes)
        rcv = received.get((node, port), [0, 0])
        table["node"].append(names[node])
        table["node_guid"].append(f"0x{fabric.nodes[node].guid:016x}")
        table["port"].append(port)
        table["lid"].append(fabric.lid(node, port))
        table["link_gbps"].append(gbps)
        table["PortXmitData"].append((e["bytes"] - VCRC_BYTES * e["packets"]) // 4)
        table["PortRcvData"].append((rcv[0] - VCRC_BYTES * rcv[1]) // 4)
        table["PortXmitPkts"].append(e["packets"])
        table["PortRcvPkts"].append(rcv[1])
        table["PortXmitWait"].append(ticks(wait.get(e["link"], 0.0)))
        for v in range(vls):
            table[f"PortVLXmitWait{v}"].append(ticks(e["vl_stall_ns"][v]))
            table[f"PortXmitDataVL{v}"].append((e["vl_bytes"][v] - VCRC_BYTES * e["vl_packets"][v]) // 4)
    return pa.table({name: arrow.inferred(values) for name, values in table.items()})  # no pandas (qoslab.arrow)


def _rates(scenario: Any, fabric: Any, mapping: dict) -> dict[tuple[int, int], float]:
    default = float(scenario.fabric.link_gbps)
    rate = {}
    for c in fabric.cables:
        for end in (c.a, c.b):
            rate[end] = c.gbps or default
    return {port: rate.get(port, default) for port in mapping.values()}


def _line(name: str, value: Any) -> str:
    return f"{name + ':':.<33}{value}"


def perfquery_text(table: pa.Table) -> str:
    """The counters as `perfquery` prints them, per port: the basic block (with PortXmitWait),
    the extended block and the per-VL wait block, each under its own header line."""
    out = []
    vls = sum(1 for name in table.column_names if name.startswith("PortVLXmitWait"))
    for r in table.to_pylist():
        lid, port = r["lid"], r["port"]
        out.append(f"# Port counters: Lid {lid} port {port} (CapMask: 0x1300)")
        out += [_line("PortSelect", port), _line("CounterSelect", "0x0000")]
        for name in ("PortXmitData", "PortRcvData", "PortXmitPkts", "PortRcvPkts"):
            out.append(_line(name, min(r[name], 0xFFFFFFFF)))  # 32-bit counters saturate
        out.append(_line("PortXmitWait", min(r["PortXmitWait"], 0xFFFFFFFF)))
        out.append(f"# Port extended counters: Lid {lid} port {port} (CapMask: 0x1300 CapMask2: 0x0000000)")
        out += [_line("PortSelect", port), _line("CounterSelect", "0x0000")]
        for name in ("PortXmitData", "PortRcvData", "PortXmitPkts", "PortRcvPkts"):
            out.append(_line(name, r[name]))
        out.append(f"# PortVLXmitWaitCounters counters: Lid {lid} port {port}")
        out += [_line("PortSelect", port), _line("CounterSelect", "0x0000")]
        out += [_line(f"PortVLXmitWait{v}", r[f"PortVLXmitWait{v}"]) for v in range(vls)]
    return "\n".join(out) + "\n"


_HEADER = re.compile(r"^#\s*(Port counters|Port extended counters|PortVLXmitWaitCounters counters):\s*Lid\s+(\d+)\s+"
                     r"port\s+(\d+)")
_VALUE = re.compile(r"^([A-Za-z][A-Za-z0-9]*):\.*\s*(\S+)\s*$")
# What each block must hold for the comparison (a block cut short is a truncated dump).
_REQUIRED = {"Port counters": ("PortXmitWait",),
             "Port extended counters": ("PortXmitData", "PortRcvData", "PortXmitPkts", "PortRcvPkts"),
             "PortVLXmitWaitCounters counters": ()}


@dataclass
class Dump:
    """Counters read from perfquery output: (LID, port) -> counter -> value, and where each came from."""

    source: str
    counters: dict[tuple[int, int], dict[str, int]]
    lines: dict[tuple[int, int], int]


def read_dump(path: str | Path) -> Dump:
    source = str(path)
    try:
        data = read_bytes(path)
    except NotReadable as error:
        raise CounterDumpError(source, 0, str(error)) from None
    except OSError as error:
        raise CounterDumpError(source, 0, f"cannot read: {error.strerror or error}") from None
    if b"\0" in data:
        raise CounterDumpError(source, data[: data.index(b"\0")].count(b"\n") + 1, "binary data: expected perfquery output")
    return parse_dump(data.decode("utf-8", errors="replace"), source)


def parse_dump(text: str, source: str = "<perfquery>") -> Dump:
    """perfquery output, any number of blocks (`perfquery -l`, `-x`, `--vlxmitcounters`) for any
    ports, concatenated. Extended counters win over the basic block's 32-bit ones."""
    counters: dict[tuple[int, int], dict[str, int]] = {}
    lines: dict[tuple[int, int], int] = {}
    block: tuple[str, tuple[int, int], int] | None = None
    seen: set[str] = set()

    def close(number: int) -> None:
        if block is None:
            return
        kind, key, start = block
        missing = [n for n in _REQUIRED[kind] if n not in seen]
        if missing:
            raise CounterDumpError(source, start, f"{kind} of Lid {key[0]} port {key[1]} ends (line {number}) "
                                   f"without {', '.join(missing)}: a truncated dump?")

    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("ibwarn:"):
            continue
        header = _HEADER.match(line)
        if header:
            close(number)
            key = (int(header[2]), int(header[3]))
            block, seen = (header[1], key, number), set()
            counters.setdefault(key, {})
            lines.setdefault(key, number)
            continue
        if line.startswith("#"):
            continue
        value = _VALUE.match(line)
        if block is None or not value:
            raise CounterDumpError(source, number, f"expected perfquery output ('# Port extended counters: Lid L "
                                   f"port P' and 'Name:....value' lines), got {line[:60]!r}")
        name, text_value = value[1], value[2]
        try:
            number_value = int(text_value, 0)
        except ValueError:
            raise CounterDumpError(source, number, f"{name}: expected a number, got {text_value!r}") from None
        seen.add(name)
        if block[0] == "Port counters" and name in counters[block[1]]:
            continue  # the extended block's 64-bit value is kept
        counters[block[1]][name] = number_value
    close(len(text.splitlines()) + 1)
    if not counters:
        raise CounterDumpError(source, 0, "no perfquery counter blocks ('# Port extended counters: Lid L port P')")
    return Dump(source, counters, lines)


def compare(simulated: pa.Table, window_ns: float, before: Dump, after: Dump, interval_s: float,
            tick_bytes: int = TICK_BYTES) -> Any:
    """Per port the dumps cover: utilisation (transmitted bytes over what the link could carry)
    and wait (PortXmitWait time over the interval), measured on the cluster beside simulated."""
    import pandas as pd

    if interval_s <= 0:
        raise ValueError(f"--interval: expected seconds > 0, got {interval_s:g}")
    sim: dict[tuple[int, int], list[dict[str, Any]]] = {}
    for row in simulated.to_pylist():
        sim.setdefault((row["lid"], row["port"]), []).append(row)
    for dump in (before, after):
        for key, line in dump.lines.items():
            ports = sim.get(key, [])
            if not ports:
                node = next((f"{r[0]['node']} ({r[0]['node_guid']})" for k, r in sim.items() if k[0] == key[0]), None)
                raise CounterDumpError(dump.source, line, f"Lid {key[0]} port {key[1]} is not a port of the simulated "
                                       "fabric (LIDs come from its ibnetdiscover dump)" if node is None else
                                       f"Lid {key[0]} port {key[1]}: Lid {key[0]} is {node}, whose port {key[1]} is "
                                       "not cabled in the simulated fabric")
            if len(ports) > 1:  # the counters could belong to either: never pick one
                named = " and ".join(f"{r['node']} ({r['node_guid']})" for r in ports)
                raise CounterDumpError(dump.source, line, f"Lid {key[0]} port {key[1]} names {len(ports)} ports of the "
                                       f"simulated fabric, on {named}: their counters cannot be told apart (the "
                                       "scenario's ibnetdiscover dump gives them one LID, or the run is older than "
                                       "qoslab's numbering of LIDs past the dump's: run it again)")
    rows = []
    for key in sorted(set(before.counters) & set(after.counters)):
        a, b = before.counters[key], after.counters[key]
        s = sim[key][0]
        capacity_bytes_per_s = float(s["link_gbps"]) * 1e9 / 8
        real_bytes = 4 * (b.get("PortXmitData", 0) - a.get("PortXmitData", 0))
        real_wait = tick_bytes * (b.get("PortXmitWait", 0) - a.get("PortXmitWait", 0))
        rows.append({
            "node": s["node"], "node_guid": s["node_guid"], "lid": key[0], "port": key[1],
            "real_utilisation": real_bytes / (capacity_bytes_per_s * interval_s),
            "simulated_utilisation": 4 * float(s["PortXmitData"]) / (capacity_bytes_per_s * window_ns * 1e-9),
            "real_wait": real_wait / (capacity_bytes_per_s * interval_s),
            "simulated_wait": tick_bytes * float(s["PortXmitWait"]) / (capacity_bytes_per_s * window_ns * 1e-9),
        })
    if not rows:
        raise CounterDumpError(after.source, 0, f"no port appears in both {before.source} and {after.source}")
    table = pd.DataFrame(rows)
    for column, counter in (("real_utilisation", "PortXmitData"), ("real_wait", "PortXmitWait")):
        if (table[column] < 0).any():
            bad = table[table[column] < 0].iloc[0]
            raise CounterDumpError(after.source, after.lines[(bad["lid"], bad["port"])],
                                   f"Lid {bad['lid']} port {bad['port']}: {counter} went down between the dumps "
                                   "(counters reset, or the dumps in the wrong order)")
    return table


def comparison_figure(table: Any) -> Any:
    """Utilisation and wait per port, simulated against measured, with the diagonal."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(9.0, 4.2))
    for ax, what in zip(axes, ("utilisation", "wait")):
        real, sim = table[f"real_{what}"], table[f"simulated_{what}"]
        top = max(float(real.max()), float(sim.max()), 1e-9) * 1.05
        ax.plot([0, top], [0, top], color="grey", linewidth=0.8, linestyle="--")
        ax.scatter(real, sim, s=12)
        ax.set_xlabel(f"measured {what} (fraction of the link)")
        ax.set_ylabel(f"simulated {what}")
        ax.set_title(f"per port: {what}")
        ax.set_xlim(0, top)
        ax.set_ylim(0, top)
    fig.tight_layout()
    return fig
