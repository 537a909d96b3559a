"""Runs a study: the jobs alone and every policy's shared run, stage by stage (policies that need
earlier results come after them; a search runs batch by batch) through stages.py, each run stored
the moment it finishes. Then the tidy tables, the analysis, the figures and the report."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
from rich.console import Console

from qoslab._version import __version__
from qoslab.policies import Policy, PolicyError, Search
from qoslab.policies.base import NEEDS_ALONE, NEEDS_PROFILE, PolicyContext
from qoslab.scenario import run_identity
from qoslab.study.model import Study
from qoslab.study.outcome import OutcomeView
from qoslab.study.plan import Repetition, StudyPlan
from qoslab.study.results import write_results
from qoslab.study.stages import Stages
from qoslab.sweep.execute import RunSpec
from qoslab.sweep.executors import Executor
from qoslab.sweep.folder import StudyFolder, study_identity
from qoslab.sweep.iterations import ITERATIONS_FILE, StudyTables
from qoslab.sweep.outputs import finishing, write_text
from qoslab.sweep.store import RunStore, write_tables


@dataclass(repr=False)
class StudyOutcome(OutcomeView):
    out: Path
    tables: StudyTables  # iterations read from its file when asked for (iterations.py)
    runs_total: int
    runs_reused: int
    failed: list[dict[str, Any]] = field(default_factory=list)
    search: pd.DataFrame | None = None
    written: list[Path] = field(default_factory=list)
    report_error: str | None = None  # the analysis or report failed (a bug, not an OSError): the tables are still there
    policies: list[str] = field(default_factory=list)  # names, in the study's order
    notes: list[str] = field(default_factory=list)  # of its stored runs (RunStore.notes): printed, and in study.json
    run_ids: list[str] = field(default_factory=list)  # its runs, as the study asked for them


class StudyRunner:
    """A study's runs and results; or one point of a sweep (`point`), whose runs go through the
    sweep's shared `stages` and whose results go to its own folder `out`."""

    def __init__(self, study: Study, out: str | Path, executor: Executor, console: Console | None = None, progress: bool = True,
                 task: tuple[int, int] | None = None, collect: bool = False, *, point: dict[str, Any] | None = None,
                 stages: Stages | None = None):
        self.study = study
        self.out = Path(out)
        self.executor = executor
        self.console = console or Console(stderr=True)
        self.stages = stages or Stages(RunStore(self.out / "runs"), executor, self.console, progress, task, collect)
        self.store = self.stages.store
        self.plan = StudyPlan(study, point)
        self.asked: list[str] = []  # this study's (or point's) runs, in the order its stages asked for them
        self.search_results: list[dict[str, Any]] = []

    # -- running -------------------------------------------------------------------------------

    def run(self) -> StudyOutcome | None:
        """Runs the study in its --out folder, which it holds (folder.py) until the report is
        written; as an array task, only the task's share of each stage, and no tables (None)."""
        # As run ids do (run_identity): a folder written before port buffers is the same study.
        identity = study_identity("policies", self.study.title(), self.study.source,
                                  [run_identity(rep.scenario) for rep in self.plan.repetitions],
                                  base=self.study.point_data(None))
        with StudyFolder(self.out, identity, shared=self.stages.task is not None):
            return self._run()

    def _run(self) -> StudyOutcome | None:
        self.stages.run(self.first_specs(), "jobs alone and policies")
        self.run_later()
        if self.stages.task is not None:
            return None  # an array task: `--collect` builds the tables once every task has run
        return self.finish()

    def first_specs(self) -> list[RunSpec]:
        """The first stage: every job alone and the policies that need no earlier run (a sweep
        runs every point's first stage together)."""
        plain = [p for p in self.study.concrete_policies() if not p.required() and not isinstance(p, Search)]
        first = self.plan.alone_specs()
        for rep in self.plan.repetitions:
            first += [self._shared(rep, policy, self.plan.context(rep)) for policy in plain]
        self.asked += [spec.run_id for spec in first]
        return first

    def has_later(self) -> bool:
        """Whether stages come after the first (policies that read earlier runs, searches)."""
        return any(p.required() or isinstance(p, Search) for p in self.study.concrete_policies())

    def run_later(self) -> None:
        """The stages after the first: policies that read earlier runs, then each search."""
        policies = self.study.concrete_policies()
        later = [p for p in policies if p.required() and not isinstance(p, Search)]
        if later:
            specs = []
            for rep in self.plan.repetitions:
                ctx = self._context(rep, set().union(*(p.required() for p in later)))
                specs += [self._shared(rep, policy, ctx) for policy in later]
            self._stage(specs, "policies that use earlier runs")
        for search in (p for p in policies if isinstance(p, Search)):
            self._search(search)

    def _stage(self, specs: list[RunSpec], what: str) -> None:
        self.asked += [spec.run_id for spec in specs]
        self.stages.run(specs, what)

    def _shared(self, rep: Repetition, policy: Policy, ctx: PolicyContext) -> RunSpec:
        try:
            return self.plan.shared_spec(rep, policy, ctx)
        except PolicyError as error:
            spec = self.plan.failed_spec(rep, policy)
            self.stages.fail(spec, f"policy could not be applied: {error}")
            return spec

    def _context(self, rep: Repetition, needs: set[str]) -> PolicyContext:
        ctx = self.plan.context(rep)
        if NEEDS_PROFILE in needs:
            default = next(p for p in self.study.concrete_policies() if p.label() == "default")
            spec = self.plan.shared_spec(rep, default, ctx)
            record = self.store.get(spec.run_id) if self.store.has(spec.run_id) else None
            if record is not None and record["run"]["status"] in ("completed", "time_limit"):
                frame = record["iterations"].to_pandas()
                ctx.profile = frame
        if NEEDS_ALONE in needs:
            for job in rep.jobs:
                spec = self.plan.alone_spec(rep, job)
                if self.store.has(spec.run_id):
                    record = self.store.get(spec.run_id)
                    if record["run"]["status"] == "completed":
                        ctx.alone[job] = self.plan.alone_run(record, job)
        return ctx

    # -- search --------------------------------------------------------------------------------

    def _search(self, search: Search) -> None:
        contexts = {rep.index: self._context(rep, {NEEDS_ALONE}) for rep in self.plan.repetitions}
        jobs = self.plan.repetitions[0].jobs

        def evaluate(candidates: Sequence[Policy]) -> list[float]:
            specs = {c.label(): [self._shared(rep, c, contexts[rep.index]) for rep in self.plan.repetitions] for c in candidates}
            self._stage([s for group in specs.values() for s in group], f"search {search.label()}")
            return [self._objective(search, group, contexts) for group in specs.values()]

        results = search.optimise(jobs, self.plan.qos_vls(search), search.batch, evaluate)
        for rank, (candidate, score) in enumerate(results):
            self.search_results.append(
                {"search": search.label(), "rank": rank + 1, "candidate": candidate.label(),
                 "assignment": json.dumps(candidate.assignment),
                 "weights": ":".join(map(str, candidate.arbitration().nominal_weights(self.plan.granularity))),
                 "objective": search.objective, "value": score}
            )

    def _objective(self, search: Search, specs: Sequence[RunSpec], contexts: dict[int, PolicyContext]) -> float:
        """The candidate's figure as policies.parquet gives it for a policy (analysis/contention.py):
        mean total contention over repetitions, or over jobs each job's slowdown averaged over the
        repetitions (their mean, or the worst of them); inf when a repetition did not complete."""
        values: list[float] = []
        by_job: dict[str, list[float]] = {}
        for spec in specs:
            record = self.store.get(spec.run_id)
            if record["run"]["status"] != "completed":
                return math.inf
            alone = contexts[spec.repetition].alone
            shared = {r["job"]: r["runtime_us"] for r in record["jobs"]}
            known = [(shared.get(job), alone[job].runtime_us if job in alone else None) for job in shared]
            pairs = [(s, a) for s, a in known if s is not None and a is not None and not math.isnan(s)]
            if not pairs or len(pairs) < len(known):
                return math.inf
            values.append(sum(s - a for s, a in pairs))
            for job, (s, a) in zip(shared, pairs, strict=True):  # every job paired (checked above)
                by_job.setdefault(job, []).append(s / a)
        if search.objective == "total-contention":
            return sum(values) / len(values)
        means = [sum(v) / len(v) for v in by_job.values()]
        # The worst of the jobs' mean slowdowns, as reported: the mean of each repetition's worst
        # job had ranked candidates by another figure than the one shown beside them.
        return max(means) if search.objective == "worst-slowdown" else sum(means) / len(means)

    # -- results -------------------------------------------------------------------------------

    def finish(self, report: bool = True) -> StudyOutcome:
        """The tables, analysis and (with `report`) figures and report of this study (or point)
        in its folder."""
        return finish_folder(self.folder_task(report))

    def folder_task(self, report: bool = True) -> FolderTask:
        """What `finish` does, as data: a sweep hands its points' to the worker processes."""
        # Absolute, as the store's root is: a reused pool's workers keep the directory they started in.
        return FolderTask(self.out.absolute(), self.store.root, list(dict.fromkeys(self.asked)), list(self.search_results),
                          self._describe(), report, [p.label() for p in self.study.concrete_policies()],
                          self.stages.reused)

    def _description(self, policy: Policy) -> str:
        """The policy's description; a search's says how many candidates its space has and runs."""
        text = policy.description(self.plan.granularity)
        if isinstance(policy, Search):
            jobs = self.plan.repetitions[0].jobs
            text += f"; {policy.simulated(policy.space_size(len(jobs), self.plan.qos_vls(policy)))}"
        return text

    def _describe(self) -> dict[str, Any]:
        return {
            "qoslab_version": __version__,
            "name": self.study.title(),
            "description": self.study.description,
            "source": self.study.source,
            "seeds": self.study.seed_list(),
            "policies": [{"name": p.label(), "kind": p.kind, "description": self._description(p),
                          "parameters": p.model_dump(mode="json")}
                         for p in self.study.concrete_policies()],
            # Weights the fabric's MTU cannot tell apart, by policy (also printed when the study starts).
            "warnings": self.study.warnings(),
            "figure_formats": list(self.study.figure_formats),
            "base_scenario": self.plan.repetitions[0].scenario,
            "placement": self.plan.placement,  # job -> placement as given (qoslab export opensm reads it)
        }


@dataclass(frozen=True)
class FolderTask:
    """A study's (or sweep point's) folder to write from its stored runs (`finish_folder`)."""

    out: Path
    store: Path
    run_ids: list[str]  # in the order the stages asked for them
    search_results: list[dict[str, Any]]
    meta: dict[str, Any]  # study.json
    report: bool
    policies: list[str]  # names, in the study's order
    runs_reused: int


def finish_folder(task: FolderTask) -> StudyOutcome:
    """The tables, analysis and (with `task.report`) figures and report of a study or point, from
    its stored runs; a failed analysis or report is said in the outcome (the tables stay), a file
    that cannot be written raises OSError (outputs.OutputError: which file, and why). The folder
    is marked while its files are rewritten (outputs.finishing): one whose finishing was cut off
    is refused by its readers until the study runs again."""
    out = task.out
    out.mkdir(parents=True, exist_ok=True)
    store = RunStore(task.store)
    search = pd.DataFrame(task.search_results) if task.search_results else None
    with finishing(out, task.meta.get("source")):
        tables, iterations = store.tables(task.run_ids, out / ITERATIONS_FILE, _search_winners(search))
        notes = store.notes(task.run_ids) + _search_failures(search)
        meta = {**task.meta, "warnings": list(task.meta.get("warnings", [])) + notes}
        written = write_tables(tables, out) + [iterations.path]
        if search is not None:
            written += write_tables({"search": search}, out)
        written.append(write_text(out / "study.json", json.dumps(meta, indent=2) + "\n"))
        report_error = None
        try:
            files, results = write_results(out, tables, iterations, search, meta, task.report)
            written += files
            tables = {**tables, **results}  # the outcome's tables: the runs' and the analysis's
        except OSError:
            raise  # the environment (a full disk, a file-size limit), not a bug: the command fails, naming the file
        except Exception as error:  # a bug in the analysis or report: the runs and their tables are written
            report_error = f"{type(error).__name__}: {error}"
    runs = tables["runs"]
    failed = runs[runs["status"] != "completed"].to_dict("records")
    return StudyOutcome(out, StudyTables(tables, iterations), len(task.run_ids), task.runs_reused, failed, search,
                        written, report_error, task.policies, notes, task.run_ids)


def _search_winners(search: pd.DataFrame | None) -> list[tuple[str, str]]:
    """(best candidate, search name) of each search: the best candidate's runs are listed again
    under the search's own name, so it compares with the other policies like any of them (the
    candidates' own rows stay, named as candidates)."""
    if search is None:
        return []
    best = [group.sort_values("rank").iloc[0] for _, group in search.groupby("search", sort=False)]
    # A failed candidate (value inf: a run did not complete) is never the search's result.
    return [(row["candidate"], row["search"]) for row in best if math.isfinite(row["value"])]


def _search_failures(search: pd.DataFrame | None) -> list[str]:
    """A note for each search none of whose candidates completed: it has no result (no policy
    under its name; _search_winners)."""
    if search is None:
        return []
    return [f"search {name}: every one of its {len(group)} candidates failed (a run did not complete or a job's "
            f"runtime is missing; runs.parquet says why): no policy is published as {name}"
            for name, group in search.groupby("search", sort=False) if not group["value"].map(math.isfinite).any()]
