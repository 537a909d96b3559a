"""The qoslab command line: thin wrappers over Scenario, simulate and the demo study."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, Literal, cast

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from qoslab._version import __version__
from qoslab.errors import (
    ConfigError,
    DamagedRun,
    Deadlock,
    EngineError,
    FolderError,
    Interrupted,
    ScenarioError,
    from_engine_config_error,
)
from qoslab.scenario import Scenario

EXIT_USER_ERROR = 2
EXIT_ENGINE_ERROR = 3
EXIT_INTERRUPTED = 130
EXIT_DEADLOCK = 1
EXIT_RUNS_FAILED = 4  # a study finished, but some of its runs failed: its tables lack them

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="qoslab: packet-level InfiniBand fabric simulation with QoS (SL2VL, VL arbitration, credits).",
)
console = Console(highlight=False)
err_console = Console(stderr=True, soft_wrap=True, highlight=False)

ScenarioPath = Annotated[
    Path, typer.Argument(metavar="SCENARIO.toml", help="Scenario file (TOML).", show_default=False)
]
OutDir = Annotated[Path, typer.Option("--out", "-o", help="Output directory.")]
Overrides = Annotated[
    list[str] | None,
    typer.Option("--set", metavar="KEY=VALUE", help="Override a scenario key, e.g. fabric.data_vls=8 (repeatable)."),
]


def fail(message: str, code: int = EXIT_USER_ERROR) -> typer.Exit:
    # Text, not markup: keys like traffic[0].load would otherwise be read as rich tags.
    err_console.print(Text(message, style="red"))
    return typer.Exit(code)


@contextmanager
def user_errors(source: str | None = None) -> Iterator[None]:
    """Bad input -> exit 2 with a message naming file and key; engine bug -> exit 3; never a traceback."""
    try:
        yield
    except ScenarioError as error:
        raise fail(_each_line("error: ", str(error))) from None
    except ConfigError as error:  # an engine check not routed through simulate()/describe()
        raise fail(_each_line("error: ", str(from_engine_config_error(error, source)))) from None
    except EngineError as error:
        message = f"internal error in the qoslab engine (a bug, please report it): {error}"
        raise fail(message, EXIT_ENGINE_ERROR) from None
    except ImportError as error:
        raise fail(f"error: {error}", EXIT_ENGINE_ERROR) from None
    except KeyboardInterrupt:
        raise fail("interrupted", EXIT_INTERRUPTED) from None
    except (FolderError, DamagedRun) as error:
        raise fail(f"error: {error}") from None


def _each_line(prefix: str, text: str) -> str:
    return "\n".join(prefix + line for line in text.splitlines())


def warn(scenario: Scenario) -> None:
    for message in scenario.qos_warnings():
        err_console.print(f"[yellow]warning:[/yellow] {message}")


def load(path: Path, overrides: list[str] | None) -> Scenario:
    scenario = Scenario.from_toml(path)
    return scenario.with_overrides(overrides) if overrides else scenario


def _version_option(value: bool) -> None:
    if not value:
        return
    from qoslab.simulate import engine_version

    engine = engine_version()
    line = f"qoslab {__version__}" + (f" (engine {engine})" if engine else " (engine not built)")
    console.print(line)
    raise typer.Exit()


@app.callback()
def root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version_option, is_eager=True, help="Show the version and exit.")
    ] = False,
) -> None:
    """qoslab: packet-level InfiniBand fabric simulation with QoS."""


@app.command()
def run(scenario: ScenarioPath, out: OutDir = Path("qoslab-out"), overrides: Overrides = None) -> None:
    """Run one simulation; print a summary; write summary.json and Parquet tables to --out."""
    from qoslab.simulate import simulate

    with user_errors(str(scenario)):
        loaded = load(scenario, overrides)
        warn(loaded)
        try:
            with progress_display(loaded) as progress:
                result = simulate(loaded, progress)
        except Interrupted as stop:
            save(stop.result, out)
            raise fail(f"interrupted: partial results written to {out}/", EXIT_INTERRUPTED) from None
        except Deadlock as stuck:
            save(stuck.result, out)
            raise fail(f"error: {scenario}: {stuck}\npartial results written to {out}/", EXIT_DEADLOCK) from None
        save(result, out)
    print_summary(result.summary, str(scenario))
    console.print(f"wrote {', '.join(result.written())} to {out}/")
    if result.summary.get("status") == "time_limit":
        unfinished = [name for name, job in result.summary["jobs"].items() if not job["completed"]]
        err_console.print(Text(
            f"warning: job(s) {', '.join(unfinished)} did not finish within run.duration_us = "
            f"{loaded.run.duration_us:g}: their runtime is unknown; raise run.duration_us", style="yellow"))


@contextmanager
def progress_display(scenario: Scenario) -> Iterator[Callable[[float, float, int], None] | None]:
    """On a terminal, a status line on stderr while the run lasts: simulated time, events and,
    for open-loop runs (which end at run.duration_us), about how long is left."""
    if not err_console.is_terminal:
        yield None
        return
    start = time.monotonic()
    with err_console.status("simulating") as status:

        def report(now_us: float, end_us: float, events: int) -> None:
            text = f"simulated {now_us:,.1f} µs, {events / 1e6:,.1f} M events"
            if not scenario.jobs and now_us > 0:
                text += f", about {(time.monotonic() - start) * (end_us - now_us) / now_us:,.0f} s left"
            status.update(text)

        yield report


def save(result: Any, out: Path) -> None:
    try:
        result.save(out)
    except OSError as error:
        raise fail(f"error: {out}: cannot write results: {error.strerror or error}") from None


@app.command()
def check(
    scenario: ScenarioPath,
    overrides: Overrides = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the description as JSON (warnings still go to stderr).")] = False,
) -> None:
    """Validate a scenario and describe its fabric (hosts, switches, links, levels, paths, QoS
    tables and what their VL arbitration gives at the MTU) without simulating."""
    from qoslab.simulate import describe

    with user_errors(str(scenario)):
        loaded = load(scenario, overrides)
        fabric = describe(loaded)
    warn(loaded)
    if as_json:
        typer.echo(json.dumps(check_document(loaded, fabric, str(scenario)), indent=2))
        return
    console.print(Text.assemble(("ok", "green"), f": {scenario} is a valid scenario"))
    print_description(fabric)
    print_buffers(loaded)
    print_qos(loaded)
    print_arbitration(loaded.vl_arbitration())
    if loaded.jobs:
        print_placements(loaded)


def check_document(scenario: Scenario, fabric: dict[str, Any], path: str) -> dict[str, Any]:
    """`qoslab check --json`: what the plain check prints, as data."""
    from qoslab.scenario import _json_qos

    qos = {"data_vls": scenario.fabric.data_vls, "routing_vls": scenario.routing.vls or 1, "qos_vls": scenario.qos_vls(),
           **{port: _json_qos(scenario.port_qos(port)) for port in ("ca", "swe")}}
    document: dict[str, Any] = {"scenario": path, "valid": True, "fabric": fabric, "qos": qos,
                                "vl_arbitration": scenario.vl_arbitration(), "warnings": scenario.qos_warnings()}
    if scenario.jobs:
        document["jobs"] = placement_rows(scenario)
    return document


def _figure_formats_option(value: str | None) -> str | None:
    """--figures png,svg: known formats only, spaces and repeats dropped, PNG always kept."""
    from qoslab.study.model import FIGURE_FORMATS

    if value is None:
        return None
    formats = [f.strip().lower() for f in value.split(",") if f.strip()]
    unknown = [f for f in formats if f not in FIGURE_FORMATS]
    if unknown or not formats:
        raise typer.BadParameter(f"expected formats among {', '.join(FIGURE_FORMATS)}, comma-separated; "
                                 f"got {value!r}")
    return ",".join(dict.fromkeys(["png", *formats]))


@app.command()
def study(
    study_file: Annotated[
        Path | None, typer.Argument(metavar="[STUDY.toml]", help="Study file; none: the built-in default study.")
    ] = None,
    out: OutDir = Path("qoslab-out"),
    scheduler: Annotated[
        str | None, typer.Option("--scheduler", metavar="ADDRESS", help="Run on this Dask scheduler (tcp://host:8786).")
    ] = None,
    workers: Annotated[
        int | None, typer.Option("--workers", min=1, help="Local worker processes (default: every core).")
    ] = None,
    plan: Annotated[bool, typer.Option("--plan", help="Print the study's size (runs, hosts, jobs) and write "
                                       "plan.json to --out; simulate nothing.")] = False,
    figures: Annotated[
        str | None, typer.Option("--figures", metavar="FORMATS", callback=_figure_formats_option,
                                    help="Figure formats for figures/, comma-separated: png, svg, pdf (PNG is always "
                                    "written); overrides the study file's figure_formats.")
    ] = None,
) -> None:
    """Compare QoS policies: every job alone and all together under each policy; tables, figures
    and report.html to --out. Finished runs are kept, so an interrupted study resumes."""
    from qoslab.study.model import FigureFormat
    from qoslab.study.runner import StudyRunner
    from qoslab.study.tail_model import TailStudy

    with user_errors(str(study_file) if study_file else None):
        if study_file is None:
            from qoslab.study.default import default_study

            loaded = default_study()
        else:
            from qoslab.study import load_study

            loaded = load_study(study_file)
        for message in getattr(loaded, "warnings", list)():
            err_console.print(Text(f"warning: {message}", style="yellow"))
        if figures is not None:
            loaded.figure_formats = cast(list[FigureFormat], figures.split(","))
        if plan:
            return _plan(loaded, out)
        if isinstance(loaded, TailStudy):
            assert study_file is not None
            return _tail_study(loaded, study_file, out, scheduler, workers)
        with _study_executor(loaded.executor, scheduler, workers, out) as executor:
            console.print(f"study [bold]{loaded.title()}[/bold]: {len(loaded.concrete_policies())} policies, "
                          f"{len(loaded.seed_list())} repetition(s), {executor.workers} workers; results in {out}/")
            outcome = StudyRunner(loaded, out, executor, console).run()
    print_study(outcome)
    _exit_on_failed_runs(outcome.tables["runs"], outcome.runs_total, out)


def _plan(loaded: Any, out: Path) -> None:
    """`qoslab study --plan`: the study's size, printed and written to plan.json."""
    from qoslab.study.plan import study_size
    from qoslab.study.tail_model import TailStudy
    from qoslab.study.tail_plan import TailPlan

    if isinstance(loaded, TailStudy):
        from qoslab.io.scheduler import SchedulerLogError

        try:  # reading and mapping its scheduler log, as a run would
            size = TailPlan(loaded).size()
        except ScenarioError:
            raise  # names the study file and key already (user_errors)
        except SchedulerLogError as error:
            raise fail(f"error: {error}") from None
        except ValueError as error:  # e.g. background.host_names not matching the fabric
            raise fail(f"error: {loaded.source}: {error}") from None
    else:
        size = study_size(loaded)
    size = {"study": loaded.title(), **size}
    try:
        out.mkdir(parents=True, exist_ok=True)
        (out / "plan.json").write_text(json.dumps(size, indent=2) + "\n")
    except OSError as error:
        raise fail(f"error: {out}: cannot write plan.json: {error.strerror or error}") from None
    console.print(f"study [bold]{size['study']}[/bold]: {size['runs']} runs on {size['hosts']} hosts")
    table = Table(title="jobs", title_justify="left")
    for column in ("job", "nodes", "ranks per node", "ranks"):
        table.add_column(column, justify="left" if column == "job" else "right")
    for name, job in size["jobs"].items():
        table.add_row(name, str(job["nodes"]), str(job["ranks_per_node"]), str(job["ranks"]))
    console.print(table)
    if "alone_runs" in size:
        searches = "".join(f", search {k}: at most {v}" for k, v in size["search_runs"].items())
        console.print(f"{size['repetitions']} repetition(s): {size['alone_runs']} alone runs, "
                      f"{size['shared_runs']} shared runs ({len(size['policies'])} policies){searches}")
    else:
        low, high = size["background_jobs"]
        targets = f" x {len(size['targets'])} targets" if len(size["targets"]) > 1 else ""
        console.print(f"{size['snapshots']} background snapshots{targets} x {len(size['localities'])} localities x "
                      f"{len(size['routings'])} routings ({size['not_placed']} with no room for the measured job); "
                      f"{low} to {high} background jobs per run")
    console.print(f"wrote {out}/plan.json (nothing simulated)")


@contextmanager
def _study_executor(cfg: Any, scheduler: str | None, workers: int | None, out: Path) -> Iterator[Any]:
    """The executor a study file's [executor] table asks for, as overridden on the command line,
    for the length of a study run; an interruption or an unwritable output ends it with a message."""
    from qoslab.sweep.executors import make_executor

    try:
        executor = make_executor("dask" if scheduler else cfg.kind, workers or cfg.workers,
                                 scheduler or cfg.scheduler, cfg.slurm)
    except (OSError, TimeoutError, ValueError) as error:
        raise fail(f"error: cannot reach the Dask scheduler {scheduler or cfg.scheduler}: {error}") from None
    try:
        yield executor
    except KeyboardInterrupt:
        raise fail(f"interrupted: finished runs are kept in {out}/runs; run the same command to resume",
                   EXIT_INTERRUPTED) from None
    except OSError as error:
        raise fail(f"error: {out}: cannot write results: {error.strerror or error}") from None
    finally:
        executor.close()


def _tail_study(loaded: Any, study_file: Path, out: Path, scheduler: str | None, workers: int | None) -> None:
    """`qoslab study` on a ``kind = "tail-latency"`` file (docs/dragonfly.md)."""
    from qoslab.io.scheduler import SchedulerLogError
    from qoslab.study.tail_runner import TailStudyRunner

    with user_errors(str(study_file)), _study_executor(loaded.executor, scheduler, workers, out) as executor:
        try:
            runner = TailStudyRunner(loaded, out, executor, console)
            targets = f" x {len(runner.targets)} targets" if loaded.several_targets else ""
            console.print(f"tail-latency study [bold]{loaded.title()}[/bold]: {loaded.snapshots} background snapshots"
                          f"{targets} x {len(loaded.localities)} localities x {len(loaded.routings)} routings, "
                          f"{executor.workers} workers; results in {out}/")
            outcome = runner.run()
        except ScenarioError:
            raise  # names the study file and key already (user_errors)
        except SchedulerLogError as error:
            raise fail(f"error: {error}") from None
        except ValueError as error:  # e.g. background.host_names not matching the fabric
            raise fail(f"error: {study_file}: {error}") from None
    import math

    from qoslab.analysis.tail import compare_groups
    from qoslab.report.tail import BY, with_background_label

    iterations = outcome.tables["tail_iterations"]
    by = ["target", *BY] if loaded.several_targets else BY  # one [target]: the table it always printed
    if len(iterations):
        summary = compare_groups(with_background_label(iterations), by=by)
        table = Table(title="iteration latency (ns)", title_justify="left")
        for column in by + ["runs' iterations", "p50", "p99", "p99/p50", "bimodal"]:
            table.add_column(column)
        for row in summary.to_dict("records"):
            table.add_row(*(str(row[k]) for k in by), f"{row['count']:.0f}", f"{row['p50']:,.0f}", f"{row['p99']:,.0f}",
                          f"{row['p99_over_p50']:.2f}", str(row["bimodal"]))
        console.print(table)
    correlations = outcome.tables.get("tail_correlations")
    if correlations is not None and loaded.several_targets and len(correlations):
        table = Table(title="b against each run's median latency", title_justify="left")
        for column in ("target", "locality", "routing", "runs", "Pearson r", "Spearman rho"):
            table.add_column(column)
        for row in correlations.to_dict("records"):
            table.add_row(row["target"], row["locality"], row["routing"], str(row["runs"]),
                          *("-" if math.isnan(row[k]) else f"{row[k]:.2f}" for k in ("pearson_r", "spearman_rho")))
        console.print(table)
    for row in outcome.failed:
        who = f"{row['target']} " if loaded.several_targets else ""
        err_console.print(Text(f"warning: {who}snapshot {row['snapshot']} {row['locality']}/{row['routing'] if isinstance(row['routing'], str) else 'any routing'}: "
                               f"{row['status']}: {row['error']}", style="yellow"))
    if outcome.report_error:
        err_console.print(Text(f"warning: the report could not be written ({outcome.report_error}); the tables are "
                               f"in {out}/", style="yellow"))
    console.print(f"{outcome.runs_total} runs ({outcome.runs_reused} reused); report: {out}/report.html")
    _exit_on_failed_runs(outcome.tables["tail_runs"], outcome.runs_total, out)


def _exit_on_failed_runs(runs: Any, total: int, out: Path) -> None:
    """A study whose runs failed (an error, not a deadlock or time limit, which are results) exits
    non-zero, saying how many: a script must not take its tables as complete."""
    failed = int((runs["status"] == "error").sum()) if len(runs) else 0
    if failed:
        raise fail(f"error: {failed} of {total} runs failed (listed above, with their errors, and in the runs table in {out}/). "
                   "Run the same command again to retry them", EXIT_RUNS_FAILED)


export_app = typer.Typer(no_args_is_help=True, help="Write a fabric or a QoS policy in the real tools' formats.")
import_app = typer.Typer(no_args_is_help=True, help="Read the real tools' configuration back into qoslab terms.")
app.add_typer(export_app, name="export")
app.add_typer(import_app, name="import")


@export_app.command("opensm")
def export_opensm_command(
    source: Annotated[Path, typer.Argument(metavar="SCENARIO.toml|STUDY_OUT",
                                           help="A scenario, or a study's output folder.", show_default=False)],
    out: OutDir = Path("qoslab-opensm"),
    policy: Annotated[str | None, typer.Option(help="Study policy to export (default: the least total contention "
                                                       "among policies MPI settings alone can deploy).")] = None,
    repetition: Annotated[int, typer.Option(help="Study repetition whose placement names the port groups.")] = 0,
    policy_file: Annotated[str, typer.Option(help="Where OpenSM will find qos-policy.conf.")] = "/etc/opensm/qos-policy.conf",
    base: Annotated[Path | None, typer.Option(help="An opensm.conf (or `opensm -c` template) to merge the QoS "
                                                      "options into; written whole to --out.")] = None,
    overrides: Overrides = None,
) -> None:
    """opensm.conf (complete, or merged into --base), qos-policy.conf, per-job MPI environment, a
    Slurm TaskProlog, per-rank SL wrappers where a policy needs them, and what the MPI side must do."""
    from qoslab.deploy import ExportError, export_opensm, study_scenario
    from qoslab.io.opensm import OpenSmConfError, read_opensm_conf

    with user_errors(str(source)):
        try:
            base_text = None
            if base is not None:
                read_opensm_conf(base)  # refuses a binary or non-OpenSM file by name
                base_text = base.read_text()
            if source.is_dir():
                choice = study_scenario(source, policy, repetition)
                scenario, label = choice.scenario, choice.policy
                console.print(Text(f"exporting policy {label!r}: {choice.why}"))
            else:
                scenario, label = load(source, overrides), policy or ""
            bundle = export_opensm(scenario, out, label, policy_file, base_text, str(base) if base else "opensm.conf")
        except (ExportError, OpenSmConfError) as error:
            raise fail(f"error: {error}") from None
        except OSError as error:
            raise fail(f"error: {out}: cannot write: {error.strerror or error}") from None
    for path in bundle.written:
        console.print(f"wrote {path}")
    for warning in bundle.warnings:
        err_console.print(Text(f"warning: {warning}", style="yellow"))
    if bundle.mpi_side:
        err_console.print(Text("\nWARNING: configuration alone does not deploy this policy. The MPI side must:",
                               style="bold red"))
        for line in bundle.mpi_side:
            err_console.print(Text(f"  - {line}", style="red"))
        err_console.print(Text(f"(also at the top of {out}/README.md)", style="red"))


@export_app.command("fabric")
def export_fabric_command(
    scenario: ScenarioPath,
    format: Annotated[str, typer.Option("--format", help="ibsim (a net file for ibsim -s) or ibnetdiscover.")] = "ibsim",
    out: Annotated[Path | None, typer.Option("--out", "-o", help="File to write (default: standard output).")] = None,
    overrides: Overrides = None,
) -> None:
    """The scenario's fabric as an ibsim net file or ibnetdiscover text, for the real tools."""
    from qoslab.io.ibnetdiscover import write_ibnetdiscover, write_ibsim

    writers = {"ibsim": write_ibsim, "ibnetdiscover": write_ibnetdiscover}
    if format not in writers:
        raise fail(f"error: --format: expected ibsim or ibnetdiscover, got {format!r}")
    with user_errors(str(scenario)):
        loaded = load(scenario, overrides)
        try:
            text = writers[format](loaded.tool_fabric())
        except ValueError as error:
            raise fail(f"error: {scenario}: fabric.link_gbps: {error}") from None
    if out is None:
        typer.echo(text, nl=False)
    else:
        try:
            out.write_text(text)
        except OSError as error:
            raise fail(f"error: {out}: cannot write: {error.strerror or error}") from None
        console.print(f"wrote {out}")


@import_app.command("opensm")
def import_opensm_command(
    conf: Annotated[Path, typer.Argument(metavar="OPENSM.conf", help="An opensm.conf (or fragment).", show_default=False)],
    routing_vls: Annotated[int, typer.Option(
        "--routing-vls", min=1, help="Routing VL layers the tables were written for (a Dragonfly+ with "
        "valiant/adaptive routing: 2); their copies fold back into one QoS table.")] = 1,
) -> None:
    """Prints the [qos] tables (and fabric.data_vls) a scenario needs to simulate what OpenSM
    would program from this file; OpenSM's wrapping and truncation are warned about by line."""
    from qoslab.io.opensm import OpenSmConfError, read_opensm_conf

    try:
        qos = read_opensm_conf(conf).fold_routing_layers(routing_vls)
    except OpenSmConfError as error:
        raise fail(f"error: {error}") from None
    for w in qos.warnings:
        err_console.print(Text(f"warning: {w}", style="yellow"))
    guess = qos.layered_guess() if routing_vls == 1 else None
    if guess:
        err_console.print(Text(f"warning: {conf}: every VLArb entry is repeated for VL + {qos.data_vls // guess}, as "
                               f"qoslab exports tables for routing.vls = {guess} (a Dragonfly+); if so, pass "
                               f"--routing-vls {guess} to fold the copies back", style="yellow"))
    lines = ["[fabric]", f"data_vls = {qos.data_vls}", ""]
    if qos.routing_vls > 1:
        lines += ["[routing]", f"vls = {qos.routing_vls}", ""]
    for port, tables in qos.scenario_qos().items():
        lines.append(f"[qos.{port}]")
        for key, value in tables.items():
            lines.append(f"{key} = {json.dumps(value)}")
        lines.append("")
    typer.echo("\n".join(lines))


@app.command("compare-counters")
def compare_counters_command(
    run_out: Annotated[Path, typer.Argument(metavar="RUN_OUT", help="A `qoslab run` output with run.port_counters = true.",
                                            show_default=False)],
    before: Annotated[Path, typer.Argument(metavar="BEFORE", help="perfquery output taken at the interval's start.",
                                           show_default=False)],
    after: Annotated[Path, typer.Argument(metavar="AFTER", help="perfquery output taken at its end.", show_default=False)],
    interval: Annotated[float, typer.Option("--interval", help="Seconds between the two dumps.")] = 0.0,
    tick_bytes: Annotated[int, typer.Option(help="Bytes of link time per PortXmitWait tick: 8 on Quantum switches, "
                                                 "32 x lanes on Switch-IB.")] = 8,
    out: OutDir = Path("qoslab-counters"),
) -> None:
    """Per-port utilisation and wait measured on a cluster (two perfquery dumps over an interval)
    beside the simulated run's: a table (comparison.csv) and a figure (comparison.png)."""
    import pyarrow.parquet as pq

    from qoslab.counters import CounterDumpError, compare, comparison_figure, read_dump

    counters = run_out / "port_counters.parquet"
    if not counters.is_file():
        raise fail(f"error: {counters}: missing; run the scenario with run.port_counters = true "
                   f"(qoslab run SCENARIO --set run.port_counters=true --out {run_out})")
    if interval <= 0:
        raise fail(f"error: --interval: expected the seconds between {before} and {after} (> 0), got {interval:g}")
    if tick_bytes < 1:
        raise fail(f"error: --tick-bytes: expected a positive number of bytes, got {tick_bytes}")
    try:
        summary = json.loads((run_out / "summary.json").read_text())
        window_ns = summary["window_ns"][1] - summary["window_ns"][0]
        table = compare(pq.read_table(counters), window_ns, read_dump(before), read_dump(after), interval, tick_bytes)
    except CounterDumpError as error:
        raise fail(f"error: {error}") from None
    except (OSError, ValueError, KeyError) as error:
        raise fail(f"error: {run_out}: cannot read the run's summary or counters ({error})") from None
    try:
        out.mkdir(parents=True, exist_ok=True)
        table.to_csv(out / "comparison.csv", index=False)
        comparison_figure(table).savefig(out / "comparison.png", dpi=110)
    except OSError as error:
        raise fail(f"error: {out}: cannot write: {error.strerror or error}") from None
    shown = Table(title="per port: measured against simulated", title_justify="left")
    for column in ("node", "port", "lid", "real util", "sim util", "real wait", "sim wait"):
        shown.add_column(column, justify="left" if column == "node" else "right")
    for r in table.itertuples(index=False):
        shown.add_row(str(r.node), str(r.port), str(r.lid), f"{r.real_utilisation:.3f}", f"{r.simulated_utilisation:.3f}",
                      f"{r.real_wait:.3f}", f"{r.simulated_wait:.3f}")
    console.print(shown)
    console.print(f"wrote {out}/comparison.csv and {out}/comparison.png")


@app.command()
def validate(
    write: Annotated[
        Path | None, typer.Option("--write", metavar="FILE", help="Also write the results as a Markdown page.")
    ] = None,
) -> None:
    """Check the engine against closed-form results (latency, bandwidth, arbitration, queueing)."""
    from qoslab import validation

    checks = validation.run_all()
    table = Table(title="validation against closed forms")
    for column in ("check", "expected", "measured", "result"):
        table.add_column(column)
    for c in checks:
        table.add_row(c.name, f"{c.expected:.4f} {c.unit}", f"{c.measured:.4f} {c.unit}",
                      "pass" if c.ok else "[red]FAIL[/red]")
    console.print(table)
    if write is not None:
        header = write.read_text().split(validation.TABLE_MARKER)[0] if write.exists() else ""
        write.write_text(header + validation.TABLE_MARKER + "\n\n" + validation.markdown(checks))
    failed = sum(not c.ok for c in checks)
    if failed:
        raise fail(f"{failed} of {len(checks)} checks failed", 1)


# ------------------------------------------------------------------------------------------------
# printing


def fmt(value: Any, scale: float = 1.0, digits: int = 3) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value / scale:.{digits}g}" if abs(value / scale) < 10 ** digits else f"{value / scale:,.0f}"
    return str(value)


def print_summary(summary: dict[str, Any], title: str) -> None:
    latency = summary.get("latency_ns") or {}
    wall = summary.get("wall_seconds") or 0.0
    hops_per_s = summary.get("packet_hops", 0) / wall if wall > 0 else None
    table = Table(title=title, show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column(justify="right")
    rows = [
        ("hosts / switches / links", " / ".join(fmt(summary.get(k)) for k in ("hosts", "switches", "links"))),
        ("simulated time (us)", fmt(summary.get("sim_time_ns"), 1e3, 4)),
        ("offered load", fmt(summary.get("offered_load"))),
        ("accepted load", fmt(summary.get("accepted_load"))),
        ("latency p50 / p99 (us)", f"{fmt(latency.get('p50'), 1e3)} / {fmt(latency.get('p99'), 1e3)}"),
        ("events", fmt(summary.get("events"))),
        ("wall time (s)", fmt(wall)),
        ("packet-hops per second", fmt(hops_per_s)),
    ]
    for label, value in rows:
        table.add_row(label, value)
    console.print(table)

    by_sl = summary.get("by_sl") or {}
    if by_sl:
        per_sl = Table(title="per service level", title_justify="left")
        for column in ("SL", "offered load", "accepted load", "p50 (us)", "p99 (us)", "max (us)"):
            per_sl.add_column(column, justify="right")
        for sl, figures in sorted(by_sl.items(), key=lambda item: int(item[0])):
            lat = figures.get("latency_ns") or {}
            per_sl.add_row(
                sl,
                fmt(figures.get("offered_load")),
                fmt(figures.get("accepted_load")),
                fmt(lat.get("p50"), 1e3),
                fmt(lat.get("p99"), 1e3),
                fmt(lat.get("max"), 1e3),
            )
        console.print(per_sl)
    jobs = summary.get("jobs") or {}
    if jobs:
        per_job = Table(title="jobs", title_justify="left")
        for column in ("job", "ranks", "runtime us", "runs", "iters", "iter p50/p99 us", "in MPI", "MiB sent"):
            per_job.add_column(column, justify="right")
        for name, job in jobs.items():
            it = job.get("rank_iteration_ns") or {}
            per_job.add_row(
                name, fmt(job.get("ranks")), fmt(job.get("runtime_us")), fmt(job.get("runs_completed")),
                fmt(job.get("iterations")), f"{fmt(it.get('p50'), 1e3)} / {fmt(it.get('p99'), 1e3)}",
                f"{100 * job.get('mpi_wait_fraction', 0.0):.0f}%", fmt(job.get("bytes_sent", 0) / 2**20),
            )
        console.print(per_job)
    if summary.get("interrupted"):
        console.print(Text("the run was interrupted: figures cover the simulated time only", style="yellow"))


def print_study(outcome: Any) -> None:
    from qoslab.study.results import policy_table

    table = Table(title="policies (mean over repetitions)", title_justify="left")
    rows = policy_table(outcome.tables, outcome.policies)
    if rows.empty:
        console.print(Text("no policy has a complete set of runs to compare", style="yellow"))
    else:
        for column in rows.columns:
            if column == "policy":
                table.add_column(column, overflow="fold")  # names are the point: wrap, never cut
            else:
                table.add_column(column, justify="right")
        for record in rows.itertuples(index=False):
            table.add_row(*(Text(fmt(v)) for v in record))  # Text: policy names hold [brackets]
        console.print(table)
    reused = f" ({outcome.runs_reused} reused from an earlier run)" if outcome.runs_reused else ""
    console.print(f"{outcome.runs_total} runs{reused}; wrote {', '.join(p.name for p in outcome.written)} to {outcome.out}/")
    if outcome.report_error:
        err_console.print(Text(f"warning: the analysis or report could not be written (a bug, please report it): "
                               f"{outcome.report_error}; the run tables are in {outcome.out}/", style="yellow"))
    for row in outcome.failed:
        label = f"{row['alone_job']} alone" if isinstance(row["alone_job"], str) else row["policy"]
        err_console.print(Text(f"warning: run {row['run_id']} ({label}, repetition {row['repetition']}): "
                               f"{row['status']}: {row['error']}", style="yellow"))


def placement_rows(scenario: Scenario) -> list[dict[str, Any]]:
    """Each job's placement: name, workload, nodes, ranks, SL, Dragonfly+ groups or tree leaves
    (where the topology has them) and hosts."""
    groups = scenario.host_groups()
    per_leaf = scenario.hosts_per_leaf() if scenario.topology.kind in ("xgft", "single-switch", "dragonfly-plus") else None
    rows = []
    for job, name, hosts in zip(scenario.jobs, scenario.job_names(), scenario.placements()):
        row: dict[str, Any] = {"job": name, "workload": job.workload.kind, "nodes": len(hosts),
                               "ranks": len(hosts) * job.ranks_per_node, "sl": job.sl}
        if groups is not None:
            row["groups"] = sorted({groups[h] for h in hosts})
        if per_leaf:
            row["leaves"] = len({h // per_leaf for h in hosts})
        row["hosts"] = list(hosts)
        rows.append(row)
    return rows


def print_placements(scenario: Scenario) -> None:
    from qoslab.host_lists import compact

    table = Table(title="jobs", title_justify="left")
    rows = placement_rows(scenario)
    columns = [c for c in ("job", "workload", "nodes", "ranks", "sl", "groups", "leaves", "hosts") if c in rows[0]]
    for column in columns:
        table.add_column("SL" if column == "sl" else column)
    for row in rows:
        table.add_row(*(compact(row[c]) if c in ("groups", "hosts") else str(row[c]) for c in columns))
    console.print(table)


def print_description(fabric: dict[str, Any]) -> None:
    """Whatever the engine describes: scalars in one table, lists of records as their own tables."""
    scalars = Table(title="fabric", show_header=False, title_justify="left")
    scalars.add_column(style="bold")
    scalars.add_column()
    records: list[tuple[str, list[dict[str, Any]]]] = []
    for key, value in fabric.items():
        if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            records.append((key, value))
        elif isinstance(value, (dict, list)):
            scalars.add_row(key, json.dumps(value))
        else:
            scalars.add_row(key, fmt(value))
    console.print(scalars)
    for key, rows in records:
        columns = list(dict.fromkeys(k for row in rows for k in row))
        table = Table(title=key, title_justify="left")
        for column in columns:
            table.add_column(column, justify="right")
        for row in rows:
            table.add_row(*(fmt(row.get(c)) for c in columns))
        console.print(table)


def print_buffers(scenario: Scenario) -> None:
    from qoslab.scenario import CREDIT_BYTES

    f = scenario.fabric
    per_vl = f.buffer_per_vl()
    share = f"{per_vl:,} bytes ({per_vl // CREDIT_BYTES} credits) per VL"
    if f.vl_buffer_bytes is None:
        text = f"{f.port_buffer_bytes:,} bytes per port (fabric.port_buffer_bytes), divided among {f.data_vls} data VLs: {share}"
    else:
        text = f"{share} (fabric.vl_buffer_bytes), {per_vl * f.data_vls:,} bytes per port with {f.data_vls} data VLs"
    console.print(Text.assemble(("input buffers: ", "bold"), text))


def print_qos(scenario: Scenario) -> None:
    title = f"QoS ({scenario.fabric.data_vls} data VLs)"
    layers, step = scenario.routing.vls or 1, scenario.qos_vls()
    if layers > 1:
        title += (f": routing uses {layers} VL layers, so QoS has VL0..VL{step - 1} and VL v + {step} "
                  f"carries VL v's traffic on the next layer, with its weight")
    table = Table(title=title, title_justify="left")
    for column in ("ports", "SL2VL (SL0..15)", "VLArb high", "VLArb low", "high_limit"):
        table.add_column(column)
    for port, label in (("ca", "HCA"), ("swe", "switch")):
        q = scenario.port_qos(cast(Literal["ca", "swe"], port))
        table.add_row(
            label, _sl2vl(q["sl2vl"]), _arb(q["vlarb_high"]), _arb(q["vlarb_low"]), str(q["high_limit"])
        )
    console.print(table)


def print_arbitration(arbitration: dict[str, Any]) -> None:
    """What the VLArb tables give at the MTU: per VL, the weights and the share of a saturated
    port with every VL of the table backlogged (port types with the same tables share rows)."""
    ports = {"ca": "HCA", "swe": "switch"}
    if arbitration["ca"] == arbitration["swe"]:
        groups = [("HCA, switch", arbitration["ca"])]
    else:
        groups = [(label, arbitration[port]) for port, label in ports.items()]
    has_high = any(row["high_weight"] for _, port in groups for row in port["vls"])
    title = (f"VL arbitration at MTU {arbitration['mtu_bytes']} ({arbitration['packet_credits']} credits per packet): "
             f"shares of a saturated port, every VL of the table backlogged")
    table = Table(title=title, title_justify="left")
    columns = ["ports", "VL"] + (["high weight", "high share"] if has_high else []) + [
        "low weight", "packets per round", "low share"]
    for column in columns:
        table.add_column(column, justify="left" if column == "ports" else "right")
    for label, port in groups:
        for row in port["vls"]:
            cells = [label, str(row["vl"])]
            if has_high:
                cells += [str(row["high_weight"]), _share(row["effective_high_share"], row["high_weight"])]
            cells += [str(row["low_weight"]), str(row["low_packets_per_round"]),
                      _share(row["effective_low_share"], row["low_weight"])]
            table.add_row(*cells)
            label = ""
    console.print(table)
    for label, port in groups:
        if not has_high or not any(row["high_weight"] for row in port["vls"]):
            continue
        per_low = port["high_packets_per_low_packet"]
        if per_low is None:
            text = "the low table waits until the high table is idle (high_limit 255)"
        else:
            text = (f"the high table sends {per_low} packet{'s' if per_low > 1 else ''} per low-table packet when both "
                    f"are backlogged (high_limit {port['high_limit']})")
        console.print(f"{label}: {text}")


def _share(share: float, weight: int) -> str:
    from qoslab.vlarb import percent

    return percent(share) if weight else "-"


def _sl2vl(table: list[int]) -> str:
    # Groups of four so that a narrow terminal wraps between groups, not inside numbers.
    return " ".join(",".join(map(str, table[i : i + 4])) for i in range(0, len(table), 4))


def _arb(entries: list[tuple[int, int]]) -> str:
    return ", ".join(f"{vl}:{weight}" for vl, weight in entries) or "-"


def main() -> None:
    app()


if __name__ == "__main__":
    main()
