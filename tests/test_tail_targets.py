"""Tail-latency studies with several measured jobs ([[targets]]), SWF logs scaled to the fabric
(background.scale_nodes), timed collective loops behind a barrier, and the seed-scale study of
Salimi Beni & Cosenza (examples/dragonfly-tail/seed-scale.toml), planned, not run."""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from qoslab.analysis.tail import b_correlations
from qoslab.cli import app
from qoslab.errors import ScenarioError
from qoslab.io.scheduler import SchedulerLogError, read_swf
from qoslab.scenario import Scenario, read_toml
from qoslab.simulate import simulate
from qoslab.study import load_study
from qoslab.study.tail_model import TailStudy
from qoslab.study.tail_plan import TailPlan
from qoslab.study.tail_runner import TailStudyRunner
from qoslab.sweep.executors import LocalExecutor
from typer.testing import CliRunner

FOLDER = Path(__file__).parent.parent / "examples" / "dragonfly-tail"
EXAMPLE = FOLDER / "study.toml"
SEED_SCALE = FOLDER / "seed-scale.toml"
KTH = Path(__file__).resolve().parents[1].parent / "shared" / "real-data" / "scheduler-logs" / "KTH-SP2-1996-2.1-cln.swf.gz"
needs_kth = pytest.mark.skipif(
    not KTH.is_file(), reason=f"the KTH SP2 log is not in {KTH.parent} (../shared/real-data next to the repo); "
    "the seed-scale study reads it from there")


def loop(collective: str, nbytes: int, iterations: int = 40, barrier: bool = True) -> dict:
    return {"kind": "collective-loop", "collective": collective, "bytes": nbytes, "iterations": iterations,
            "barrier": barrier}


TWO = [{"name": "bcast-8B", "nodes": 8, "workload": loop("bcast", 8)},
       {"name": "alltoall-4KiB", "nodes": 4, "workload": loop("alltoall", 4096)}]


def study(**changes) -> TailStudy:
    data = {**read_toml(EXAMPLE), **changes}
    if "targets" in changes:
        data.pop("target", None)
    return TailStudy.from_dict(data, str(EXAMPLE))


# --- [[targets]] ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def two_targets(tmp_path_factory):
    """The small example with two targets, two snapshots, one routing, run end to end."""
    s = study(targets=TWO, snapshots=2, routings=["minimal"])
    executor = LocalExecutor(2)
    try:
        return TailStudyRunner(s, tmp_path_factory.mktemp("two"), executor, progress=False).run()
    finally:
        executor.close()


def test_several_targets_run_on_the_same_backgrounds_and_tables_name_them(two_targets):
    runs, iterations = two_targets.tables["tail_runs"], two_targets.tables["tail_iterations"]
    assert list(dict.fromkeys(runs["target"])) == ["bcast-8B", "alltoall-4KiB"]
    assert set(runs["status"]) <= {"completed", "not placed"}
    # (2 snapshots + the baseline) x 2 localities x 1 routing per target, less the unplaced ones
    placed = runs[runs["status"] == "completed"]
    assert len(runs) == 2 * 3 * 2 and two_targets.runs_total == len(placed)
    for name, per in iterations.groupby("target"):
        completed = placed[placed["target"] == name]
        assert len(per) == 40 * len(completed), name  # every timed iteration, of its own job only
    # The same snapshot gives both targets the same b (the published b is machine-wide).
    b = runs[runs["snapshot"] >= 0].groupby(["snapshot", "locality"])["b"].nunique(dropna=True)
    assert (b <= 1).all()
    medians = iterations[iterations["snapshot"] < 0].groupby("target")["latency_ns"].median()
    assert medians["alltoall-4KiB"] > medians["bcast-8B"]  # 4 KiB blocks to 3 peers against 8 B down a tree


def test_several_targets_report_correlations_per_target(two_targets):
    table = two_targets.tables["tail_correlations"]
    assert (two_targets.out / "tail_correlations.parquet").is_file()
    keys = table[["target", "locality", "routing"]].drop_duplicates()
    assert len(keys) == len(table) and set(table["target"]) == {"bcast-8B", "alltoall-4KiB"}
    # Two snapshots are too few for a correlation: the row says so instead of a number.
    assert (table["runs"] <= 2).all() and table["pearson_r"].isna().all()
    assert table["note"].str.contains("at least 3").all()
    page = (two_targets.out / "report.html").read_text()
    assert two_targets.report_error is None
    assert "bcast-8B" in page and "alltoall-4KiB" in page and "by message size" in page
    assert (two_targets.out / "figures" / "tail_histograms_bcast-8B.png").is_file()


def test_tail_runs_do_not_pay_for_interference_attribution(two_targets):
    from qoslab.sweep.store import RunStore

    store = RunStore(two_targets.out / "runs")
    run_id = two_targets.tables["tail_runs"]["run_id"].dropna().iloc[-1]
    record = store.get(run_id)
    assert record["run"]["mode"] == "tail" and not record.get("interference")


def test_b_correlations_are_taken_per_target_locality_and_routing():
    rows = []
    for target, sign in (("small", 1.0), ("large", -1.0)):
        for snapshot, b in enumerate([10.0, 20.0, 30.0, 40.0]):
            for iteration in range(5):
                rows.append({"target": target, "snapshot": snapshot, "locality": "spread-groups", "routing": "adaptive",
                             "b": b, "iteration": iteration, "latency_ns": 1000.0 + sign * b * (1 + iteration)})
    rows.append({"target": "small", "snapshot": -1, "locality": "spread-groups", "routing": "adaptive", "b": 0.0,
                 "iteration": 0, "latency_ns": 1.0})  # the baseline is not a background run
    table = b_correlations(pd.DataFrame(rows)).set_index("target")
    assert table.loc["small", "pearson_r"] == pytest.approx(1.0) and table.loc["small", "spearman_rho"] == pytest.approx(1.0)
    assert table.loc["large", "pearson_r"] == pytest.approx(-1.0)
    assert table.loc["small", "runs"] == 4 and table.loc["small", "b_max"] == 40.0
    # Against each run's mean too (the seed's statistic): here linear in b as well.
    assert table.loc["small", "pearson_r_mean"] == pytest.approx(1.0) and table.loc["large", "spearman_rho_mean"] == -1.0


def test_a_single_target_keeps_its_run_ids_and_labels():
    # Run ids of the example study as they were before [[targets]] existed: a resumed study
    # finds its runs. (Snapshot 1's id changed on 2026-11-27 with its background: synthetic
    # snapshots now fill their busy fraction.)
    specs, plan = TailPlan(study(snapshots=2)).plan()
    assert [s.run_id for s in specs[:2]] == ["r0-s-1-same-group-minimal-de36e32dd1", "r0-s-1-same-group-adaptive-4aa9727e48"]
    assert specs[-1].run_id == "r1-s1-spread-groups-adaptive-adc20dd31a"
    assert set(plan["target"]) == {"target"}
    several = TailPlan(study(targets=TWO, snapshots=1)).plan()[0]
    assert {s.policy for s in several} == {f"{t}-{loc}-minimal" for t in ("bcast-8B", "alltoall-4KiB")
                                           for loc in ("same-group", "spread-groups")} | \
        {f"{t}-{loc}-adaptive" for t in ("bcast-8B", "alltoall-4KiB") for loc in ("same-group", "spread-groups")}
    assert len({s.run_id for s in several}) == len(several)


def test_plan_counts_runs_of_several_targets():
    s = study(targets=TWO, snapshots=3)
    specs, _ = TailPlan(s).plan()
    size = TailPlan(s).size()
    assert size["runs"] == len(specs) == sum(size["runs_per_target"].values())
    assert size["runs"] == 2 * 4 * 2 * 2 - 2 * size["not_placed"]
    assert size["targets"] == ["bcast-8B", "alltoall-4KiB"]
    assert size["jobs"] == {"bcast-8B": {"nodes": 8, "ranks": 8, "ranks_per_node": 1},
                            "alltoall-4KiB": {"nodes": 4, "ranks": 4, "ranks_per_node": 1}}


@pytest.mark.parametrize("changes, key, expected", [
    ({"targets": [TWO[0], {**TWO[1], "name": "bcast-8B"}]}, "targets[1].name", "'bcast-8B' is already the name of targets[0]"),
    ({"targets": []}, "targets", "expected at least one [[targets]] table"),
    ({"targets": [{"nodes": 4}]}, "targets[0].name", "needs a name"),
    ({"targets": [{**TWO[0], "name": "bg3"}]}, "targets[0].name", "background job's name"),
    ({"targets": [TWO[0], {**TWO[1], "nodes": 100}]}, "targets[1].nodes", "100 nodes, but the fabric has 64 hosts"),
    ({"targets": [{**TWO[0], "colour": 2}]}, "targets[0].colour", "unknown key"),
    ({"background": {"scale_nodes": 2}}, "background.scale_nodes", 'only used with source = "swf"'),
    ({"background": {"source": "swf", "log": str(EXAMPLE), "scale_nodes": 0.5}}, "background.scale_nodes", "1"),
])
def test_bad_targets_and_scaling_name_the_key(changes, key, expected):
    with pytest.raises(ScenarioError) as error:
        study(**changes)
    assert f"{key}: " in str(error.value) and expected in str(error.value), str(error.value)


def test_target_and_targets_together_or_neither_are_refused():
    data = read_toml(EXAMPLE)
    with pytest.raises(ScenarioError) as both:
        TailStudy.from_dict({**data, "targets": TWO}, str(EXAMPLE))
    assert "targets: give [target] (one measured job) or [[targets]] (several), not both" in str(both.value)
    data.pop("target")
    with pytest.raises(ScenarioError) as neither:
        TailStudy.from_dict(data, str(EXAMPLE))
    assert "target: missing: give the measured job as [target], or several as [[targets]]" in str(neither.value)


def test_cli_names_a_bad_targets_table_without_a_traceback(tmp_path):
    text = EXAMPLE.read_text().replace('scenario = "scenario.toml"', f'scenario = "{FOLDER / "scenario.toml"}"')
    text = text.replace("[target]\n", '[[targets]]\nname = "a"\n') + '\n[[targets]]\nname = "a"\nnodes = 4\n'
    path = tmp_path / "dup.toml"
    path.write_text(text)
    result = CliRunner().invoke(app, ["study", str(path), "--plan", "--out", str(tmp_path / "out")])
    assert result.exit_code == 2, result.output
    assert f"{path}: targets[1].name: 'a' is already the name of targets[0]" in result.stderr
    assert "Traceback" not in result.output + result.stderr


# --- scheduler logs scaled to the fabric ----------------------------------------------------------

SWF = """\
; Version: 2.2
; MaxNodes: 64
; MaxProcs: 64
1 0 10 36000 16 -1 -1 16 -1 -1 1 1 1 -1 1 -1 -1 -1
2 5 10 36000 24 -1 -1 24 -1 -1 1 2 1 -1 1 -1 -1 -1
3 8 10 36000 1 -1 -1 1 -1 -1 1 3 1 -1 1 -1 -1 -1
"""


def swf_study(tmp_path: Path, scale: float, text: str = SWF, gzipped: bool = False) -> TailStudy:
    log = tmp_path / ("jobs.swf.gz" if gzipped else "jobs.swf")
    log.write_bytes(gzip.compress(text.encode()) if gzipped else text.encode())
    return study(snapshots=1, baseline=False, localities=["spread-groups"], routings=["minimal"],
                 background={"source": "swf", "log": str(log), "placement": "random", "scale_nodes": scale},
                 target={"nodes": 4, "workload": loop("allreduce", 64, 10)})


def test_scale_nodes_multiplies_job_sizes_and_splits_one_node_jobs(tmp_path):
    snap = TailPlan(swf_study(tmp_path, 1.2, gzipped=True)).snapshot(0)  # a gzipped log is read as it is
    # 16 -> 19, 24 -> 29 (28.8 rounded); the one-node job stays one job of one node (round(1.2) = 1)
    assert sorted(len(h) for h in snap.background) == [1, 19, 29]
    small = "1 0 10 36000 1 -1 -1 1 -1 -1 1 1 1 -1 1 -1 -1 -1\n2 0 10 36000 2 -1 -1 2 -1 -1 1 2 1 -1 1 -1 -1 -1\n"
    snap = TailPlan(swf_study(tmp_path, 2.4, small)).snapshot(0)
    assert sorted(len(h) for h in snap.background) == [1, 1, 5]  # round(2.4) one-node jobs; 2 x 2.4 = 4.8


# Job 1 runs from 10 s to 20,010 s, job 2 from 10,010 s to 30,010 s.
OVERLAPPING = """\
; MaxNodes: 64
1 0 10 20000 16 -1 -1 16 -1 -1 1 1 1 -1 1 -1 -1 -1
2 10000 10 20000 24 -1 -1 24 -1 -1 1 2 1 -1 1 -1 -1 -1
"""


def test_an_instant_without_room_for_the_target_is_drawn_again(tmp_path):
    # Scaled by 2, the jobs hold 32 and 48 of the 64 hosts: together they leave no room for the
    # 4-node target, so only instants at which one runs alone are snapshots.
    plan = TailPlan(swf_study(tmp_path, 2.0, OVERLAPPING))
    sizes = [sorted(len(h) for h in plan.snapshot(i).background) for i in range(8)]
    assert all(s in ([32], [48]) for s in sizes), sizes
    assert [32] in sizes and [48] in sizes


def test_a_log_that_never_leaves_room_for_the_target_is_named(tmp_path):
    s = swf_study(tmp_path, 4.0)  # 64 + 96 + 4 one-node jobs: the fabric is full at every instant
    with pytest.raises(ScenarioError) as error:
        TailPlan(s).plan()
    assert "background.log: in 1000 instants of the log, none left 4 of the fabric's 64 hosts free" in str(error.value)
    assert "scaled by 4" in str(error.value)


# --- the timed collective loop behind a barrier ------------------------------------------------------


def test_a_barrier_keeps_a_bcast_loop_from_pipelining_and_is_written_only_when_set():
    def p50(barrier: bool) -> float:
        scenario = Scenario.from_dict({"topology": {"kind": "single-switch", "hosts": 8}, "jobs": [
            {"name": "t", "nodes": 8, "placement": "contiguous", "workload": loop("bcast", 8, 50, barrier)}]})
        return simulate(scenario).summary["jobs"]["t"]["rank_iteration_ns"]["p50"]

    assert p50(False) < 50 and p50(True) > 100  # the leaves wait for a hop only with the barrier
    job = Scenario.from_dict({"jobs": [{"nodes": 2, "workload": loop("bcast", 8, barrier=False)}]}).jobs[0]
    assert "barrier" not in job.workload.model_dump()  # loops from before the key keep their run ids
    job = Scenario.from_dict({"jobs": [{"nodes": 2, "workload": loop("bcast", 8)}]}).jobs[0]
    assert job.workload.model_dump()["barrier"] is True


# --- the seed at its own scale ----------------------------------------------------------------------


@needs_kth
def test_the_kth_log_is_read_gzipped_where_it_lies():
    jobs = read_swf(KTH, 1)
    assert len(jobs) == 28475  # 28,476 jobs; one has no processor count
    assert max(j.node_count for j in jobs) == 100


@needs_kth
def test_seed_scale_study_plans_the_seed_s_runs(tmp_path):
    result = CliRunner().invoke(app, ["study", str(SEED_SCALE), "--plan", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    plan = json.loads((tmp_path / "plan.json").read_text())
    assert not (tmp_path / "runs").exists()
    names = [f"{c}-{s}" for c in ("bcast", "reduce", "alltoall") for s in ("8B", "4KiB", "64KiB")]
    assert plan["hosts"] == 972 and plan["targets"] == names
    assert plan["jobs"] == {n: {"nodes": 8, "ranks": 8, "ranks_per_node": 1} for n in names}
    assert plan["snapshots"] == 21 and plan["localities"] == ["same-group", "spread-groups"]
    assert plan["routings"] == ["adaptive", "minimal"]
    assert plan["runs"] == 9 * 21 * 2 * 2 - 2 * plan["not_placed"] == 720
    assert set(plan["runs_per_target"].values()) == {80}
    s = load_study(SEED_SCALE)
    loops = {(t.workload.collective, t.workload.bytes, t.workload.iterations, t.workload.barrier) for t in s.all_targets()}
    assert loops == {(c, b, 1000, True) for c in ("bcast", "reduce", "alltoall") for b in (8, 4096, 65536)}


@needs_kth
def test_seed_scale_backgrounds_carry_the_log_s_share_of_its_machine():
    from qoslab.io.scheduler import running_at

    plan = TailPlan(load_study(SEED_SCALE))
    log = read_swf(KTH, 1)
    start, end = min(j.start for j in log), max(j.end for j in log)
    for index in range(4):
        snap = plan.snapshot(index)
        t = float(snap.label.split("t = ")[1].split(" s")[0])
        assert start <= t <= end
        running = running_at(log, t)
        expected = sum(round(9.72 * j.node_count) if j.node_count > 1 else 10 for j in running)
        busy = sum(len(h) for h in snap.background)
        # The label's time is rounded to the second: a job starting or ending within it may differ.
        assert abs(busy - expected) <= 100, (index, busy, expected)
        assert busy <= 972 - 8
        assert math.isclose(busy / 972, sum(j.node_count for j in running) / 100, abs_tol=0.1)
    rows = plan.plan()[1]
    b = rows[rows["snapshot"] >= 0]["b"].dropna()
    assert b.between(0, 100).all() and np.ptp(b) > 50  # backgrounds from idle to nearly full


def test_log_jobs_too_large_to_run_beside_the_target_are_said_not_dropped_silently(tmp_path):
    # A 100-node job on a 64-host fabric that keeps 4 free: never in a snapshot, as before, but said.
    big = "; MaxNodes: 128\n1 0 10 36000 100 -1 -1 100 -1 -1 1 1 1 -1 1 -1 -1 -1\n" \
          "2 0 10 36000 2 -1 -1 2 -1 -1 1 2 1 -1 1 -1 -1 -1\n"
    plan = TailPlan(swf_study(tmp_path, 1.0, big))
    assert [len(h) for h in plan.snapshot(0).background] == [2]
    (warning,) = plan.warnings()
    assert warning.startswith("background.log: 1 job(s) of the log, 98.0% of its node-seconds, need more than the 60")
    assert plan.size()["warnings"] == [warning]
    assert TailPlan(swf_study(tmp_path, 1.0)).warnings() == []


def test_an_swf_log_without_wait_times_is_read_with_background_assume_zero_wait(tmp_path):
    nowait = "; MaxNodes: 64\n1 0 -1 36000 16 -1 -1 16 -1 -1 1 1 1 -1 1 -1 -1 -1\n"
    with pytest.raises(SchedulerLogError, match="background.assume_zero_wait = true"):
        TailPlan(swf_study(tmp_path, 1.0, nowait))
    s = swf_study(tmp_path, 1.0, nowait)
    s = TailStudy.from_dict({**s.model_dump(exclude_unset=True), "background": {
        **s.background.model_dump(exclude_unset=True), "assume_zero_wait": True}}, s.source)
    assert [len(h) for h in TailPlan(s).snapshot(0).background] == [16]


def test_synthetic_backgrounds_reach_their_drawn_busy_fraction():
    # A drawn job too large for what is left is passed over, not the end of the snapshot: until
    # 2026-11-27 one labelled "35% busy" could hold no background at all (16 points short on average).
    plan = TailPlan(study(snapshots=20))
    bg, hosts = plan.study.background, plan.hosts
    for index in range(20):
        busy = np.random.default_rng([plan.base.seed, 11, index]).uniform(*bg.occupancy)  # the first draw
        room = min(int(busy * hosts), hosts - plan.room_for)
        used = sum(len(h) for h in plan.snapshot(index).background)
        # Single-node jobs (single_node_fraction > 0) fill the last hosts: exactly the room.
        assert used == room, (index, used, room)
        assert plan.snapshot(index).label == f"synthetic, {used / hosts:.0%} busy"
