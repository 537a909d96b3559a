"""One run of a study, as a worker executes it: scenario in, tidy rows out. Never raises for a
failed simulation: the failure is the record (status and error), so a study goes on."""

from __future__ import annotations

import hashlib
import json
import re
import traceback
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from qoslab.levels import link_level

RunRecord = dict[str, Any]  # {"run": row, "jobs": [rows], "levels": [rows], "iterations": Arrow table}


@dataclass(frozen=True)
class RunSpec:
    """One simulation of a study. `scenario` is a complete, placed scenario (jobs on explicit
    hosts), so the same spec gives the same result wherever it runs."""

    run_id: str
    repetition: int
    seed: int
    policy: str  # the policy's name; "alone" for a job alone
    # "alone" | "shared" | "tail": a tail-latency run, shared but without the interference
    # attribution, which its tables do not use (it costs a quarter of such a run's time)
    mode: str
    alone_job: str | None
    scenario: dict[str, Any]
    source: str | None = None  # the scenario's file, for relative trace paths and messages

    def row(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "repetition": self.repetition,
            "seed": self.seed,
            "policy": self.policy,
            "mode": self.mode,
            "alone_job": self.alone_job,
        }


def run_id(repetition: int, label: str, scenario: dict[str, Any]) -> str:
    """Readable and content-addressed: a changed scenario or policy never reuses a stored run."""
    from qoslab.scenario import run_identity

    digest = hashlib.sha256(json.dumps(run_identity(scenario), sort_keys=True).encode()).hexdigest()[:10]
    slug = re.sub(r"[^A-Za-z0-9.=,_-]+", "_", label).strip("_")[:60]
    return f"r{repetition}-{slug}-{digest}"


def failed_record(spec: RunSpec, message: str) -> RunRecord:
    """The record of a run that produced nothing (it could not start, or its worker died)."""
    row = {**spec.row(), "status": "error", "error": message, "wall_seconds": 0.0, "sim_time_ns": 0.0, "packet_hops": 0}
    return {"run": row, "jobs": [], "levels": [], "iterations": empty_iterations()}


def execute(spec: RunSpec) -> RunRecord:
    """Runs one spec in this process and returns its record, failed or not."""
    from qoslab.errors import Deadlock, ScenarioError
    from qoslab.scenario import Scenario
    from qoslab.simulate import simulate

    row = {**spec.row(), "status": "error", "error": None, "wall_seconds": 0.0, "sim_time_ns": 0.0, "packet_hops": 0}
    result = None
    scenario = None
    try:
        data = spec.scenario
        if spec.mode == "shared":
            # Who delayed whom, for the report: outputs only, so the run id (which hashes the
            # spec's scenario) and every other result stay as they are.
            data = {**data, "run": {**data.get("run", {}), "interference": True}}
        scenario = Scenario.from_dict(data, spec.source)
        result = simulate(scenario)
        row["status"] = result.summary.get("status", "completed")
    except Deadlock as stuck:
        result = stuck.result
        row.update(status="deadlock", error=str(stuck))
    except ScenarioError as error:
        row["error"] = str(error)
    except KeyboardInterrupt:
        raise
    except Exception as error:  # noqa: BLE001 - a bug or engine error: recorded, the study goes on
        last = traceback.extract_tb(error.__traceback__)[-1:] if error.__traceback__ else []
        where = f" (at {last[0].filename}:{last[0].lineno})" if last else ""
        row["error"] = f"{type(error).__name__}: {error}{where}"
    if result is None:
        return failed_record(spec, row["error"])
    summary = result.summary
    row.update(
        wall_seconds=float(summary.get("wall_seconds", 0.0)),
        sim_time_ns=float(summary.get("sim_time_ns", 0.0)),
        packet_hops=int(summary.get("packet_hops", 0)),
    )
    if row["status"] == "time_limit":
        row["error"] = "time limit reached before every job completed once (run.duration_us)"
    from qoslab._version import MODEL_VERSION

    record: RunRecord = {
        "run": row,
        "model": MODEL_VERSION,
        "jobs": job_rows(spec, summary, scenario),
        "levels": level_rows(spec, result.links),
        "iterations": iteration_table(spec, result.ranks),
        "interference": interference_rows(spec, result.interference),
        "vl_levels": vl_level_rows(spec, result.links),
        # The scenario as run: `qoslab export opensm` turns a study's policy back into configuration.
        "scenario": spec.scenario,
    }
    if summary.get("warnings"):  # what a trace's reader skipped or approximated
        record["warnings"] = list(summary["warnings"])
    return record


def job_rows(spec: RunSpec, summary: dict[str, Any], scenario: Any) -> list[dict[str, Any]]:
    rows = []
    jobs = {job["name"]: job for job in spec.scenario.get("jobs", [])}
    for name, figures in (summary.get("jobs") or {}).items():
        job = jobs.get(name, {})
        runtime = figures.get("runtime_us")
        rows.append(
            {
                **spec.row(),
                "job": name,
                "workload": (job.get("workload") or {}).get("kind"),
                "nodes": int(figures.get("nodes", 0)),
                "ranks": int(figures.get("ranks", 0)),
                "runtime_us": float("nan") if runtime is None else float(runtime),
                "completed": bool(figures.get("completed", False)),
                "runs_completed": int(figures.get("runs_completed", 0)),
                "bytes_sent": int(figures.get("bytes_sent", 0)),
                "mpi_wait_fraction": float(figures.get("mpi_wait_fraction", 0.0)),
                "sl": int(job.get("sl", 0)),
                "sl_policy": (job.get("sl_policy") or {}).get("kind", "job"),
                "bytes_by_sl": json.dumps(figures.get("bytes_by_sl") or {}, sort_keys=True),
                "prioritized_ranks": json.dumps(figures.get("prioritized_ranks")),
            }
        )
    return rows


def interference_rows(spec: RunSpec, table: pa.Table | None) -> list[dict[str, Any]]:
    """Who delayed whom in a shared run, per (kind, victim, culprit) and link level, direction
    and VL (the run's interference.parquet summed over the links of each level)."""
    if table is None or table.num_rows == 0:
        return []
    totals: dict[tuple[Any, ...], float] = {}
    for row in table.select(["kind", "victim", "culprit", "level", "direction", "vl", "wait_ns"]).to_pylist():
        key = (row["kind"], row["victim"], row["culprit"], row["level"], row["direction"], row["vl"])
        totals[key] = totals.get(key, 0.0) + row["wait_ns"]
    return [{**spec.row(), "kind": k[0], "victim": k[1], "culprit": k[2], "level": k[3], "direction": k[4],
             "vl": k[5], "wait_ns": v} for k, v in sorted(totals.items(), key=lambda kv: tuple(map(str, kv[0])))]


def vl_level_rows(spec: RunSpec, links: pa.Table) -> list[dict[str, Any]]:
    """Busy time per tree level, direction and VL (for the report's utilisation heatmap)."""
    if links is None or links.num_rows == 0 or "src" not in links.column_names:
        return []
    totals: dict[tuple[int, str, int], dict[str, Any]] = {}
    columns = (links.column(name).to_pylist() for name in ("link", "src", "dst", "vl", "bytes", "busy_ns"))
    for link, src, dst, vl, sent, busy in zip(*columns, strict=True):
        level = link_level(src, dst)
        if level is None:
            continue
        entry = totals.setdefault((*level, int(vl)), {"bytes": 0, "busy_ns": 0.0, "links": set()})
        entry["bytes"] += int(sent)
        entry["busy_ns"] += float(busy)
        entry["links"].add(link)
    return [{**spec.row(), "level": lv, "direction": d, "vl": vl, "bytes": e["bytes"], "links": len(e["links"]),
             "busy_ns": e["busy_ns"]} for (lv, d, vl), e in sorted(totals.items())]


def level_rows(spec: RunSpec, links: pa.Table) -> list[dict[str, Any]]:
    """Bytes per tree level and direction: level l holds the links between levels l-1 and l."""
    if links is None or links.num_rows == 0 or "src" not in links.column_names:
        return []
    totals: dict[tuple[int, str], dict[str, Any]] = {}
    columns = (links.column(name).to_pylist() for name in ("link", "src", "dst", "bytes", "busy_ns"))
    for link, src, dst, sent, busy in zip(*columns, strict=True):
        key = link_level(src, dst)
        if key is None:
            continue
        entry = totals.setdefault(key, {"bytes": 0, "busy_ns": 0.0, "links": set()})
        entry["bytes"] += int(sent)
        entry["busy_ns"] += float(busy)
        if sent:
            entry["links"].add(link)
    return [
        {**spec.row(), "level": level, "direction": direction, "bytes": e["bytes"],
         "links_used": len(e["links"]), "busy_ns": e["busy_ns"]}
        for (level, direction), e in sorted(totals.items())
    ]


ITERATION_COLUMNS = ("job", "rank", "host", "iteration", "time_ns", "mpi_wait_ns", "sends", "send_latency_ns")


def empty_iterations() -> pa.Table:
    return pa.table(
        {
            "job": pa.array([], pa.string()),
            "rank": pa.array([], pa.uint32()),
            "host": pa.array([], pa.uint32()),
            "iteration": pa.array([], pa.uint32()),
            "time_ns": pa.array([], pa.float64()),
            "mpi_wait_ns": pa.array([], pa.float64()),
            "sends": pa.array([], pa.uint32()),
            "send_latency_ns": pa.array([], pa.float64()),
        }
    )


def iteration_table(spec: RunSpec, ranks: pa.Table | None) -> pa.Table:
    """The jobs' per-rank iteration records of their first run (the one whose runtime counts)."""
    if ranks is None or ranks.num_rows == 0:
        return empty_iterations()
    import pyarrow.compute as pc

    first = ranks.filter(pc.equal(ranks.column("run"), 0))
    return pa.table(
        {
            "job": first.column("job_name"),
            "rank": first.column("rank"),
            "host": first.column("host"),
            "iteration": first.column("iteration"),
            "time_ns": first.column("time_ns"),
            "mpi_wait_ns": first.column("mpi_wait_ns"),
            "sends": first.column("sends"),
            "send_latency_ns": first.column("send_latency_ns"),
        }
    )
