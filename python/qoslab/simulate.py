"""Scenario -> engine -> RunResult: the one module that calls the compiled engine (qoslab._engine,
typed in _engine.pyi), encodes what it is given (``encode``: an EngineConfig from
qoslab.engine_config as JSON) and maps its errors to the user's (``_config_errors``)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from qoslab import tables as engine_tables
from qoslab._version import __version__
from qoslab.errors import (
    ConfigError,
    Deadlock,
    Interrupted,
    ScenarioError,
    from_engine_config_error,
)
from qoslab.levels import link_level
from qoslab.scenario import Ibnetdiscover, Scenario
from qoslab.tables import Column, Columns, EngineTable

if TYPE_CHECKING:
    import pyarrow as pa

    from qoslab.engine_config import EngineConfig, RoutingConfig, TopologyConfig


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


# A run's tables, in the order save() writes them; links always, the others when the run has them.
TABLES = ("links", "messages", "ranks", "interference", "port_counters", "ccti", "cc_marks")


class _Table:
    """A RunResult attribute that is its table of the same name (`RunResult.table`)."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, result: RunResult, owner: type | None = None) -> pa.Table | None:
        return result.table(self.name)


class RunResult:
    """A run's summary and tables. The engine's tables stay as it handed them over until one is
    asked for (then it becomes a pyarrow Table, once): writing them needs no pyarrow
    (qoslab.tables). Each table is an attribute: `links`, and `messages` (with run.messages),
    `ranks` (per job, rank, run and iteration, when there are jobs), `interference` (per link, VL,
    victim and culprit, with run.interference), `port_counters` (per cabled port, perfquery's
    counters, with run.port_counters), `ccti` and `cc_marks` (with congestion_control.trace);
    None when the run has no such table."""

    def __init__(self, summary: dict[str, Any], tables: dict[str, EngineTable | pa.Table]) -> None:
        unknown = set(tables) - set(TABLES)
        if unknown or "links" not in tables:
            raise ValueError(f"a run's tables are {', '.join(TABLES)}, links among them; got {sorted(tables)}")
        self.summary = summary
        self._tables = tables  # as given: the engine's are written by the engine, built or not
        self._built: dict[str, pa.Table] = {}

    def table(self, name: str) -> pa.Table | None:
        """Table `name` (one of TABLES) as a pyarrow Table, or None when the run has none."""
        if name not in TABLES:
            raise KeyError(f"{name!r}: a run's tables are {', '.join(TABLES)}")
        table = self._tables.get(name)
        if isinstance(table, EngineTable):
            if name not in self._built:
                self._built[name] = table.to_arrow()
            return self._built[name]
        return table

    @property
    def links(self) -> pa.Table:
        """Per link and VL (every run has it)."""
        return cast("pa.Table", self.table("links"))

    messages = _Table()
    ranks = _Table()
    interference = _Table()
    port_counters = _Table()
    ccti = _Table()
    cc_marks = _Table()

    def save(self, out_dir: str | Path) -> Path:
        """Writes summary.json, links.parquet and (when there are any) messages.parquet,
        ranks.parquet and the other optional tables into out_dir."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        (out / "summary.json").write_text(json.dumps(self.summary, indent=2) + "\n")
        for name in TABLES:
            path = out / f"{name}.parquet"
            table = self._tables.get(name)
            if isinstance(table, EngineTable):
                table.write(path)
            elif table is not None:
                from qoslab import arrow

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

    def written(self) -> list[str]:
        """The files save() writes."""
        tables = [f"{name}.parquet" for name in TABLES if name in self._tables]
        counters = ["port_counters.txt"] if "port_counters" in self._tables else []
        return ["summary.json", *tables, *counters]

    # Short views for a terminal and a notebook: a run's summary holds every link's table.
    SUMMARY_KEYS = ("status", "sim_time_ns", "packets_delivered", "packet_hops", "accepted_load", "offered_load",
                    "hosts", "switches", "wall_seconds")

    def __repr__(self) -> str:
        s = self.summary
        tables = ", ".join(f"{name} ({table.num_rows} rows)" for name, table in self._tables.items())
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


Progress = Callable[[float, float, int], object]  # what it returns is not used


def simulate(scenario: Scenario, progress: Progress | None = None) -> RunResult:
    """Runs one scenario. Raises Interrupted or Deadlock (both carrying the partial result) if the
    run was stopped or its jobs can never finish. `progress(now_us, end_us, events)`, if given,
    is called about five times a second while the run lasts (`end_us`: where it ends at the
    latest; runs with jobs usually end earlier, when every job has finished)."""
    _expect_scenario(scenario, "simulate")
    if not scenario.traffic and not scenario.jobs:
        raise ScenarioError([("", "nothing to simulate: the scenario has no [[traffic]] and no [[jobs]] "
                                  "(qoslab check describes a fabric without simulating it)")], scenario.source)
    config = encode(scenario.to_engine_config())
    start = time.perf_counter()
    traces, replay_warnings = trace_programs(scenario)
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
    warnings = replay_warnings + shared_send_queue_warnings(summary)
    if warnings:  # only then: the summaries of runs without them stay as they were
        summary["warnings"] = warnings
    classes = scenario.class_names()
    if "interference" in summary:
        summary["interference"] = {key: {victim: dict(zip(classes, row)) for victim, row in zip(classes, matrix)}
                                   for key, matrix in summary["interference"].items()}

    ports = scenario.topology.ib_ports() if isinstance(scenario.topology, Ibnetdiscover) else None
    tables: dict[str, EngineTable | pa.Table] = {"links": engine_tables.links(raw["links"], raw.get("nodes"), ports)}
    if raw.get("messages") is not None:
        tables["messages"] = engine_tables.messages(raw["messages"], raw["mpi_kinds"])
    if raw.get("ranks") is not None:
        tables["ranks"] = engine_tables.ranks(raw["ranks"], scenario.job_names())
    if raw.get("interference") is not None:
        tables["interference"] = _interference_table(raw["interference"], raw.get("nodes"), raw["links"], classes)
    if raw.get("ccti") is not None:
        tables["ccti"] = engine_tables.numbers(raw["ccti"])
        tables["cc_marks"] = engine_tables.cc_marks(raw["cc_marks"])
    result = RunResult(summary, tables)
    if raw.get("port_waits") is not None:
        from qoslab.counters import port_counters

        waits = engine_tables.numbers(raw["port_waits"]).to_arrow()
        result._tables["port_counters"] = port_counters(scenario, engine_tables.numbers(raw["links"]).to_arrow(), waits)
    if summary.get("interrupted"):
        raise Interrupted(result)
    if summary.get("status") == "deadlock":
        raise Deadlock(result, summary["error"])
    return result


def write_parquet(path: str, columns: list[Column]) -> None:
    """A table described column by column (qoslab.tables) as a Parquet file, written by the engine:
    OSError when the file cannot be written (nothing of it is left)."""
    engine().write_parquet(path, columns)


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


def trace_programs(scenario: Scenario) -> tuple[dict[int, tuple[bytes, ...]], list[str]]:
    """Reads the trace of every trace-replay job: {job index: (offsets, ops[, comm_offsets,
    comm_members])} as the engine takes them, and a warning for each kind of MPI call its reader
    skipped or approximated (the replay is then not the traced program), naming the job's key."""
    programs: dict[int, tuple[bytes, ...]] = {}
    warnings: list[str] = []
    for i, job in enumerate(scenario.jobs):
        w = job.workload
        if w.kind != "trace":
            continue
        from qoslab.io.traces import read_trace

        base = scenario.source_dir
        ranks = len(scenario.placements()[i]) * job.ranks_per_node
        program = read_trace(w.path, w.format, w.cpu_speedup, key=f"jobs[{i}].workload.path",
                             source=scenario.source, base_dir=base, ranks=ranks)
        programs[i] = program.engine_arrays()
        # By the job's name: a study's runs number their jobs differently (an alone run has one).
        name = scenario.job_names()[i]
        warnings += [f"job {name!r}: {message} in its trace (see docs/traces.md)" for message in program.warnings]
    return programs, warnings


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
    _expect_scenario(scenario, "describe")
    return describe_with_warnings(scenario)[0]


def _expect_scenario(value: Any, call: str) -> None:
    # A dict or a path passed where a Scenario is expected failed deep inside with an AttributeError.
    if not isinstance(value, Scenario):
        raise TypeError(f"{call}: expected a qoslab.Scenario (Scenario.from_toml(path), Scenario.from_dict(data)), "
                        f"got {type(value).__name__}")
    value.unchanged()


def describe_with_warnings(scenario: Scenario) -> tuple[dict[str, Any], list[str]]:
    """`describe`, and what the readers of the scenario's traces skipped or approximated
    (trace_programs), from one reading of the traces."""
    traces, warnings = trace_programs(scenario)
    with _config_errors(scenario):
        return dict(engine().describe(encode(scenario.to_engine_config()), traces)), warnings



@contextmanager
def _config_errors(scenario: Scenario) -> Iterator[None]:
    """What only the engine can check is still the user's input: report it like validation."""
    try:
        yield
    except ConfigError as error:
        raise from_engine_config_error(error, scenario.source) from error


def _interference_table(columns: Columns, nodes: list[str] | None, links: Columns, classes: list[str]) -> pa.Table:
    """Victim and culprit by name, and each output port's link as in links.parquet (src, dst and,
    on a fat tree, its level and direction). The rows name few links many times over: each
    distinct link's ends and level are worked out once (numpy's unique), then repeated per row."""
    import numpy as np
    import pyarrow as pa

    from qoslab import arrow

    arrays = engine_tables.numbers(columns).values()
    link_arrays = engine_tables.numbers(links).values()
    node_of = dict(zip(link_arrays["link"].tolist(), zip(link_arrays["src_node"].tolist(),
                                                         link_arrays["dst_node"].tolist())))
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
        "link": arrow.numbers(arrays["link"]),
        "src": arrow.strings(per_row(src)),
        "dst": arrow.strings(per_row(dst)),
        "level": arrow.optional_numbers(per_row([lv[0] if lv else None for lv in levels]), "int32"),
        "direction": arrow.strings(per_row([lv[1] if lv else None for lv in levels])),
        "vl": arrow.numbers(arrays["vl"]),
        "wait_ns": arrow.numbers(arrays["wait_ns"]),
    })


def shared_send_queue_warnings(summary: dict[str, Any]) -> list[str]:
    """One line per job some of whose messages joined an HCA send queue holding another
    connection's messages: a host had more connections with messages waiting than queues, so an
    RTS or a short message could wait behind another rank's data, which queue pairs of their own
    would not. Without the count (it is in the summary), so that a study says it once per job."""
    from qoslab.scenario_network import MAX_HCA_SEND_QUEUES_PER_SL

    lanes = summary["scenario"]["fabric"]["hca_send_queues_per_sl"]
    if lanes < MAX_HCA_SEND_QUEUES_PER_SL:
        advice = f"raise it, up to {MAX_HCA_SEND_QUEUES_PER_SL}, for a queue pair per connection"
    else:
        # A real HCA holds thousands of QPs; the model's queue id is a byte.
        advice = (f"{MAX_HCA_SEND_QUEUES_PER_SL} is the model's most, where a real HCA has a queue pair per "
                  f"connection, so those messages may wait longer than they would")
    return [f"job {name!r}: some network messages waited in HCA send queues shared with other connections, as a "
            f"host had more connections with messages waiting than fabric.hca_send_queues_per_sl = {lanes} "
            f"(how many: jobs.{name}.network.shared_send_queue_messages in summary.json); {advice}"
            for name, job in summary.get("jobs", {}).items()
            if job.get("network", {}).get("shared_send_queue_messages", 0)]

