"""The qoslab command line: thin wrappers over Scenario, simulate and the demo study. What the
commands print is cli_render.py's. No `from __future__ import annotations`: typer would evaluate
every command's annotations from strings on each start (a few ms of start-up)."""

import json
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, cast

import typer
from rich.text import Text

from qoslab._version import __version__
from qoslab.cli_render import (
    console,
    err_console,
    placement_rows,
    print_arbitration,
    print_buffers,
    print_counter_comparison,
    print_description,
    print_placements,
    print_plan,
    print_qos,
    print_study,
    print_summary,
    print_sweep,
    print_tail_study,
    print_validation,
    print_warning,
    progress_display,
)
from qoslab.errors import (
    ConfigError,
    DamagedRun,
    Deadlock,
    EngineError,
    FolderError,
    Interrupted,
    ScenarioError,
    from_engine_config_error,
    show,
)
from qoslab.extras import MissingExtra
from qoslab.scenario import Scenario


class ExecutorKind(StrEnum):
    """--executor: where a study's runs execute ([executor] kind)."""

    local = "local"
    dask = "dask"
    slurm = "slurm"


EXIT_USER_ERROR = 2
EXIT_ENGINE_ERROR = 3
EXIT_INTERRUPTED = 130
EXIT_DEADLOCK = 1
EXIT_RUNS_FAILED = 4  # a study finished, but some of its runs failed: its tables lack them
# A study finished, but some of its runs did not complete (a deadlock, the time limit): kept as
# results, so running it again changes nothing; their jobs have no runtime, slowdown or contention.
EXIT_RUNS_INCOMPLETE = 5

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="qoslab: packet-level InfiniBand fabric simulation with QoS (SL2VL, VL arbitration, credits).",
)

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
    except MissingExtra as error:  # an optional dependency: the message names the extra to install
        raise fail(f"error: {error}") from None
    except ImportError as error:
        raise fail(f"error: {error}", EXIT_ENGINE_ERROR) from None
    except KeyboardInterrupt:
        raise fail("interrupted", EXIT_INTERRUPTED) from None
    except (FolderError, DamagedRun) as error:
        raise fail(f"error: {error}") from None


def _each_line(prefix: str, text: str) -> str:
    return "\n".join(prefix + line for line in text.splitlines())


def warn(scenario: Scenario, more: list[str] | None = None) -> None:
    """The scenario's warnings and `more` (what a trace's reader left out), on stderr."""
    for message in scenario.warnings() + (more or []):
        print_warning(message)


def print_run_warnings(summary: dict[str, Any]) -> None:
    """The run's warnings (summary.json's: what a trace's reader skipped, shared send queues), on stderr."""
    for message in summary.get("warnings", []):
        print_warning(message)


def load(path: Path, overrides: list[str] | None) -> Scenario:
    return Scenario.from_toml(path, overrides or ())


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
            print_run_warnings(stop.result.summary)
            raise fail(f"interrupted: partial results written to {out}/", EXIT_INTERRUPTED) from None
        except Deadlock as stuck:
            save(stuck.result, out)
            print_run_warnings(stuck.result.summary)  # a skipped call may be why it deadlocked
            raise fail(f"error: {scenario}: {stuck}\npartial results written to {out}/", EXIT_DEADLOCK) from None
        save(result, out)
    print_summary(result.summary, str(scenario))
    console.print(f"wrote {', '.join(result.written())} to {out}/")
    print_run_warnings(result.summary)
    if result.summary.get("status") == "time_limit":
        unfinished = [name for name, job in result.summary["jobs"].items() if not job["completed"]]
        err_console.print(Text(
            f"warning: job(s) {', '.join(unfinished)} did not finish within run.duration_us = "
            f"{loaded.run.duration_us:g}: their runtime is unknown; raise run.duration_us", style="yellow"))


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
    from qoslab.simulate import describe_with_warnings

    with user_errors(str(scenario)):
        loaded = load(scenario, overrides)
        fabric, replay_warnings = describe_with_warnings(loaded)
    warn(loaded, replay_warnings)
    if as_json:
        document = check_document(loaded, fabric, str(scenario))
        document["warnings"] += replay_warnings
        typer.echo(json.dumps(document, indent=2))
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
                                "vl_arbitration": scenario.vl_arbitration(), "warnings": scenario.warnings()}
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
    executor_kind: Annotated[
        ExecutorKind | None, typer.Option("--executor", help="Where runs execute: local, dask (with --scheduler) or slurm (Dask workers as "
                                 "Slurm jobs; --workers is the number of jobs); overrides the study file's executor kind.")
    ] = None,
    partition: Annotated[str | None, typer.Option("--partition", help="Slurm partition of the worker jobs.")] = None,
    account: Annotated[str | None, typer.Option("--account", help="Slurm account the worker jobs are charged to.")] = None,
    walltime: Annotated[str | None, typer.Option("--walltime", metavar="HH:MM:SS",
                                                 help="Slurm time limit of each worker job (workers leave before it "
                                                 "and are replaced).")] = None,
    cores: Annotated[int | None, typer.Option("--cores", min=1, help="Cores of each Slurm worker job (one run each).")] = None,
    memory: Annotated[str | None, typer.Option("--memory", metavar="SIZE",
                                               help="Memory of each Slurm worker job, e.g. 4GB.")] = None,
    array_task: Annotated[str | None, typer.Option(
        "--array-task", metavar="I/N|slurm",
        help="Run only this array task's share of the runs into --out (task I of N, from 0; 'slurm': the Slurm array "
             "task this is); --collect builds the tables afterwards.")] = None,
    collect: Annotated[bool, typer.Option("--collect", help="Build the tables and report from the runs an array's "
                                          "tasks stored in --out; run nothing.")] = False,
    array_script: Annotated[int | None, typer.Option(
        "--array-script", metavar="N", min=1,
        help="Write --out/array.sbatch, a Slurm job array of N tasks running this study (with --partition, --account, "
             "--walltime, --cores, --memory); run nothing.")] = None,
) -> None:
    """Compare QoS policies: every job alone and all together under each policy; tables, figures
    and report.html to --out. Finished runs are kept, so an interrupted study resumes."""
    from qoslab.study.model import FigureFormat
    from qoslab.study.runner import StudyRunner
    from qoslab.study.sweep_runner import SweepOutcome, SweepRunner
    from qoslab.study.tail_model import TailStudy

    with user_errors(str(study_file) if study_file else None):
        if study_file is None:
            from qoslab.study.default import default_study

            loaded = default_study()
        else:
            from qoslab.study import load_study

            loaded = load_study(study_file)
        for message in getattr(loaded, "warnings", list)():
            print_warning(message)
        if figures is not None:
            loaded.figure_formats = cast(list[FigureFormat], figures.split(","))
        if plan:
            return _plan(loaded, out)
        slurm = {key: value for key, value in (("queue", partition), ("account", account), ("walltime", walltime),
                                                 ("cores", cores), ("memory", memory)) if value is not None}
        if array_script is not None:
            return _write_array_script(study_file, out, array_script, slurm)
        task = _array_mode(array_task, collect, executor_kind, scheduler)
        if task is not None or collect:  # each array task runs locally, on its own cores
            loaded.executor = loaded.executor.overridden("local", {})
            workers = workers or cores
        else:
            loaded.executor = loaded.executor.overridden(executor_kind and executor_kind.value, slurm)
        if isinstance(loaded, TailStudy):
            assert study_file is not None
            return _tail_study(loaded, study_file, out, scheduler, workers, task, collect)
        if loaded.executor.kind == "local" and not scheduler:
            workers = _local_workers(loaded, workers or loaded.executor.workers)
        with _study_executor(loaded.executor, scheduler, workers, out) as executor:
            console.print(f"study [bold]{loaded.title()}[/bold]: {len(loaded.concrete_policies())} policies, "
                          f"{len(loaded.seed_list())} repetition(s), {executor.workers} workers; results in {out}/")
            runner = (SweepRunner if loaded.sweep else StudyRunner)(loaded, out, executor, console, task=task,
                                                                    collect=collect)
            with _array_stages(task, collect, out):
                outcome = runner.run()
    if outcome is None:
        return _array_task_done(task, runner.stages)
    if isinstance(outcome, SweepOutcome):
        print_sweep(outcome)
    else:
        print_study(outcome)
    from qoslab.policies.search import is_candidate

    statuses = [row["status"] for row in outcome.failed]  # every run that did not complete
    _exit_on_failed_runs(statuses.count("error"), outcome.runs_total, out)
    _exit_on_incomplete_runs(sum(row["status"] != "error" and not is_candidate(row["policy"]) for row in outcome.failed),
                             outcome.runs_total)


def _array_mode(array_task: str | None, collect: bool, executor_kind: Any, scheduler: str | None) -> tuple[int, int] | None:
    """The array task this process is (None: not one), after checking the options go together."""
    from qoslab.sweep.array import parse_array_task

    if array_task is not None and collect:
        raise fail("error: --array-task runs one task's share; --collect builds the tables afterwards: give one")
    if (array_task is not None or collect) and (scheduler or executor_kind not in (None, ExecutorKind.local)):
        raise fail("error: --array-task and --collect run on this machine's cores: drop --executor/--scheduler")
    if array_task is None:
        return None
    try:
        return parse_array_task(array_task)
    except ValueError as error:
        raise fail(f"error: {error}") from None


@contextmanager
def _scheduler_log_errors(source: str | None) -> Iterator[None]:
    """A tail study's scheduler log that cannot be read or mapped onto the fabric: exit 2, named."""
    from qoslab.io.scheduler import SchedulerLogError

    try:
        yield
    except ScenarioError:
        raise  # names the study file and key already (user_errors)
    except SchedulerLogError as error:
        raise fail(f"error: {error}") from None
    except ValueError as error:  # e.g. background.host_names not matching the fabric
        raise fail(f"error: {source}: {error}") from None


@contextmanager
def _array_stages(task: tuple[int, int] | None, collect: bool, out: Path) -> Iterator[None]:
    """A stage that waits for other array tasks' runs: said, exit 0 for a task (it did its share),
    exit 4 for a collection (the tables would lack runs)."""
    from qoslab.study.stages import StageWaiting

    try:
        yield
    except StageWaiting as waiting:
        if collect:
            raise fail(f"error: {out}: {waiting.missing} run(s) of stage '{waiting.what}' are not stored yet: run the "
                       "array's tasks (again) first; nothing was written", EXIT_RUNS_FAILED) from None
        assert task is not None
        console.print(f"array task {task[0]}/{task[1]}: ran {waiting.ran} run(s); stage '{waiting.what}' waits for "
                      f"{waiting.missing} run(s) of other tasks. Run the array again once they finish (each task skips "
                      "what is stored), then --collect")
        raise typer.Exit(0) from None


def _array_task_done(task: tuple[int, int] | None, stages: Any) -> None:
    assert task is not None
    others = f"; {stages.waiting.missing} run(s) of other tasks are not stored yet" if stages.waiting else ""
    console.print(f"array task {task[0]}/{task[1]}: done, ran {stages.ran} run(s){others}; when every task has "
                  "finished, build the tables with --collect")


def _write_array_script(study_file: Path | None, out: Path, tasks: int, slurm: dict[str, Any]) -> None:
    from qoslab.sweep.array import array_script

    try:
        text = array_script(study_file, out, tasks, slurm)
    except ValueError as error:
        raise fail(f"error: {error}") from None
    try:
        (out / "array-logs").mkdir(parents=True, exist_ok=True)
        (out / "array.sbatch").write_text(text)
    except OSError as error:
        raise fail(f"error: {out}: cannot write array.sbatch: {error.strerror or error}") from None
    console.print(f"wrote {out / 'array.sbatch'}: submit it with sbatch, then build the tables with "
                  f"qoslab study {study_file or ''} --out {out} --collect")


def _plan(loaded: Any, out: Path) -> None:
    """`qoslab study --plan`: the study's size, printed and written to plan.json."""
    from qoslab.sweep.folder import held_study

    with _scheduler_log_errors(loaded.source):  # a tail study reads and maps its log, as a run would
        size = loaded.plan()
    # A plan beside a study's results may be of another study, whose run there would be refused.
    # Only said: which study a folder holds is StudyFolder's rule, decided when a run claims it
    # (the same study read from another directory, or renamed, is still the same).
    held = held_study(out)
    if held is not None and (held.get("study"), held.get("source") or "") != (loaded.title(), loaded.source or ""):
        print_warning(f"{out}: holds the runs of the study {held.get('study')!r} from "
                      f"{held.get('source') or 'the built-in default'}; if this is another study, running it there "
                      "will be refused: give it another --out")
    try:
        out.mkdir(parents=True, exist_ok=True)
        (out / "plan.json").write_text(json.dumps(size, indent=2) + "\n")
    except OSError as error:
        raise fail(f"error: {out}: cannot write plan.json: {error.strerror or error}") from None
    print_plan(size, out)


def _local_workers(loaded: Any, workers: int) -> int:
    fit, warning = loaded.local_workers(workers)
    if warning:
        print_warning(warning)
    return int(fit)


@contextmanager
def _study_executor(cfg: Any, scheduler: str | None, workers: int | None, out: Path) -> Iterator[Any]:
    """The executor a study file's [executor] table asks for, as overridden on the command line,
    for the length of a study run; an interruption or an unwritable output ends it with a message."""
    from qoslab.sweep.executors import NoLiveWorker, make_executor

    try:
        executor = make_executor("dask" if scheduler else cfg.kind, workers or cfg.workers,
                                 scheduler or cfg.scheduler, cfg.slurm, out, cfg.no_worker_timeout_s)
    except (OSError, TimeoutError, ValueError) as error:
        if cfg.kind == "slurm" and not scheduler:
            raise fail(f"error: cannot start the Slurm workers: {error}") from None
        raise fail(f"error: cannot reach the Dask scheduler {scheduler or cfg.scheduler}: {error}") from None
    for message in getattr(executor, "warnings", []):
        print_warning(message)
    try:
        yield executor
    except NoLiveWorker as error:
        raise fail(f"error: {error}; finished runs are kept in {out}/runs: run the same command to resume",
                   EXIT_RUNS_FAILED) from None
    except KeyboardInterrupt:
        raise fail(f"interrupted: finished runs are kept in {out}/runs; run the same command to resume",
                   EXIT_INTERRUPTED) from None
    except OSError as error:
        raise fail(f"error: {out}: cannot write results: {_os_reason(error)}") from None
    finally:
        executor.close()


def _os_reason(error: OSError) -> str:
    """An OSError as one line: the file it names, if any, and the system's reason."""
    reason = error.strerror or str(error) or type(error).__name__
    return f"{error.filename}: {reason}" if error.filename else reason


def _tail_study(loaded: Any, study_file: Path, out: Path, scheduler: str | None, workers: int | None,
                task: tuple[int, int] | None = None, collect: bool = False) -> None:
    """`qoslab study` on a ``kind = "tail-latency"`` file (docs/dragonfly.md)."""
    from qoslab.study.tail_runner import TailStudyRunner

    with (user_errors(str(study_file)), _study_executor(loaded.executor, scheduler, workers, out) as executor,
          _scheduler_log_errors(str(study_file))):
        runner = TailStudyRunner(loaded, out, executor, console, task=task, collect=collect)
        targets = f" x {len(runner.targets)} targets" if loaded.several_targets else ""
        cc = "" if loaded.congestion_control is None else \
            f" x congestion control {' and '.join('on' if on else 'off' for on in loaded.congestion_control)}"
        console.print(f"tail-latency study [bold]{loaded.title()}[/bold]: {loaded.snapshots} background snapshots"
                      f"{targets} x {len(loaded.localities)} localities x {len(loaded.routings)} routings{cc}, "
                      f"{executor.workers} workers; results in {out}/")
        with _array_stages(task, collect, out):
            outcome = runner.run()
    if outcome is None:
        return _array_task_done(task, runner.stages)
    print_tail_study(outcome, loaded.several_targets, out)
    _exit_on_failed_runs(_errors(outcome.tables["tail_runs"]), outcome.runs_total, out)


def _errors(runs: Any) -> int:
    """Runs that failed with an error (a deadlock or a time limit is a result, not a failure)."""
    return int((runs["status"] == "error").sum()) if len(runs) else 0


def _exit_on_failed_runs(failed: int, total: int, out: Path) -> None:
    """A study whose runs failed exits non-zero, saying how many: a script must not take its
    tables as complete."""
    if failed:
        raise fail(f"error: {failed} of {total} runs failed (listed above, with their errors, and in the runs table in {out}/). "
                   "Run the same command again to retry them", EXIT_RUNS_FAILED)


def _exit_on_incomplete_runs(incomplete: int, total: int) -> None:
    """A policy study some of whose runs deadlocked or reached their time limit exits non-zero
    (EXIT_RUNS_INCOMPLETE): they are results, kept, but a script must not take the comparison as
    whole (their jobs have no slowdown; a study none of whose repetitions completed has none)."""
    if incomplete:
        raise fail(f"error: {incomplete} of {total} runs did not complete (a deadlock or the time limit, listed above "
                   "and in the report); they are kept as results, so running the study again changes nothing: "
                   "change the scenario (routing, VLs, run.duration_us) to complete them", EXIT_RUNS_INCOMPLETE)


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
    policy_file: Annotated[str, typer.Option(help="Where OpenSM will find qos-policy.conf (an absolute path).")] = "/etc/opensm/qos-policy.conf",
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
                if overrides:
                    raise fail(f"error: --set: {source} is a study folder, whose policies are exported as they were "
                               "simulated; change the study's scenario and run it again (--set applies to a "
                               "scenario file)")
                choice = study_scenario(source, policy, repetition)
                scenario, label, placement = choice.scenario, choice.policy, choice.placement
                console.print(Text(f"exporting policy {label!r}: {choice.why}"))
            else:
                if policy is not None or repetition != 0:
                    raise fail(f"error: --policy and --repetition choose among a study's runs; {source} is a "
                               "scenario file, whose QoS is exported as it is")
                scenario, label, placement = load(source, overrides), "", None
            bundle = export_opensm(scenario, out, label, policy_file, base_text, str(base) if base else "opensm.conf",
                                   placement)
        except (ExportError, OpenSmConfError) as error:
            raise fail(f"error: {error}") from None
        except OSError as error:
            raise fail(f"error: {out}: cannot write: {error.strerror or error}") from None
    for path in bundle.written:
        console.print(f"wrote {path}")
    if bundle.sl0:
        console.print(Text(f"{bundle.sl0}; every job and service outside this export sends on SL 0 (README.md)"))
    for warning in bundle.warnings:
        print_warning(warning)
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
    """Prints the \\[qos] tables (and fabric.data_vls) a scenario needs to simulate what OpenSM
    would program from this file; OpenSM's wrapping and truncation are warned about by line."""
    from qoslab.io.opensm import OpenSmConfError, read_opensm_conf

    try:
        qos = read_opensm_conf(conf).fold_routing_layers(routing_vls)
    except OpenSmConfError as error:
        raise fail(f"error: {error}") from None
    for w in qos.warnings:
        print_warning(w)
    guess = qos.layered_guess() if routing_vls == 1 else None
    if guess:
        print_warning(f"{conf}: every VLArb entry is repeated for VL + {qos.data_vls // guess}, as qoslab exports "
                      f"tables for routing.vls = {guess} (a Dragonfly+); if so, pass --routing-vls {guess} to fold the "
                      "copies back")
    lines = ["[fabric]", f"data_vls = {qos.data_vls}", ""]
    if qos.routing_vls > 1:
        lines += ["[routing]", f"vls = {qos.routing_vls}", ""]
    for port, tables in qos.scenario_qos().items():
        lines.append(f"[qos.{port}]")
        for key, value in tables.items():
            lines.append(f"{key} = {json.dumps(value)}")
        lines.append("")
    if qos.congestion_control is not None:
        lines.append("[congestion_control]")
        lines += [f"{key} = {_toml_value(value)}" for key, value in qos.congestion_control.items()]
        lines.append("")
    typer.echo("\n".join(lines))


def _toml_value(value: Any) -> str:
    """A value as TOML writes it (JSON's forms for numbers, strings and lists; tables inline)."""
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_toml_value(v)}" for k, v in value.items()) + " }"
    return "true" if value is True else "false" if value is False else json.dumps(value)


@app.command("compare-counters")
def compare_counters_command(
    run_out: Annotated[Path, typer.Argument(metavar="RUN_OUT", help="A `qoslab run` output with run.port_counters = true.",
                                            show_default=False)],
    before: Annotated[Path, typer.Argument(metavar="BEFORE", help="perfquery output taken at the interval's start.",
                                           show_default=False)],
    after: Annotated[Path, typer.Argument(metavar="AFTER", help="perfquery output taken at its end.", show_default=False)],
    interval: Annotated[float, typer.Option("--interval", help="Seconds between the two dumps (required).",
                                            show_default=False)],
    tick_bytes: Annotated[int, typer.Option(help="Bytes of link time per PortXmitWait tick: 8 on Quantum switches, "
                                                 "32 x lanes on Switch-IB.")] = 8,
    out: OutDir = Path("qoslab-counters"),
) -> None:
    """Per-port utilisation and wait measured on a cluster (two perfquery dumps over an interval)
    beside the simulated run's: a table (comparison.csv) and a figure (comparison.png)."""
    import pyarrow.parquet as pq

    from qoslab.counters import CounterDumpError, compare, comparison_figure, read_dump

    if not 0 < interval < float("inf"):  # NaN fails too
        raise fail(f"error: --interval: expected the seconds between {before} and {after} (> 0), got {interval:g}")
    if tick_bytes < 1:
        raise fail(f"error: --tick-bytes: expected a positive number of bytes, got {tick_bytes}")
    counters = run_out / "port_counters.parquet"
    if not counters.is_file():
        raise fail(f"error: {counters}: missing; run the scenario with run.port_counters = true "
                   f"(qoslab run SCENARIO --set run.port_counters=true --out {run_out})")
    try:
        summary = json.loads((run_out / "summary.json").read_text())
        window = summary.get("window_ns") if isinstance(summary, dict) else None
        if not (isinstance(window, list) and len(window) == 2 and all(type(t) in (int, float) for t in window)
                and window[1] > window[0]):
            raise fail(f"error: {run_out / 'summary.json'}: window_ns: expected [start, end] in ns with end > start "
                       f"(a `qoslab run` summary), got {show(window)}")
        window_ns = window[1] - window[0]
        table = compare(pq.read_table(counters), window_ns, read_dump(before), read_dump(after), interval, tick_bytes)
    except CounterDumpError as error:
        raise fail(f"error: {error}") from None
    except (OSError, ValueError, KeyError) as error:
        raise fail(f"error: {run_out}: cannot read the run's summary or counters ({error})") from None
    over = table[table["real_utilisation"] > 1.01]
    if len(over):
        err_console.print(Text(f"warning: {len(over)} port(s) measured above 100% of their link (up to "
                               f"{over['real_utilisation'].max():.0%}): is --interval ({interval:g} s) the time "
                               "between the two dumps?", style="yellow"))
    try:
        out.mkdir(parents=True, exist_ok=True)
        table.to_csv(out / "comparison.csv", index=False)
        comparison_figure(table).savefig(out / "comparison.png", dpi=110)
    except OSError as error:
        raise fail(f"error: {out}: cannot write: {error.strerror or error}") from None
    print_counter_comparison(table, out)


@app.command()
def validate(
    write: Annotated[
        Path | None, typer.Option("--write", metavar="FILE", help="Also write the results as a Markdown page.")
    ] = None,
) -> None:
    """Check the engine against closed-form results (latency, bandwidth, arbitration, queueing)."""
    from qoslab import validation

    if write is not None and (write.is_dir() or not write.parent.is_dir()):
        what = "is a directory" if write.is_dir() else f"its folder {write.parent} does not exist"
        raise fail(f"error: --write {write}: {what}; expected a Markdown file to write")
    checks = validation.run_all()
    print_validation(checks)
    if write is not None:
        try:
            header = write.read_text().split(validation.TABLE_MARKER)[0] if write.exists() else ""
            write.write_text(header + validation.TABLE_MARKER + "\n\n" + validation.markdown(checks))
        except (OSError, UnicodeDecodeError) as error:
            reason = error.strerror if isinstance(error, OSError) and error.strerror else error
            raise fail(f"error: --write {write}: cannot write the results there: {reason}") from None
    failed = sum(not c.ok for c in checks)
    if failed:
        raise fail(f"{failed} of {len(checks)} checks failed", 1)


def _terminated(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def main() -> None:
    # SIGTERM (Slurm at a job's time limit, `kill`) stops a command as Ctrl-C does: a run writes
    # what it measured so far, a study keeps its finished runs, and the exit code says so.
    signal.signal(signal.SIGTERM, _terminated)
    app()


if __name__ == "__main__":
    main()
