"""Which of a study's policies `qoslab export opensm STUDY_OUT` exports, read only from that
study's own runs (runs.parquet lists them; other run folders under runs/ are not read). By
default: the policy with the least total contention among those standard MPI settings can deploy
(every job on one SL); a policy that needs MPI-side support is exported only when named, and one
whose tables never send some traffic is never chosen (the export refuses it)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qoslab.deploy.mpi_env import deployment
from qoslab.deploy.names import ExportError
from qoslab.errors import DamagedRun, FolderError
from qoslab.scenario import Scenario
from qoslab.sweep.folder import POINTS
from qoslab.sweep.outputs import check_finished


@dataclass
class Choice:
    scenario: Scenario
    policy: str
    why: str  # how it was chosen, for the command's output
    # job -> its placement as the study gave it (study.json; the stored scenario lists every job's
    # hosts): {} when the folder does not record it (studies run before it did)
    placement: dict[str, str]


def _read(path: Path, columns: tuple[str, ...]) -> Any:
    """A study table with the columns the export reads; a damaged or edited one is named."""
    import pandas as pd

    try:
        frame = pd.read_parquet(path)
    except (OSError, ValueError) as error:
        raise ExportError(f"{path}: cannot be read ({error}); run the study again to rewrite it") from None
    missing = [column for column in columns if column not in frame.columns]
    if missing:
        raise ExportError(f"{path}: has no column {', '.join(missing)}: not a table as qoslab writes it; run the "
                          "study again to rewrite it")
    return frame


RUN_COLUMNS = ("run_id", "repetition", "policy", "mode")


def _stored_scenarios(study_out: Path, policy: str) -> dict[int, tuple[dict[str, Any], str]]:
    """Repetition -> the scenario the study ran for `policy` and the record it is stored in, from
    this study's runs only."""
    from qoslab.sweep.store import RECORD, RunStore

    table = study_out / "runs.parquet"
    runs = _read(table, RUN_COLUMNS)
    rows = runs[(runs["policy"] == policy) & (runs["mode"] == "shared")]
    store = RunStore(_store_of(study_out), create=False)
    found = {}
    for row in rows.itertuples(index=False):
        try:
            record = store.get(str(row.run_id))
            repetition = int(row.repetition)
        except DamagedRun as error:
            raise ExportError(str(error)) from None
        except (TypeError, ValueError):
            raise ExportError(f"{table}: run {row.run_id}: repetition {row.repetition!r} is not a number; run the "
                              "study again to rewrite it") from None
        if "scenario" in record:
            found[repetition] = (record["scenario"], str(store.root / str(row.run_id) / RECORD))
    return found


def _store_of(study_out: Path) -> Path:
    """Where a study's runs are stored: its runs/, or for a sweep's point (OUT/points/point=N) the
    sweep's, which every point shares."""
    study_out = study_out.absolute()
    if (study_out / "runs").is_dir() or study_out.parent.name != POINTS:
        return study_out / "runs"
    return study_out.parent.parent / "runs"


def study_scenario(study_out: Path, policy: str | None, repetition: int) -> Choice:
    """The scenario a study ran for `policy` (None: the best deployable one) in `repetition`; a
    sweep's point folder is a study of its own here. A folder whose finishing was cut off (its
    tables may mix two versions of the study) is refused."""
    try:
        check_finished(study_out)
    except FolderError as error:
        raise ExportError(str(error)) from None
    if (study_out / "sweep.parquet").is_file() and not (study_out / "runs.parquet").is_file():
        raise ExportError(f"{study_out}: a sweep's folder, whose points each compare the policies on other scenarios: "
                          f"export one point's, {study_out / 'points' / 'point=N'} (the points' values: "
                          f"{study_out / 'sweep_points.parquet'})")
    if not _store_of(study_out).is_dir() or not (study_out / "runs.parquet").is_file():
        raise ExportError(f"{study_out}: not a finished study's output folder (no runs/ and runs.parquet)")
    runs = _read(study_out / "runs.parquet", RUN_COLUMNS)
    shared = runs[runs["mode"] == "shared"]
    names = list(dict.fromkeys(str(p) for p in shared["policy"]))
    if policy is not None:
        if policy not in names:
            listed = "\n  ".join(names) or "(none)"
            raise ExportError(f"{study_out}: the study has no policy {policy!r}; its policies are:\n  {listed}")
        return Choice(_scenario(study_out, policy, repetition), policy, "named", _placement(study_out))
    table = study_out / "policies.parquet"
    if not table.exists():
        raise ExportError(f"{table}: missing (the study's analysis did not finish); name the policy with --policy")
    from qoslab.analysis.contention import ranking

    ranked = ranking(_read(table, ("policy", "total_contention_us", "complete_repetitions")))
    if ranked.empty:
        raise ExportError(f"{table}: no policy finished; name one with --policy")
    passed_over: list[str] = []
    unsent: list[str] = []  # tables that never send some traffic: never deployable (bundle.refuse_unsent)
    contention = dict(zip((str(p) for p in ranked["policy"]), ranked["total_contention_us"], strict=True))
    for name in contention:
        scenario = _scenario(study_out, name, repetition)
        if scenario.unsent_on_cluster():  # what the export itself refuses
            unsent.append(repr(name))
            continue
        if _by_configuration(scenario):
            why = "the least total contention among policies standard MPI settings can deploy"
            if passed_over:
                why += f" (better, but needing MPI-side support: {', '.join(passed_over)}; export them with --policy)"
            if unsent:
                why += (f" (better, but their tables never send some jobs' traffic, so they cannot be deployed: "
                        f"{', '.join(unsent)})")
            tied = [other for other, us in contention.items() if other != name and us == contention[name]]
            if tied:
                said = [f"{other!r}" + ("" if _by_configuration(_scenario(study_out, other, repetition))
                                         else " (needs MPI-side support)") for other in tied]
                why += f"; tied with {', '.join(said)}, taken as the first deployable one (name another with --policy)"
            return Choice(scenario, name, why, _placement(study_out))
        passed_over.append(repr(name))
    if not passed_over:
        raise ExportError(f"{study_out}: no policy of this study can be deployed: the tables of each never send some "
                          f"jobs' traffic ({', '.join(unsent)}); name one with --policy to be told which SLs and VLs")
    never_sent = f"; tables that never send some traffic: {', '.join(unsent)}" if unsent else ""
    raise ExportError(f"{study_out}: no policy of this study can be deployed by configuration alone (each needs "
                      f"MPI-side support: {', '.join(passed_over)}{never_sent}); name one with --policy to export it "
                      "with what the MPI side must do")


def _by_configuration(scenario: Scenario) -> bool:
    """Whether configuration alone (OpenSM, MPI environment) deploys every job's SL rule."""
    return all(deployment(job).by_configuration for job in scenario.resolved()["jobs"])


def _placement(study_out: Path) -> dict[str, str]:
    """study.json's job -> placement; {} when it is missing, unreadable or older than the key."""
    import json

    try:
        recorded = json.loads((study_out / "study.json").read_text()).get("placement")
    except (OSError, ValueError, AttributeError):
        return {}
    if not isinstance(recorded, dict):
        return {}
    return {str(job): str(how) for job, how in recorded.items()}


def _scenario(study_out: Path, policy: str, repetition: int) -> Scenario:
    found = _stored_scenarios(study_out, policy)
    if not found:
        raise ExportError(f"{study_out}: no stored run of policy {policy!r} with its scenario")
    if repetition not in found:
        raise ExportError(f"{study_out}: policy {policy!r} has no repetition {repetition} (stored: {sorted(found)})")
    data, record = found[repetition]
    scenario = Scenario.from_dict(data, record)  # an edited record's error names it
    scenario._source = f"the study in {study_out}"  # what the exported files say they came from
    return scenario
