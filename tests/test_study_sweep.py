"""Sweeps of any scenario key (issue 18, part 4): every point is the study it would be with that
value set, the points' runs go through one run store, the tables across points are small and
every point's run tables read lazily as one dataset."""

import datetime

import pandas as pd
import pytest
from qoslab.cli import app
from qoslab.errors import ScenarioError
from qoslab.study.model import Study
from qoslab.study.sweep_runner import sweep_dataset
from qoslab.sweep.executors import LocalExecutor
from two_jobs import DATA as SCENARIO
from typer.testing import CliRunner

# Two levels, so that points with fabric.data_vls = 2 are valid for it too.
POLICIES = [{"kind": "default"}, {"kind": "per-job", "assignment": {"a2a": 1, "flood": 0}, "weights": [254, 1]}]


def study(**keys) -> Study:
    return Study.from_dict({"scenario": SCENARIO, "policies": POLICIES, "repetitions": 2, **keys}, "study.toml")


def test_each_point_is_the_study_with_that_value(tmp_path):
    sweep = study(sweep=[{"key": "jobs[0].workload.bytes", "values": [4096, 65536]}])
    assert sweep.points() == [{"jobs[0].workload.bytes": 4096}, {"jobs[0].workload.bytes": 65536}]
    outcome = sweep.run(tmp_path / "sweep", executor=LocalExecutor(1))
    table = outcome.tables["sweep"]
    assert list(table["point"]) == [0, 0, 1, 1] and list(table["jobs[0].workload.bytes"]) == [4096, 4096, 65536, 65536]
    for point, size in enumerate((4096, 65536)):
        scenario = {**SCENARIO, "jobs": [{**SCENARIO["jobs"][0], "workload": {**SCENARIO["jobs"][0]["workload"], "bytes": size}},
                                         SCENARIO["jobs"][1]]}
        alone = Study.from_dict({"scenario": scenario, "policies": POLICIES, "repetitions": 2}, "study.toml")
        expected = alone.run(tmp_path / f"alone-{point}", executor=LocalExecutor(1)).tables["slowdown"]
        got = pd.read_parquet(tmp_path / "sweep" / "points" / f"point={point}" / "slowdown.parquet")
        pd.testing.assert_frame_equal(got.reset_index(drop=True), expected.reset_index(drop=True))
    # bigger all-to-all messages: the all-to-all's own runtime alone grows
    jobs = sweep_dataset(tmp_path / "sweep", "jobs").to_table(filter=None).to_pandas()
    assert set(jobs["point"]) == {0, 1} and len(jobs) == sum(
        len(pd.read_parquet(tmp_path / "sweep" / "points" / f"point={p}" / "jobs.parquet")) for p in (0, 1))
    alone_a2a = jobs[(jobs["mode"] == "alone") & (jobs["job"] == "a2a")].groupby("point")["runtime_us"].mean()
    assert alone_a2a[1] > alone_a2a[0]
    assert (tmp_path / "sweep" / "report.html").is_file() and (tmp_path / "sweep" / "figures" / "sweep.png").is_file()
    view = outcome._repr_html_()  # in a notebook: the per-point table and the sweep figure
    assert "<table" in view and "jobs[0].workload.bytes" in view and "data:image/png;base64," in view
    again = sweep.run(tmp_path / "sweep", executor=LocalExecutor(1))
    assert again.runs_reused == again.runs_total == outcome.runs_total == 2 * (4 + 4)
    # A point exports as a study of its own (its runs are in the sweep's store); the sweep's own
    # folder says to pick a point.
    from qoslab.deploy.names import ExportError
    from qoslab.deploy.study_policy import study_scenario

    point = study_scenario(tmp_path / "sweep" / "points" / "point=1", "default", 0)
    assert point.scenario.jobs[0].workload.bytes == 65536
    with pytest.raises(ExportError, match="a sweep's folder, .*export one point's"):
        study_scenario(tmp_path / "sweep", None, 0)
    # A value taken out of the list: the same study, its runs found again, and the folder of the
    # point it no longer has removed, so that no reader of points/ takes it for one of its own;
    # a point's folder is written whole, so nothing written for its earlier value stays.
    (tmp_path / "sweep" / "points" / "point=0" / "search.parquet").write_bytes(b"left from another value")
    fewer = study(sweep=[{"key": "jobs[0].workload.bytes", "values": [65536]}]).run(tmp_path / "sweep",
                                                                                    executor=LocalExecutor(1))
    assert fewer.runs_reused == fewer.runs_total == 2 * 4
    assert sorted(p.name for p in (tmp_path / "sweep" / "points").iterdir()) == ["point=0"]
    assert not (tmp_path / "sweep" / "points" / "point=0" / "search.parquet").exists()
    assert set(sweep_dataset(tmp_path / "sweep", "jobs").to_table().column("point").to_pylist()) == {0}


def test_grid_and_zip():
    axes = [{"key": "jobs[0].workload.bytes", "values": [4096, 8192]}, {"key": "fabric.data_vls", "values": [2, 4]}]
    assert len(study(sweep=axes).points()) == 4
    zipped = study(sweep=axes, sweep_mode="zip").points()
    assert zipped == [{"jobs[0].workload.bytes": 4096, "fabric.data_vls": 2}, {"jobs[0].workload.bytes": 8192, "fabric.data_vls": 4}]
    assert study(sweep=axes).plan()["runs"] == 4 * (4 + 4) and study(sweep=axes).plan()["sweep_points"] == 4


@pytest.mark.parametrize(("keys", "words"), [
    ({"sweep": [{"key": "fabric.data_vls", "values": [2, 3]}]}, "sweep (fabric.data_vls = 3): fabric.data_vls"),
    ({"sweep": [{"key": "jobs[5].nodes", "values": [2]}]}, "jobs has 2 entries, no index 5"),
    ({"sweep": [{"key": "seed", "values": [1, 2]}]}, "sweep[0].key: seeds come from repetitions"),
    ({"sweep": [{"key": "fabric.data_vls", "values": [2]}, {"key": "fabric.data_vls", "values": [4]}]}, "swept twice"),
    ({"sweep": [{"key": "fabric.data_vls", "values": [2, 4]}, {"key": "jobs[0].nodes", "values": [2]}], "sweep_mode": "zip"},
     "as many values"),
    ({"sweep": [{"key": "fabric.data_vls", "values": []}]}, "sweep[0].values"),
    ({"sweep": [{"key": "fabric.data_vls", "values": [4, 2, 4]}]}, "sweep[0].values: 4 is listed twice"),
    # A TOML date is no scenario value: the point's own error, not a traceback.
    ({"sweep": [{"key": "fabric.mtu_bytes", "values": [2048, datetime.date(1979, 5, 27)]}]}, "fabric.mtu_bytes: expected 256"),
    ({"sweep_mode": "zip"}, "sweep_mode: there is no [[sweep]]"),
    # Too many points is said first, also when zipped (it was not checked there), before the values
    # are searched for duplicates (that search was quadratic: minutes for 100,000 values).
    ({"sweep": [{"key": "jobs[0].workload.bytes", "values": [*range(1, 100_002), 1]},
                {"key": "jobs[0].workload.iterations", "values": [*range(1, 100_003)]}], "sweep_mode": "zip"},
     "sweep: 100002 points; at most 100000"),
    ({"sweep": [{"key": "jobs[0].workload.bytes", "values": [*range(1, 400), 1]},
                {"key": "jobs[0].workload.iterations", "values": [*range(1, 401)]}]},
     "sweep: 160000 points; at most 100000"),
    # A point valid as a scenario on which a policy is not: four SLs on two VLs.
    ({"sweep": [{"key": "fabric.data_vls", "values": [2]}],
      "policies": [{"kind": "per-job", "assignment": "all"}]},
     "sweep (fabric.data_vls = 2): policies[0].weights: the policy uses"),
])
def test_bad_sweeps_are_refused_before_any_run(keys, words):
    with pytest.raises(ScenarioError) as caught:
        study(**keys)
    assert "study.toml" in str(caught.value) and words in str(caught.value), str(caught.value)


def test_the_cli_runs_a_sweep_and_array_tasks_collect_the_same(tmp_path):
    (tmp_path / "base.toml").write_text(
        '[topology]\nkind = "xgft"\nm = [4, 4]\nw = [1, 2]\n'
        '[[jobs]]\nname = "a2a"\nnodes = 4\nplacement = "random"\nworkload = { kind = "all-to-all", bytes = 32768, iterations = 2 }\n'
        '[[jobs]]\nname = "flood"\nnodes = 4\nplacement = "random"\nworkload = { kind = "flood-pairs", iterations = 10 }\n')
    (tmp_path / "s.toml").write_text('scenario = "base.toml"\n[[policies]]\nkind = "default"\n'
                                     '[[sweep]]\nkey = "fabric.data_vls"\nvalues = [2, 4]\n')
    whole = CliRunner().invoke(app, ["study", str(tmp_path / "s.toml"), "--out", str(tmp_path / "whole"), "--workers", "1"])
    assert whole.exit_code == 0, whole.output
    assert "sweep: per point and policy" in whole.output and "2 points" in whole.output
    for task in range(2):
        done = CliRunner().invoke(app, ["study", str(tmp_path / "s.toml"), "--out", str(tmp_path / "array"),
                                        "--array-task", f"{task}/2", "--workers", "1"])
        assert done.exit_code == 0, done.output
    collected = CliRunner().invoke(app, ["study", str(tmp_path / "s.toml"), "--out", str(tmp_path / "array"), "--collect"])
    assert collected.exit_code == 0, collected.output
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "whole" / "sweep.parquet"),
                                  pd.read_parquet(tmp_path / "array" / "sweep.parquet"))


def test_points_in_small_chunks_give_the_same_tables(tmp_path, monkeypatch):
    import qoslab.study.sweep_runner as sweep_runner

    staged = [*POLICIES, {"kind": "per-rank", "job": "a2a", "fraction": 0.25}]  # a second stage per point
    make = lambda: Study.from_dict({"scenario": SCENARIO, "policies": staged, "repetitions": 1,  # noqa: E731
                                    "sweep": [{"key": "jobs[0].workload.bytes", "values": [4096, 16384, 65536]}]},
                                   "study.toml")
    whole = make().run(tmp_path / "whole", executor=LocalExecutor(1)).tables["sweep"]
    monkeypatch.setattr(sweep_runner, "CHUNK_RUNS", 3)  # one point a chunk (a point has 4 first-stage runs)
    chunked = make().run(tmp_path / "chunked", executor=LocalExecutor(1)).tables["sweep"]
    pd.testing.assert_frame_equal(whole, chunked)
    assert list(whole["policy"].unique()) == ["default", "per-job[a2a=1 flood=0]", "per-rank[a2a,0.25,slowest-sends]"]
    assert whole["total_contention_us"].notna().all()


def test_array_tasks_over_chunks_with_later_stages(tmp_path, monkeypatch):
    import qoslab.study.sweep_runner as sweep_runner

    monkeypatch.setattr(sweep_runner, "CHUNK_RUNS", 3)  # one point a chunk
    (tmp_path / "base.toml").write_text(
        '[topology]\nkind = "xgft"\nm = [4, 4]\nw = [1, 2]\n'
        '[[jobs]]\nname = "a2a"\nnodes = 4\nplacement = "random"\nworkload = { kind = "all-to-all", bytes = 32768, iterations = 2 }\n'
        '[[jobs]]\nname = "flood"\nnodes = 4\nplacement = "random"\nworkload = { kind = "flood-pairs", iterations = 10 }\n')
    (tmp_path / "s.toml").write_text('scenario = "base.toml"\n[[policies]]\nkind = "default"\n'
                                     '[[policies]]\nkind = "per-rank"\njob = "a2a"\nfraction = 0.25\n'
                                     '[[sweep]]\nkey = "jobs[0].workload.bytes"\nvalues = [4096, 65536]\n')

    def cli(*args):
        return CliRunner().invoke(app, ["study", str(tmp_path / "s.toml"), *map(str, args)])

    whole = cli("--out", tmp_path / "whole", "--workers", "1")
    assert whole.exit_code == 0, whole.output
    for _ in range(3):  # run the array until no task waits for another's runs
        outputs = [cli("--out", tmp_path / "array", "--array-task", f"{t}/2", "--workers", "1") for t in range(2)]
        assert all(o.exit_code == 0 for o in outputs), [o.output for o in outputs]
        if not any("waits for" in o.output for o in outputs):
            break
    else:
        raise AssertionError("the array never finished its later stages")
    collected = cli("--out", tmp_path / "array", "--collect")
    assert collected.exit_code == 0, collected.output
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "whole" / "sweep.parquet"),
                                  pd.read_parquet(tmp_path / "array" / "sweep.parquet"))


def test_points_finished_by_the_workers_give_the_same_tables(tmp_path, monkeypatch):
    """With worker processes, each point's folder is written by a worker, not by the driver (which
    would set the pace of a sweep of short runs); the tables are the same. A point whose worker
    fails is finished by the driver instead."""
    from concurrent.futures import Future
    from concurrent.futures.process import BrokenProcessPool

    import qoslab.study.runner as runner
    import qoslab.study.sweep_runner as sweep_runner

    make = lambda: study(sweep=[{"key": "jobs[0].workload.bytes", "values": [4096, 16384, 65536]}])  # noqa: E731
    monkeypatch.setattr(sweep_runner, "CHUNK_RUNS", 3)  # a chunk a point: points finish while the next run
    here = []
    finish = runner.StudyRunner.finish
    monkeypatch.setattr(runner.StudyRunner, "finish", lambda self, report=True: here.append(self.out) or finish(self, report))

    inline = make().run(tmp_path / "inline", executor=LocalExecutor(1)).tables["sweep"]
    assert len(here) == 0  # one worker: finished at once through submit, not by the driver's fallback
    pool = LocalExecutor(2)
    try:
        pooled = make().run(tmp_path / "pooled", executor=pool).tables["sweep"]
    finally:
        pool.close()
    pd.testing.assert_frame_equal(inline, pooled)
    assert len(here) == 0
    for point in range(3):
        for table in ("jobs", "slowdown", "policies"):
            got = pd.read_parquet(tmp_path / "pooled" / "points" / f"point={point}" / f"{table}.parquet")
            pd.testing.assert_frame_equal(got, pd.read_parquet(tmp_path / "inline" / "points" / f"point={point}" / f"{table}.parquet"))

    class LosesWorkers(LocalExecutor):
        def submit(self, fn, arg):
            lost: Future = Future()
            lost.set_exception(BrokenProcessPool("a worker died"))
            return lost

    lossy = make().run(tmp_path / "lossy", executor=LosesWorkers(1)).tables["sweep"]
    pd.testing.assert_frame_equal(inline, lossy)
    assert len(here) == 3  # each point finished again by the driver


def _die(_):
    import os

    os._exit(1)  # a worker lost while doing other work than a run (killed for memory, say)


def _double(x):
    return 2 * x


def test_a_pool_broken_outside_a_batch_of_runs_is_replaced():
    from concurrent.futures.process import BrokenProcessPool

    from qoslab.sweep.execute import RunSpec
    from two_jobs import DATA

    pool = LocalExecutor(2)
    try:
        with pytest.raises(BrokenProcessPool):
            pool.submit(_die, 0).result()
        assert pool.submit(_double, 21).result() == 42
        with pytest.raises(BrokenProcessPool):
            pool.submit(_die, 0).result()
        specs = [RunSpec(run_id=f"r{i}", repetition=0, seed=1, policy="default", mode="shared", alone_job=None,
                         scenario=DATA, source="t.toml") for i in range(2)]
        records = list(pool.run(specs))
        assert [r["run"]["status"] for r in records] == ["completed", "completed"]
    finally:
        pool.close()


def _specs(count):
    from qoslab.sweep.execute import RunSpec

    return [RunSpec(run_id=f"r{i}", repetition=i, seed=1 + i, policy="default", mode="shared", alone_job=None,
                    scenario=SCENARIO, source="t.toml") for i in range(count)]


def test_local_workers_store_their_runs_as_the_driver_would(tmp_path):
    """run_into: each worker stores its run itself and hands back None (a record's tables do not
    cross to the driver); what it stores is what the driver stores from `run`. A worker that
    cannot store its run hands the record back whole, for the driver to store (and to stop the
    study if it cannot either), and does not make a deleted store again."""
    from qoslab.sweep.store import RunStore

    specs = _specs(3)
    by_workers, by_driver = RunStore(tmp_path / "workers"), RunStore(tmp_path / "driver")
    pool = LocalExecutor(2)
    try:
        assert list(pool.run_into(specs, by_workers)) == [None] * 3
        for record in pool.run(specs):
            by_driver.put(record)
        deleted = RunStore(tmp_path / "deleted")
        deleted.root.rmdir()
        handed_back = list(pool.run_into(specs[:2], deleted))
    finally:
        pool.close()
    for spec in specs:
        mine, theirs = by_workers.get(spec.run_id), by_driver.get(spec.run_id)
        assert mine.keys() == theirs.keys()
        assert mine["iterations"].equals(theirs["iterations"]) and mine["iterations"].num_rows > 0
        assert {k: v for k, v in mine["run"].items() if k != "wall_seconds"} == \
            {k: v for k, v in theirs["run"].items() if k != "wall_seconds"}
        assert mine["jobs"] == theirs["jobs"] and mine["scenario"] == theirs["scenario"]
    # In the order the runs finish.
    assert sorted((r["run"]["run_id"], r["run"]["status"]) for r in handed_back) == [("r0", "completed"), ("r1", "completed")]
    assert not deleted.root.exists()


def test_a_stage_runs_a_run_asked_for_twice_once(tmp_path):
    """A sweep's chunk asks for the same alone run at every point the swept key leaves it alone:
    it runs once (two workers storing one run at the same moment would collide)."""
    from qoslab.study.stages import Stages
    from qoslab.sweep.store import RunStore

    class Counts(LocalExecutor):
        def run_into(self, specs, store):
            self.asked = [s.run_id for s in specs]
            return super().run_into(specs, store)

    executor = Counts(1)
    specs = _specs(2)
    Stages(RunStore(tmp_path / "runs"), executor, None, progress=False).run([*specs, *specs, specs[0]], "twice")
    assert executor.asked == ["r0", "r1"]


def test_a_worker_failure_does_not_replace_a_run_its_worker_stored(tmp_path):
    """A pool that breaks fails every run in flight, including one whose worker had just stored
    it: with workers storing their runs, that run is kept (nothing comes back to store), and any
    other failed run comes back as an error record."""
    from concurrent.futures import Future
    from concurrent.futures.process import BrokenProcessPool

    from qoslab.sweep.execute import execute
    from qoslab.sweep.executors import _outcome
    from qoslab.sweep.store import RunStore

    stored, lost = _specs(2)
    store = RunStore(tmp_path / "runs")
    store.put(execute(stored))
    for spec, root, kept in ((stored, str(store.root), True), (lost, str(store.root), False), (stored, None, False)):
        failed: Future = Future()
        failed.set_exception(BrokenProcessPool("a worker died"))
        outcome = _outcome(failed, spec, root)
        if kept:
            assert outcome is None
        else:
            assert outcome["run"]["status"] == "error" and "BrokenProcessPool" in outcome["run"]["error"]
    assert store.get("r0")["run"]["status"] == "completed" and store.damaged == []


def test_a_stage_looks_each_run_up_once(tmp_path, monkeypatch):
    from qoslab.study.stages import Stages
    from qoslab.sweep.store import RunStore

    store = RunStore(tmp_path / "runs")
    looked_up = []
    monkeypatch.setattr(store, "finished", lambda run_id: looked_up.append(run_id) or False)
    specs = _specs(2)
    Stages(store, LocalExecutor(1), None, progress=False).run([*specs, *specs, specs[0]], "twice")
    assert looked_up == ["r0", "r1"]


def test_a_failed_put_leaves_nothing_half_written(tmp_path, monkeypatch):
    """A write that fails, or a failed run's folder that cannot be removed for its re-run: put
    raises and leaves no staging folder (the stored record, if any, stays as it was)."""
    import shutil

    import qoslab.sweep.store as store_module
    from qoslab.sweep.execute import execute, failed_record
    from qoslab.sweep.store import RunStore

    store = RunStore(tmp_path / "runs")
    spec = _specs(1)[0]
    record = execute(spec)
    store.put(failed_record(spec, "lost"))

    def no_space(*args, **kwargs):
        raise OSError(28, "No space left on device")

    with monkeypatch.context() as patch:
        patch.setattr(store_module.pq, "write_table", no_space)
        with pytest.raises(OSError, match="No space"):
            store.put(record)
    real_rmtree = shutil.rmtree

    def stuck(path, *args, **kwargs):
        if path == store.root / "r0":
            raise PermissionError(13, "Permission denied", str(path))
        real_rmtree(path, *args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(store_module.shutil, "rmtree", stuck)
        with pytest.raises(PermissionError):
            store.put(record)
    assert [p.name for p in store.root.iterdir()] == ["r0"]
    assert store.get("r0")["run"]["status"] == "error"


def test_a_pool_started_elsewhere_writes_where_the_study_is(tmp_path, monkeypatch):
    """A reused pool's workers keep the directory they started in: the runs and point folders
    they write go where the study's (relative) out names from the driver's directory."""
    from qoslab.sweep.store import RunStore

    here, elsewhere = tmp_path / "here", tmp_path / "elsewhere"
    here.mkdir()
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    pool = LocalExecutor(2)
    try:
        assert list(pool.run_into(_specs(2), RunStore("warm"))) == [None, None]  # the workers start here
        monkeypatch.chdir(here)
        assert list(pool.run_into(_specs(2), RunStore("direct"))) == [None, None]  # stored by the workers, here
        outcome = study(sweep=[{"key": "jobs[0].workload.bytes", "values": [4096, 65536]}]).run("out", executor=pool)
    finally:
        pool.close()
    assert sorted(p.name for p in elsewhere.iterdir()) == ["warm"]
    assert (here / "direct" / "r0").is_dir() and (here / "direct" / "r1").is_dir()
    assert outcome.runs_total > 0 and len(list((here / "out" / "runs").iterdir())) > 0
    for point in (0, 1):
        assert (here / "out" / "points" / f"point={point}" / "slowdown.parquet").is_file()


@pytest.mark.parametrize("theirs", ["completed", "error"])
def test_a_finished_run_stored_by_another_process_meanwhile_is_kept(tmp_path, monkeypatch, theirs):
    """put writes aside and renames. A finished run another process renamed into place first is
    kept and this copy dropped (no error, no staging folder left); a failed one there is not taken
    for this run: the put fails, saying so, rather than losing the run it was given."""
    import os

    import qoslab.sweep.store as store_module
    from qoslab.sweep.execute import execute, failed_record
    from qoslab.sweep.store import RunStore

    store = RunStore(tmp_path / "runs")
    spec = _specs(1)[0]
    record = execute(spec)
    other = RunStore(tmp_path / "other")
    other.put(record if theirs == "completed" else failed_record(spec, "lost"))
    real_replace = os.replace

    def another_writer_first(src, dst):
        real_replace(other.root / "r0", dst)  # the other process's copy lands ...
        real_replace(src, dst)  # ... and this one's rename onto it fails (not empty)

    monkeypatch.setattr(store_module.os, "replace", another_writer_first)
    if theirs == "completed":
        store.put(record)
        assert store.finished("r0")
    else:
        with pytest.raises(OSError):
            store.put(record)
    assert [p.name for p in (tmp_path / "runs").iterdir() if p.name.startswith(".staging")] == []


def test_without_workers_of_its_own_a_failing_point_stops_the_sweep_at_once(tmp_path, monkeypatch):
    """An executor that cannot take other work (Dask, Slurm): the driver writes each folder, once;
    an error there stops the sweep before the next chunk's runs."""
    import qoslab.study.runner as runner
    import qoslab.study.sweep_runner as sweep_runner

    class RunsOnly:  # no submit
        def __init__(self):
            self.inner, self.workers, self.batches = LocalExecutor(1), 1, 0

        def run(self, specs):
            self.batches += 1
            return self.inner.run(specs)

        def close(self):
            self.inner.close()

    calls = []

    def broken(self, report=True):
        calls.append(self.out)
        raise OSError("disk full")

    monkeypatch.setattr(sweep_runner, "CHUNK_RUNS", 3)  # a chunk a point
    monkeypatch.setattr(runner.StudyRunner, "finish", broken)
    executor = RunsOnly()
    with pytest.raises(OSError, match="disk full"):
        study(sweep=[{"key": "jobs[0].workload.bytes", "values": [4096, 65536]}]).run(tmp_path / "s", executor=executor)
    assert len(calls) == 1 and executor.batches == 1


def test_no_worker_outlives_a_pool_closed_after_its_runs():
    """A study's command ends with its workers gone (they were still exiting when it returned)."""
    import multiprocessing

    pool = LocalExecutor(2)
    try:
        records = list(pool.run(_specs(3)))
        assert [r["run"]["status"] for r in records] == ["completed"] * 3
    finally:
        pool.close()
    assert multiprocessing.active_children() == []
