"""Scenario -> engine -> RunResult: the one module that calls the compiled engine (qoslab._engine,
typed in _engine.pyi), encodes what it is given (``encode``: an EngineConfig from
qoslab.engine_config as JSON) and maps its errors to the user's (``_config_errors``)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from qoslab import arrow
from qoslab._version import __version__
from qoslab.errors import (
    ConfigError,
    Deadlock,
    Interrupted,
    ScenarioError,
    from_engine_config_error,
)
from qoslab.levels import link_level
from qoslab.scenario import Scenario

if TYPE_CHECKING:
    from qoslab.engine_config import EngineConfig, RoutingConfig, TopologyConfig

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
    ranks: pa.Table | None = None  # per (job, rank, run, iteration), when there are jobs
    interference: pa.Table | None = None  # per (link, VL, victim, culprit), with run.interference
    port_counters: pa.Table | None = None  # per cabled port, perfquery's counters, with run.port_counters
    ccti: pa.Table | None = None  # per CCTI change, with run.cc_trace
    cc_marks: pa.Table | None = None  # per FECN mark and its BECN, with run.cc_trace

    def save(self, out_dir: str | Path) -> Path:
        """Writes summary.json, links.parquet and (when there are any) messages.parquet,
        ranks.parquet and the other optional tables into out_dir."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        (out / "summary.json").write_text(json.dumps(self.summary, indent=2) + "\n")
        arrow.write_parquet(self.links, out / "links.parquet")
        for name, table in self._optional():
            path = out / f"{name}.parquet"
            if table is not None:
                arrow.write_parquet(table, path)
            elif path.exists():
                path.unlink()  # a stale table from an earlier run would be mistaken for this one's
        text = out / "port_counters.txt"
        if self.port_counters is not None:
            from qoslab.counters import perfquery_text

            text.write_text(perfquery_text(self.port_counters))
        elif text.exists():
            text.unlink()
        return out

    def _optional(self) -> list[tuple[str, pa.Table | None]]:
        return [("messages", self.messages), ("ranks", self.ranks), ("interference", self.interference),
                ("port_counters", self.port_counters), ("ccti", self.ccti), ("cc_marks", self.cc_marks)]

    def written(self) -> list[str]:
        """The files save() writes."""
        optional = [f"{n}.parquet" for n, t in self._optional() if t is not None]
        optional += ["port_counters.txt"] if self.port_counters is not None else []
        return ["summary.json", "links.parquet", *optional]

    # Short views for a terminal and a notebook: a run's summary holds every link's table.
    SUMMARY_KEYS = ("status", "sim_time_ns", "packets_delivered", "packet_hops", "accepted_load", "offered_load",
                    "hosts", "switches", "wall_seconds")

    def __repr__(self) -> str:
        s = self.summary
        tables = ", ".join(f"{n} ({t.num_rows} rows)" for n, t in [("links", self.links), *self._optional()]
                           if t is not None)
        return (f"RunResult({s.get('scenario', {}).get('name') or 'scenario'!r}, {s.get('status')}, "
                f"{s.get('sim_time_ns', 0) / 1000:g} µs simulated, {s.get('packets_delivered', 0)} packets "
                f"delivered; tables: {tables})")

    def _repr_html_(self) -> str:
        import html

        rows = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(_short(self.summary[k]))}</td></tr>"
                       for k in self.SUMMARY_KEYS if k in self.summary)
        jobs = self.summary.get("jobs") or {}
        if jobs:
            rows += f"<tr><th>jobs</th><td>{html.escape(', '.join(map(str, jobs)))}</td></tr>"
        return f"<b>RunResult</b> ({html.escape(self.__repr__())})<table>{rows}</table>"


def _short(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


Progress = Callable[[float, float, int], None]


def simulate(scenario: Scenario, progress: Progress | None = None) -> RunResult:
    """Runs one scenario. Raises Interrupted or Deadlock (both carrying the partial result) if the
    run was stopped or its jobs can never finish. `progress(now_us, end_us, events)`, if given,
    is called about five times a second while the run lasts (`end_us`: where it ends at the
    latest; runs with jobs usually end earlier, when every job has finished)."""
    if not scenario.traffic and not scenario.jobs:
        raise ScenarioError([("", "nothing to simulate: the scenario has no [[traffic]] and no [[jobs]] "
                                  "(qoslab check describes a fabric without simulating it)")], scenario.source)
    config = encode(scenario.to_engine_config())
    start = time.perf_counter()
    traces = trace_programs(scenario)
    with _config_errors(scenario):
        raw = engine().run(config, traces, progress)
    wall_seconds = time.perf_counter() - start

    summary: dict[str, Any] = {
        "qoslab_version": __version__,
        "seed": scenario.seed,
        "scenario": scenario.resolved(),
    }
    summary.update(raw["summary"])
    summary["wall_seconds"] = wall_seconds  # measured here: includes building the fabric
    summary.setdefault("jobs", {})
    classes = scenario.class_names()
    if "interference" in summary:
        summary["interference"] = {key: {victim: dict(zip(classes, row)) for victim, row in zip(classes, matrix)}
                                   for key, matrix in summary["interference"].items()}

    result = RunResult(
        summary=summary,
        links=_links_table(raw["links"], raw.get("nodes")),
        messages=None if raw.get("messages") is None else columns_table(raw["messages"]),
        ranks=None if raw.get("ranks") is None else _ranks_table(raw["ranks"], scenario.job_names()),
        interference=None if raw.get("interference") is None else _interference_table(raw["interference"], raw.get("nodes"),
                                                                                      raw["links"], classes),
    )
    if raw.get("ccti") is not None:
        result.ccti = columns_table(raw["ccti"])
        result.cc_marks = _cc_marks_table(raw["cc_marks"])
    if raw.get("port_waits") is not None:
        from qoslab.counters import port_counters

        result.port_counters = port_counters(scenario, result.links, columns_table(raw["port_waits"]))
    if summary.get("interrupted"):
        raise Interrupted(result)
    if summary.get("status") == "deadlock":
        raise Deadlock(result, summary["error"])
    return result


def encode(config: EngineConfig | TopologyConfig | RoutingConfig) -> str:
    """The JSON the engine parses (what golden inputs and run results depend on: keep it stable)."""
    return json.dumps(config)


def check_engine_config(scenario: Scenario) -> tuple[str, str] | None:
    """The engine's verdict on a scenario's resolved config, without building its fabric:
    None, or (engine key, message) for the first rule it breaks. Scenario validation asks this
    (the engine owns the rules on resolved values; docs/design/engine-boundary.md). Without the
    compiled engine there is nobody to ask, and nothing could run: None."""
    try:
        check = engine().validate
    except ImportError:
        return None
    try:
        check(encode(scenario.to_engine_config()))
    except ConfigError as error:
        found = from_engine_config_error(error).problems[0]
        return found[0], found[1]
    return None


def bench_event_queue(pending: int, operations: int, seed: int = 1) -> dict[str, Any]:
    """The bare event list's hold-model speed at `pending` events (benchmarks/run.py)."""
    return dict(engine().bench_event_queue(int(pending), int(operations), int(seed)))


def trace_programs(scenario: Scenario) -> dict[int, tuple[bytes, ...]]:
    """Reads the trace of every trace-replay job: {job index: (offsets, ops[, comm_offsets,
    comm_members])} as the engine takes them."""
    programs: dict[int, tuple[bytes, ...]] = {}
    for i, job in enumerate(scenario.jobs):
        w = job.workload
        if w.kind != "trace":
            continue
        from qoslab.io.traces import read_trace

        base = Path(scenario.source).parent if scenario.source else None
        ranks = len(scenario.placements()[i]) * job.ranks_per_node
        program = read_trace(w.path, w.format, w.cpu_speedup, key=f"jobs[{i}].workload.path",
                             source=scenario.source, base_dir=base, ranks=ranks)
        programs[i] = program.engine_arrays()
    return programs


def cabling(scenario: Scenario, with_routes: bool = False) -> dict[str, Any]:
    """The cabling the scenario's topology builds (node names, ports, peers, link rates) and, with
    `with_routes`, every switch's forwarding table (`routes`), as the engine builds them."""
    routing = encode(scenario.engine_routing()) if with_routes else None
    with _config_errors(scenario):
        return dict(engine().fabric(encode(scenario.engine_topology()), routing))


def engine_version() -> str | None:
    """The compiled engine's version; None when it is not built."""
    try:
        return str(engine().version())
    except ImportError:
        return None


def describe(scenario: Scenario) -> dict[str, Any]:
    """The fabric the scenario builds (hosts, switches, links, levels, paths), without simulating."""
    traces = trace_programs(scenario)
    with _config_errors(scenario):
        return dict(engine().describe(encode(scenario.to_engine_config()), traces))


@contextmanager
def _config_errors(scenario: Scenario) -> Iterator[None]:
    """What only the engine can check is still the user's input: report it like validation."""
    try:
        yield
    except ConfigError as error:
        raise from_engine_config_error(error, scenario.source) from error


def columns_table(columns: Columns) -> pa.Table:
    """Engine columns -> Arrow table, without building a Python object per row (or importing
    pandas: qoslab.arrow)."""
    return _table(_arrays(columns))


def _table(arrays: dict[str, np.ndarray]) -> pa.Table:
    return pa.table({name: arrow.numbers(values) for name, values in arrays.items()})


def _arrays(columns: Columns) -> dict[str, np.ndarray]:
    """Engine columns as numpy arrays over their bytes, in native byte order."""
    arrays = {}
    for name, (dtype, data) in columns.items():
        values = np.frombuffer(data, dtype=np.dtype(dtype))
        if not values.dtype.isnative:
            values = values.astype(values.dtype.newbyteorder("="))
        arrays[name] = values
    return arrays


def _links_table(columns: Columns, nodes: list[str] | None) -> pa.Table:
    """Adds node names (src, dst) in front of the engine's node index columns."""
    arrays = _arrays(columns)
    table = _table(arrays)
    if nodes is None:
        return table
    for label, index in (("src", "src_node"), ("dst", "dst_node")):
        position = table.schema.get_field_index(index)
        if position >= 0:
            table = table.add_column(position, label, arrow.take_strings(nodes, arrays[index]))
    return table


def _interference_table(columns: Columns, nodes: list[str] | None, links: Columns, classes: list[str]) -> pa.Table:
    """Victim and culprit by name, and each output port's link as in links.parquet (src, dst and,
    on a fat tree, its level and direction). The rows name few links many times over: each
    distinct link's ends and level are worked out once (numpy's unique), then repeated per row."""
    arrays = _arrays(columns)
    table = _table(arrays)
    link_table = columns_table(links)
    node_of = dict(zip(link_table.column("link").to_pylist(), zip(link_table.column("src_node").to_pylist(),
                                                                  link_table.column("dst_node").to_pylist())))
    distinct, row_link = np.unique(arrays["link"], return_inverse=True)
    ends = [node_of.get(int(link), (None, None)) for link in distinct]
    src = [nodes[a] if nodes is not None and a is not None else None for a, _ in ends]
    dst = [nodes[b] if nodes is not None and b is not None else None for _, b in ends]
    levels = [link_level(a, b) if a is not None and b is not None else None for a, b in zip(src, dst)]

    def per_row(values: list[Any]) -> list[Any]:
        return [values[i] for i in row_link.tolist()]

    return pa.table({
        "kind": arrow.take_strings(["output", "buffer"], arrays["kind"]),
        "victim": arrow.take_strings(classes, arrays["victim"]),
        "culprit": arrow.take_strings(classes, arrays["culprit"]),
        "link": table.column("link"),
        "src": arrow.strings(per_row(src)),
        "dst": arrow.strings(per_row(dst)),
        "level": arrow.optional_numbers(per_row([lv[0] if lv else None for lv in levels]), "int32"),
        "direction": arrow.strings(per_row([lv[1] if lv else None for lv in levels])),
        "vl": table.column("vl"),
        "wait_ns": table.column("wait_ns"),
    })


def _ranks_table(columns: Columns, job_names: list[str]) -> pa.Table:
    """Adds the job's name in front of the engine's job index column."""
    arrays = _arrays(columns)
    table = _table(arrays)
    return table.add_column(0, "job_name", arrow.take_strings(job_names, arrays["job"]))


NO_BECN = 2**64 - 1  # output.rs NO_BECN: the mark's BECN had not reached its source by the end


def _cc_marks_table(columns: Columns) -> pa.Table:
    """`victim` as a boolean, `becn_ps` null where the BECN had not arrived when the run ended."""
    arrays = _arrays(columns)
    victim = arrays.pop("victim").astype(bool)
    becn = arrays.pop("becn_ps")
    table = _table(arrays)
    table = table.add_column(table.num_columns, "victim", arrow.booleans(victim))
    return table.add_column(table.num_columns, "becn_ps", arrow.masked_numbers(becn, becn != NO_BECN))
