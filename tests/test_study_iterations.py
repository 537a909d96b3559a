"""A policy study's iterations table never sits whole in the driver (issue 18, part 4): the run
store writes it run by run, the analysis and the report read it a job and a policy at a time (or
one column, or one repetition) with the same results as on the whole table, and a finished study's
outcome loads it only when asked for by name. Hand-made runs in a real run store; no simulation."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from qoslab.analysis import congestion_impact, gpcnet_impact, iteration_stats
from qoslab.analysis.sliced import job_congestion_impact, job_gpcnet_impact, job_iteration_stats
from qoslab.plots.figures import _rank_grids
from qoslab.study.results import write_results
from qoslab.sweep.iterations import ROW_GROUP_ROWS, IterationsFile, StudyTables
from qoslab.sweep.store import RunStore
from qoslab.workloads import GpcnetTest

JOBS = ("a", "b", "c")
RANKS, ITERATIONS = 40, 25  # 1,000 rows per job and run
CANDIDATE = "q-opt/candidate[a=0; w=64:64]"  # a search candidate, and its search


def record(run_id: str, repetition: int, policy: str, mode: str, jobs: tuple[str, ...], iterations: int = ITERATIONS) -> dict:
    rows = RANKS * iterations
    columns: dict[str, list] = {"job": [], "rank": [], "host": [], "iteration": [], "time_ns": [], "mpi_wait_ns": [],
                                "sends": [], "send_latency_ns": []}
    runtime = {"alone": 100.0, "default": 150.0}.get(policy, 120.0)
    for job in jobs:
        columns["job"] += [job] * rows
        columns["rank"] += [r for r in range(RANKS) for _ in range(iterations)]
        columns["host"] += [r for r in range(RANKS) for _ in range(iterations)]
        columns["iteration"] += list(range(iterations)) * RANKS
        columns["time_ns"] += [runtime * 1e3 / iterations * (1 + 0.01 * (i % 7) + 0.003 * (i % 11) ** 2 + repetition)
                               for i in range(rows)]
        columns["mpi_wait_ns"] += [float(i % 13) for i in range(rows)]
        columns["sends"] += [3] * rows
        columns["send_latency_ns"] += [500.0 + i % 5 for i in range(rows)]
    types = {"job": pa.string(), "rank": pa.uint32(), "host": pa.uint32(), "iteration": pa.uint32(), "sends": pa.uint32()}
    table = pa.table({k: pa.array(v, types.get(k, pa.float64())) for k, v in columns.items()})
    run = {"run_id": run_id, "repetition": repetition, "seed": repetition, "policy": policy, "mode": mode,
           "alone_job": jobs[0] if mode == "alone" else None, "status": "completed", "error": None,
           "wall_seconds": 0.1, "sim_time_ns": 1e6, "packet_hops": 1}
    keys = {k: run[k] for k in ("run_id", "repetition", "seed", "policy", "mode", "alone_job")}
    job_rows = [{**keys, "job": job, "workload": "all-to-all", "nodes": 4, "ranks": RANKS, "completed": True,
                 "runtime_us": runtime * (1 + repetition)} for job in jobs]
    return {"run": run, "jobs": job_rows, "levels": [], "iterations": table}


def stored(tmp_path, policies: dict[str, int]) -> tuple[RunStore, list[str]]:
    """A run store of two repetitions: each job alone, then every job together under each of
    `policies` (name -> iterations its runs record)."""
    store = RunStore(tmp_path / "runs")
    ids = []
    for rep in range(2):
        for job in JOBS:
            ids.append(f"r{rep}-alone-{job}")
            store.put(record(ids[-1], rep, "alone", "alone", (job,)))
        for index, (policy, count) in enumerate(policies.items()):
            ids.append(f"r{rep}-policy{index}")
            store.put(record(ids[-1], rep, policy, "shared", JOBS, iterations=count))
    return store, ids


@pytest.fixture()
def study(tmp_path):
    """default, two policies and a search candidate."""
    store, ids = stored(tmp_path, dict.fromkeys(("default", "prio-a", "spread", CANDIDATE), ITERATIONS))
    return store, ids, tmp_path


def test_the_iterations_file_holds_every_run_in_order_and_the_search_copies_last(study):
    store, ids, tmp_path = study
    tables, iterations = store.tables(ids, tmp_path / "iterations.parquet", [(CANDIDATE, "q-opt")])
    whole = pd.read_parquet(iterations.path)
    listed = [(run_id, None) for run_id in ids] + [(run_id, "q-opt") for run_id in ids if run_id.endswith("policy3")]
    expected = []
    for run_id, renamed in listed:
        stored = store.get(run_id)
        run = stored["run"]
        expected.append(stored["iterations"].to_pandas().assign(
            run_id=run_id, repetition=run["repetition"], policy=renamed or run["policy"], mode=run["mode"]))
    pd.testing.assert_frame_equal(whole, pd.concat(expected, ignore_index=True)[list(whole.columns)], check_dtype=False)
    assert list(whole["policy"].unique()) == ["alone", "default", "prio-a", "spread", CANDIDATE, "q-opt"]
    # The small tables list the copies too, after the others.
    assert list(tables["runs"]["policy"])[-2:] == ["q-opt", "q-opt"]
    assert list(tables["jobs"]["policy"]).count("q-opt") == 2 * len(JOBS)
    # Runs of a few thousand rows share a row group (36,000 rows here).
    assert len(whole) == 36_000 < ROW_GROUP_ROWS and pq.ParquetFile(iterations.path).metadata.num_row_groups == 1
    assert iterations.present == {job: ["alone", "default", "prio-a", "spread", CANDIDATE, "q-opt"] for job in JOBS}


def test_a_read_is_one_job_and_leaves_out_excluded_policies(study):
    store, ids, tmp_path = study
    _, iterations = store.tables(ids, tmp_path / "iterations.parquet")
    kept = iterations.without([CANDIDATE])
    rows = kept.read("b")
    assert set(rows["job"]) == {"b"} and CANDIDATE not in set(rows["policy"])
    assert len(rows) == 2 * (1 + 3) * RANKS * ITERATIONS  # per repetition: b alone and under 3 policies
    assert kept.jobs() == list(JOBS)
    assert kept.first_repetition("b") == 0 and kept.first_repetition("b", ["nobody"]) is None
    assert kept.without(["alone", "default", "prio-a", "spread"]).empty
    # A job the study never ran is an error naming its jobs, not an empty table.
    with pytest.raises(ValueError, match=r"no job 'nojob' in this study \(its jobs: " + ", ".join(sorted(JOBS))):
        kept.read("nojob")


def test_the_analysis_and_report_read_a_slice_at_a_time(study, monkeypatch):
    store, ids, tmp_path = study
    tables, iterations = store.tables(ids, tmp_path / "iterations.parquet")
    reads: list[tuple] = []
    original = IterationsFile.read

    def read(self, job=None, policies=None, columns=None, repetition=None):
        reads.append((job, policies, columns, repetition))
        return original(self, job, policies, columns, repetition)

    monkeypatch.setattr(IterationsFile, "read", read)
    meta = {"name": "streamed", "seeds": [0, 1], "policies": [{"name": p, "description": p} for p in ("default", "prio-a", "spread")],
            "base_scenario": {"topology": {"kind": "single-switch", "hosts": 8}}}
    files, results = write_results(tmp_path, tables, iterations, None, meta, report=True)
    assert reads and all(job is not None for job, *_ in reads)  # never every job
    assert {job for job, *_ in reads} == set(JOBS)
    assert all(policies is not None for _, policies, _, _ in reads)  # a job under some policies, never all of them
    page = (tmp_path / "report.html").read_text()
    assert CANDIDATE not in page  # candidates are not compared
    for job in JOBS:
        assert f"{job}: iteration time distribution per policy: alone, default, prio-a, spread" in page
    assert set(results["policies"]["policy"]) == {"default", "prio-a", "spread"}


def test_a_finished_studys_tables_load_the_iterations_only_when_asked(study, monkeypatch):
    store, ids, tmp_path = study
    tables, iterations = store.tables(ids, tmp_path / "iterations.parquet")
    outcome_tables = StudyTables(tables, iterations)
    calls = []
    monkeypatch.setattr(IterationsFile, "read", lambda self, *args: calls.append(args) or pd.DataFrame())
    assert sorted(outcome_tables) == sorted([*tables, "iterations"]) and len(outcome_tables) == len(tables) + 1
    assert outcome_tables.get("jobs") is tables["jobs"] and not calls
    outcome_tables["iterations"]
    assert calls == [()]


def test_the_sliced_analyses_equal_the_whole_tables(tmp_path):
    """A job and a policy at a time (beside the alone runs) gives the very rows the analyses give
    on the whole table, in the same order; here with a policy whose runs stopped early (fewer
    iterations) and two GPCNeT tests over blocks of iterations."""
    store, ids = stored(tmp_path, {"default": ITERATIONS, "short": ITERATIONS - 6, "prio": ITERATIONS})
    _, iterations = store.tables(ids, tmp_path / "iterations.parquet")
    whole = pd.read_parquet(iterations.path)
    tests = [GpcnetTest("lat", "latency", "usec", ((0, 10), (10, 10)), halve=True),
             GpcnetTest("bw", "bandwidth", "MiB/s/rank", ((20, 5),), bytes_per_iteration=1 << 16)]
    for job in JOBS:
        rows = whole[whole["job"] == job]
        pd.testing.assert_frame_equal(job_iteration_stats(iterations, job), iteration_stats(rows))
        pd.testing.assert_frame_equal(job_congestion_impact(iterations, job), congestion_impact(rows, job))
        expected = gpcnet_impact(rows, job, tests)
        assert len(expected) == 2 * 3 - 1  # "short" has no sample of "bw"
        pd.testing.assert_frame_equal(job_gpcnet_impact(iterations, job, tests), expected)
        shown = ["alone", "short", "prio"]
        from_file, from_table = _rank_grids(iterations, job, shown), _rank_grids(whole, job, shown)
        assert list(from_file) == shown and all(np.array_equal(from_file[p], from_table[p]) for p in shown)
