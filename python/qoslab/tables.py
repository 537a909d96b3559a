"""A run's tables as the engine hands them over, described column by column, and the two things
done with a description: writing it as a Parquet file (by the engine, crates/qoslab-py/src/parquet.rs)
and building it as an Arrow table in memory (pyarrow, only when a caller asks for the table).

Both read the same description, so a table and its file cannot disagree. Writing needs neither
numpy nor pyarrow: a `qoslab run` does not import them (about 0.1 s of its start-up, issue 15).

A column is (name, kind, numpy dtype, little-endian bytes, extra):

- ``numbers``: the values as they are;
- ``names``: each value indexes ``extra``, a list of names (a string column);
- ``bool``: non-zero is true;
- ``masked``: the values, null where one equals ``extra``.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

Columns = dict[str, Any]  # from the engine: {name: (numpy dtype string, little-endian bytes)}
Column = tuple[str, str, str, bytes, Any]  # (name, kind, dtype, data, extra)

# output.rs NO_BECN: the mark's BECN had not reached its source when the run ended.
NO_BECN = 2**64 - 1
# The engine's NONE: no rank or tag (an open-loop traffic message).
NONE_U32 = 2**32 - 1


@dataclass(frozen=True)
class EngineTable:
    """One of a run's tables, as the engine produced it."""

    columns: tuple[Column, ...]

    def __post_init__(self) -> None:
        names = [c[0] for c in self.columns]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"columns {twice} are given twice")

    @property
    def num_rows(self) -> int:
        if not self.columns:
            return 0
        _, _, dtype, data, _ = self.columns[0]
        return len(data) // int(dtype[2:])

    def write(self, path: str | Path) -> None:
        """The table as a Parquet file at `path` (removed again if writing fails: OSError)."""
        from qoslab.simulate import write_parquet

        write_parquet(str(Path(path).expanduser()), list(self.columns))

    def values(self) -> dict[str, np.ndarray]:
        """Each column's values as the engine gave them (indices for names), as numpy arrays
        over its bytes in native byte order."""
        import numpy as np

        arrays = {}
        for name, _, dtype, data, _ in self.columns:
            values = np.frombuffer(data, dtype=np.dtype(dtype))
            arrays[name] = values if values.dtype.isnative else values.astype(values.dtype.newbyteorder("="))
        return arrays

    def to_arrow(self) -> pa.Table:
        """The same table in memory."""
        import pyarrow as pa

        from qoslab import arrow

        arrays = {}
        for (name, kind, _, _, extra), values in zip(self.columns, self.values().values()):
            if kind == "names":
                if len(values) and not (values.min() >= 0 and values.max() < len(extra)):
                    raise ValueError(f"column {name}: an index beyond its {len(extra)} names")  # as the writer says
                arrays[name] = arrow.take_strings(extra, values)
            elif kind == "bool":
                arrays[name] = arrow.booleans(values)
            elif kind == "masked":
                arrays[name] = arrow.masked_numbers(values, values != extra)
            else:
                arrays[name] = arrow.numbers(values)
        return pa.table(arrays)


def numbers(columns: Columns) -> EngineTable:
    """The engine's columns as they are."""
    return EngineTable(tuple((name, "numbers", dtype, data, None) for name, (dtype, data) in columns.items()))


def links(columns: Columns, nodes: list[str] | None, ports: dict[tuple[int, int], int] | None = None) -> EngineTable:
    """Node names (src, dst) in front of the engine's node index columns. With `ports`, (engine
    node, engine port) -> the port number to show: src_port and dst_port renumbered (an imported
    fabric's ports as its dump numbers them, Ibnetdiscover.ib_ports)."""
    out: list[Column] = []
    for name, (dtype, data) in columns.items():
        label = {"src_node": "src", "dst_node": "dst"}.get(name)
        if label is not None and nodes is not None:
            out.append((label, "names", dtype, data, nodes))
        if ports is not None and name in ("src_port", "dst_port"):
            data = _renumbered(columns[name[:3] + "_node"], (dtype, data), ports)
        out.append((name, "numbers", dtype, data, None))
    return EngineTable(tuple(out))


def _renumbered(nodes: tuple[str, bytes], ports: tuple[str, bytes], numbers: dict[tuple[int, int], int]) -> bytes:
    """A port column's values looked up by (node, port), without numpy (a run does not import it)."""
    from array import array

    if nodes[0] != "<u4" or ports[0] != "<u4" or array("I").itemsize != 4:
        raise ValueError(f"port columns: expected <u4 values, got {nodes[0]} and {ports[0]}")
    node, port = array("I", nodes[1]), array("I", ports[1])
    if sys.byteorder == "big":
        node.byteswap()
        port.byteswap()
    out = array("I", (numbers[key] for key in zip(node, port)))
    if sys.byteorder == "big":
        out.byteswap()
    return out.tobytes()


def ranks(columns: Columns, job_names: list[str]) -> EngineTable:
    """The job's name in front of the engine's job index column."""
    dtype, data = columns["job"]
    return EngineTable((("job_name", "names", dtype, data, job_names), *numbers(columns).columns))


def messages(columns: Columns, mpi_kinds: list[str]) -> EngineTable:
    """MPI messages' ranks and tag null for open-loop traffic, and the protocol part by name:
    `mpi_kinds` as the engine names them, then "traffic", the code past them that the engine
    writes for an open-loop message."""
    kinds = [*mpi_kinds, "traffic"]
    out: list[Column] = []
    for name, (dtype, data) in columns.items():
        if name in ("src_rank", "dst_rank", "tag"):
            out.append((name, "masked", dtype, data, NONE_U32))
        elif name == "mpi_kind":
            out.append((name, "names", dtype, data, kinds))
        else:
            out.append((name, "numbers", dtype, data, None))
    return EngineTable(tuple(out))


def cc_marks(columns: Columns) -> EngineTable:
    """`victim` as a boolean, `becn_ps` null where the BECN had not arrived when the run ended;
    both after the other columns."""
    rest = {name: value for name, value in columns.items() if name not in ("victim", "becn_ps")}
    return EngineTable((*numbers(rest).columns, ("victim", "bool", *columns["victim"], None),
                        ("becn_ps", "masked", *columns["becn_ps"], NO_BECN)))
