"""Scenario -> engine -> RunResult: the one module that calls the compiled engine."""

from __future__ import annotations

import json
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from qoslab._version import __version__
from qoslab.errors import ConfigError, Interrupted, from_engine_config_error
from qoslab.scenario import Scenario

Columns = dict[str, Any]  # {name: (numpy dtype string, little-endian bytes)}


def engine() -> Any:
    """The compiled engine, imported on first use so that validation works without it."""
    try:
        from qoslab import _engine
    except ImportError as error:
        raise ImportError(
            "the compiled engine qoslab._engine is not available; build it with `maturin develop` "
            f"or install the qoslab wheel ({error})"
        ) from error
    return _engine


@dataclass
class RunResult:
    summary: dict[str, Any]
    links: pa.Table
    messages: pa.Table | None = None

    def save(self, out_dir: str | Path) -> Path:
        """Writes summary.json, links.parquet and (when recorded) messages.parquet into out_dir."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        (out / "summary.json").write_text(json.dumps(self.summary, indent=2) + "\n")
        pq.write_table(self.links, out / "links.parquet")
        messages = out / "messages.parquet"
        if self.messages is not None:
            pq.write_table(self.messages, messages)
        elif messages.exists():
            messages.unlink()  # a stale table from an earlier run would be mistaken for this one's
        return out


def simulate(scenario: Scenario) -> RunResult:
    """Runs one scenario. Raises Interrupted (with the partial result) if the run was stopped."""
    config = json.dumps(scenario.to_engine_config())
    start = time.perf_counter()
    with _config_errors(scenario):
        raw = engine().run(config)
    wall_seconds = time.perf_counter() - start

    summary: dict[str, Any] = {
        "qoslab_version": __version__,
        "seed": scenario.seed,
        "scenario": scenario.resolved(),
    }
    summary.update(raw["summary"])
    summary["wall_seconds"] = wall_seconds  # measured here: includes building the fabric
    summary.setdefault("jobs", {})

    result = RunResult(
        summary=summary,
        links=_links_table(raw["links"], raw.get("nodes")),
        messages=None if raw.get("messages") is None else columns_table(raw["messages"]),
    )
    if summary.get("interrupted"):
        raise Interrupted(result)
    return result


def describe(scenario: Scenario) -> dict[str, Any]:
    """The fabric the scenario builds (hosts, switches, links, levels, paths), without simulating."""
    with _config_errors(scenario):
        return dict(engine().describe(json.dumps(scenario.to_engine_config())))


@contextmanager
def _config_errors(scenario: Scenario) -> Iterator[None]:
    """What only the engine can check is still the user's input: report it like validation."""
    try:
        yield
    except ConfigError as error:
        raise from_engine_config_error(error, scenario.source) from error


def columns_table(columns: Columns) -> pa.Table:
    """Engine columns -> Arrow table, without building a Python object per row."""
    arrays = {}
    for name, (dtype, data) in columns.items():
        values = np.frombuffer(data, dtype=np.dtype(dtype))
        if not values.dtype.isnative:
            values = values.astype(values.dtype.newbyteorder("="))
        arrays[name] = pa.array(values)
    return pa.table(arrays)


def _links_table(columns: Columns, nodes: list[str] | None) -> pa.Table:
    """Adds node names (src, dst) in front of the engine's node index columns."""
    table = columns_table(columns)
    if nodes is None:
        return table
    names = pa.array(nodes, type=pa.string())
    for label, index in (("src", "src_node"), ("dst", "dst_node")):
        position = table.schema.get_field_index(index)
        if position >= 0:
            table = table.add_column(position, label, pc.take(names, table.column(index)))
    return table
