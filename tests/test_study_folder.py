"""A study's --out folder: one study at a time (a lock), one study's runs (a marker), damaged run
folders redone, workers that die with the command, and an exit code that says runs failed."""

from __future__ import annotations

import copy
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from qoslab.cli import EXIT_INTERRUPTED, EXIT_RUNS_FAILED, app
from qoslab.errors import FolderError
from qoslab.study.model import Study
from qoslab.study.runner import StudyRunner
from qoslab.sweep.executors import LocalExecutor
from qoslab.sweep.folder import LOCK, MARKER, StudyFolder, study_identity
from typer.testing import CliRunner

SCENARIO = {
    "seed": 3,
    "topology": {"kind": "xgft", "m": [4, 4], "w": [1, 2]},
    "jobs": [
        {"name": "a2a", "nodes": 4, "placement": "random", "workload": {"kind": "all-to-all", "bytes": 32768, "iterations": 2}},
        {"name": "flood", "nodes": 4, "placement": "random", "workload": {"kind": "flood-pairs", "iterations": 10}},
    ],
}


def study(scenario=None, policies=None, **keys) -> Study:
    data = {"scenario": copy.deepcopy(scenario or SCENARIO), "policies": policies or [{"kind": "default"}], **keys}
    return Study.from_dict(data, "study.toml")


def run(s: Study, out: Path):
    return StudyRunner(s, out, LocalExecutor(1), progress=False).run()


def test_a_different_study_is_refused_and_the_same_one_may_grow(tmp_path):
    run(study(), tmp_path)
    other = copy.deepcopy(SCENARIO)
    other["jobs"][1]["workload"]["iterations"] = 11
    with pytest.raises(FolderError, match="holds the runs of another study .*: its base scenario differs"):
        run(study(other), tmp_path)
    # The same study with a policy added reuses its runs.
    again = run(study(policies=[{"kind": "default"}, {"kind": "per-job", "assignment": "all", "weights": [254, 9]}]),
                tmp_path)
    assert again.runs_reused == 3 and again.runs_total == 5
    # And with a repetition added (what metrics.md prescribes when intervals overlap): the first
    # repetition's runs are found again, the new one's are run.
    more = run(study(policies=[{"kind": "default"}, {"kind": "per-job", "assignment": "all", "weights": [254, 9]}],
                     repetitions=2), tmp_path)
    assert more.runs_reused == 5 and more.runs_total == 10
    assert sorted(set(more.tables["runs"]["repetition"])) == [0, 1]


def test_runs_stored_before_the_model_changed_are_said_when_reused(tmp_path):
    # Run ids hash the scenario, not the model: a run simulated before a model change is found
    # again and reused, and the study says so rather than mix the two unseen.
    first = run(study(), tmp_path)
    assert first.notes == []
    record = next((tmp_path / "runs").iterdir()) / "record.json"
    meta = json.loads(record.read_text())
    meta["model"] = "2026-01-01"
    record.write_text(json.dumps(meta))
    again = run(study(), tmp_path)
    assert again.runs_reused == again.runs_total
    assert len(again.notes) == 1 and again.notes[0].startswith("1 stored run(s) were simulated before the model change")


def test_model_versions_order_by_date_then_by_the_day_s_number():
    from qoslab._version import model_before

    assert model_before("") and model_before("2026-11-26.3", "2026-11-27")
    assert model_before("2026-11-27", "2026-11-27.2") and model_before("2026-11-27.2", "2026-11-27.10")
    assert not model_before("2026-11-27.2", "2026-11-27.2") and not model_before("2026-11-28", "2026-11-27.9")


def test_a_folder_marked_before_base_fingerprints_is_compared_as_before(tmp_path):
    # A marker without base_fingerprint (written before 2026-11-27) is compared by its whole
    # fingerprint: the same study resumes, one with another repetition count is refused.
    run(study(), tmp_path)
    marker = tmp_path / MARKER
    held = json.loads(marker.read_text())
    del held["base_fingerprint"]
    marker.write_text(json.dumps(held))
    with pytest.raises(FolderError, match="its scenario differs, or its seeds or sweep points"):
        run(study(repetitions=2), tmp_path)
    assert run(study(), tmp_path).runs_reused == 3
    assert "base_fingerprint" in json.loads(marker.read_text())  # claimed again: marked as now


def test_a_folder_in_use_is_refused_by_a_second_process(tmp_path):
    identity = study_identity("policies", "s", None, {"x": 1})
    with StudyFolder(tmp_path, identity):
        code = ("import sys; from pathlib import Path; from qoslab.sweep.folder import StudyFolder, study_identity\n"
                "try:\n    StudyFolder(Path(sys.argv[1]), study_identity('policies', 's', None, {'x': 1})).__enter__()\n"
                "except Exception as e:\n    print(e); sys.exit(7)\n")
        proc = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 7 and "another qoslab study is writing to this folder" in proc.stdout
        assert f"pid {os.getpid()}" in proc.stdout
    assert (tmp_path / LOCK).exists()
    with StudyFolder(tmp_path, identity):  # released: the same study may take it again
        pass


def test_a_damaged_run_folder_is_run_again_and_named(tmp_path, capsys):
    first = run(study(), tmp_path)
    folders = sorted((tmp_path / "runs").iterdir())
    (folders[0] / "record.json").write_text('{"run": {"status": "comp')  # truncated
    (folders[1] / "iterations.parquet").write_bytes(b"PAR1 not really")
    again = StudyRunner(study(), tmp_path, LocalExecutor(1), progress=False)
    outcome = again.run()
    assert outcome.runs_reused == first.runs_total - 2
    assert set(outcome.tables["runs"]["status"]) == {"completed"}
    assert json.loads((folders[0] / "record.json").read_text())["run"]["status"] == "completed"


def _study_whose_runs_fail(tmp_path: Path, monkeypatch: Any) -> Path:
    """A one-repetition study file (two runs) whose every run raises in its worker."""

    def broken(spec):
        raise RuntimeError("engine exploded")

    monkeypatch.setattr("qoslab.sweep.executors.execute", broken)
    path = tmp_path / "s.toml"
    path.write_text('repetitions = 1\n[scenario]\nseed = 3\n[scenario.topology]\nkind = "xgft"\nm = [4, 4]\nw = [1, 2]\n'
                    '[[scenario.jobs]]\nname = "a"\nnodes = 4\nworkload = { kind = "all-to-all", bytes = 4096, iterations = 1 }\n'
                    '[[policies]]\nkind = "default"\n')
    return path


def test_cli_study_with_failed_runs_exits_non_zero_saying_how_many(tmp_path, monkeypatch):
    path = _study_whose_runs_fail(tmp_path, monkeypatch)
    result = CliRunner().invoke(app, ["study", str(path), "--out", str(tmp_path / "out"), "--workers", "1"])
    assert result.exit_code == EXIT_RUNS_FAILED, result.output
    assert "2 of 2 runs failed" in result.output


def _children(pid: int) -> set[int]:
    found = set()
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found |= {int(c) for c in (task / "children").read_text().split()}
        except OSError:
            pass
    return found


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


_ENDLESS_STUDY = ('repetitions = 2\n[scenario]\nseed = 3\n[scenario.topology]\nkind = "xgft"\nm = [16, 16]\nw = [1, 16]\n'
                  '[[scenario.jobs]]\nname = "a"\nnodes = 128\nworkload = { kind = "all-to-all", bytes = 1048576, '
                  'iterations = 50 }\n[[scenario.jobs]]\nname = "f"\nnodes = 128\n'
                  'workload = { kind = "flood-pairs", iterations = 1000 }\n[[policies]]\nkind = "default"\n')


def _start_study(tmp_path: Path, workers: int = 2, study: str = _ENDLESS_STUDY,
                 **popen: Any) -> tuple[subprocess.Popen[bytes], set[int]]:
    """A study (by default one of runs long enough, a flood without end, that its workers are busy
    when it is stopped); returned as soon as two workers exist (they are still importing then), or, with one
    worker (which runs in the command itself), at once."""
    path = tmp_path / "s.toml"
    path.write_text(study)
    proc = subprocess.Popen([sys.executable, "-m", "qoslab.cli", "study", str(path), "--out", str(tmp_path / "out"),
                             "--workers", str(workers)], start_new_session=True, **popen)
    started: set[int] = set()
    deadline = time.time() + 60
    while workers > 1 and time.time() < deadline and len(started) < 2:
        started = {c for c in _children(proc.pid) if "spawn_main" in Path(f"/proc/{c}/cmdline").read_text()}
        time.sleep(0.05)
    return proc, started


def _wait_gone(pids: set[int], seconds: float) -> bool:
    """Whether every process of `pids` has ended within `seconds`."""
    deadline = time.time() + seconds
    while time.time() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.1)
    return not any(_alive(p) for p in pids)


def _kill_all(pids: set[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="needs Linux /proc to find the workers")
@pytest.mark.parametrize("workers, wait_s", [(2, 0.0), (2, 4.0), (1, 4.0)],
                         ids=["while-workers-import", "while-they-run", "one-worker"])
def test_ctrl_c_stops_a_study_at_once_and_without_a_traceback(tmp_path, workers, wait_s):
    # A terminal's Ctrl-C reaches the whole process group. Workers still importing printed a
    # KeyboardInterrupt traceback each; a run the engine stopped was stored as a failed run and
    # the study went on with the next (one worker), or waited for its workers' queued runs to
    # finish whole. Now the command stops within seconds and says it was interrupted, only that.
    proc, started = _start_study(tmp_path, workers, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        assert workers == 1 or len(started) >= 2, "the study never started its workers"
        time.sleep(wait_s)
        os.killpg(proc.pid, signal.SIGINT)
        output = proc.communicate(timeout=30)[0].decode()  # the runs would take minutes
        assert proc.returncode == EXIT_INTERRUPTED, output
        assert "Traceback" not in output and "KeyboardInterrupt" not in output, output
        assert "interrupted: finished runs are kept" in output, output
        assert _wait_gone(started, 10), "workers outlived the interrupted command"
        assert not list((tmp_path / "out" / "runs").glob("*/record.json")), "an interrupted run was stored"
    finally:
        _kill_all(started | {proc.pid})


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="needs Linux /proc to find the workers")
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_to_the_command_alone_stops_its_workers_at_once(tmp_path, sig):
    # `kill PID` (a supervisor, Slurm's scancel of a batch step, an operator) reaches the command
    # alone, not its workers: it said "interrupted" but waited for the runs each worker was on
    # and those queued to it (minutes at seed scale). Now it stops them as a Ctrl-C to the group does.
    proc, started = _start_study(tmp_path, 2, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        assert len(started) >= 2, "the study never started its workers"
        time.sleep(4.0)  # the workers are in their runs (each takes minutes)
        signalled = time.monotonic()
        os.kill(proc.pid, sig)
        output = proc.communicate(timeout=60)[0].decode()
        assert time.monotonic() - signalled < 5.0, output
        assert proc.returncode == EXIT_INTERRUPTED, output
        assert "interrupted: finished runs are kept" in output and "Traceback" not in output, output
        assert _wait_gone(started, 2), "workers outlived the interrupted command"
    finally:
        _kill_all(started | {proc.pid})


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="needs Linux /proc to find the workers")
def test_workers_die_when_the_command_that_started_them_is_killed(tmp_path):
    proc, workers = _start_study(tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert len(workers) >= 2, "the study never started its workers"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        assert _wait_gone(workers, 10), "workers outlived the killed command"
    finally:
        _kill_all(workers | {proc.pid})


def test_a_plan_beside_another_study_s_results_warns(tmp_path):
    # `--plan` wrote plan.json into the default study's folder without a word; a real run was then refused.
    base, other = tmp_path / "base.toml", tmp_path / "other.toml"
    base.write_text('[topology]\nkind = "single-switch"\nhosts = 4\n[[jobs]]\nname = "a"\nnodes = 2\n'
                    'workload = { kind = "ping-pong", iterations = 1 }\n')
    (tmp_path / "s.toml").write_text('scenario = "base.toml"\n[[policies]]\nkind = "default"\n')
    (tmp_path / "t.toml").write_text('name = "t"\nscenario = "other.toml"\n[[policies]]\nkind = "default"\n')
    other.write_text(base.read_text().replace("hosts = 4", "hosts = 6"))  # another base scenario
    done = CliRunner().invoke(app, ["study", str(tmp_path / "s.toml"), "--out", str(tmp_path / "o"), "--workers", "1"])
    assert done.exit_code == 0, done.output
    again = CliRunner().invoke(app, ["study", str(tmp_path / "s.toml"), "--out", str(tmp_path / "o"), "--plan"])
    assert again.exit_code == 0 and (tmp_path / "o" / "plan.json").exists(), again.output
    (tmp_path / "o" / "plan.json").unlink()
    warned = CliRunner().invoke(app, ["study", str(tmp_path / "t.toml"), "--out", str(tmp_path / "o"), "--plan"])
    assert warned.exit_code == 0 and "running it there will be refused" in " ".join(warned.stderr.split())
    # Which study a folder holds is decided when a run claims it: this one is refused there.
    refused = CliRunner().invoke(app, ["study", str(tmp_path / "t.toml"), "--out", str(tmp_path / "o"), "--workers", "1"])
    assert refused.exit_code == 2 and "holds the runs of another study" in refused.stderr, refused.output


def test_study_run_from_python_warns_about_failed_runs_and_refuses_ignored_workers(tmp_path, monkeypatch):
    # From Python a study with failed runs returned as if complete; `workers` beside an executor
    # object was ignored without a word.
    import qoslab
    from qoslab.errors import ScenarioError
    from qoslab.study.running import RunsFailedWarning

    path = _study_whose_runs_fail(tmp_path, monkeypatch)
    study = qoslab.Study.from_toml(path)
    with pytest.warns(RunsFailedWarning, match="2 of the study's runs failed .*engine exploded"):
        outcome = study.run(tmp_path / "out", workers=1)
    assert len(outcome.failed) == 2
    with pytest.raises(ScenarioError, match="workers=3 would be ignored"):
        study.run(tmp_path / "out2", executor=LocalExecutor(1), workers=3)


def test_a_ctrl_c_between_batches_does_not_stop_a_kept_pool_s_later_tasks():
    # A Ctrl-C the idle workers took (a notebook's "interrupt kernel" signals the whole group) made
    # every later task of a pool its owner keeps raise KeyboardInterrupt.
    executor = LocalExecutor(2)
    try:
        assert executor.submit(abs, -1).result(timeout=60) == 1
        workers = list(executor._pool._processes.values())  # type: ignore[union-attr]
        for worker in workers:
            os.kill(worker.pid, signal.SIGINT)
        time.sleep(0.5)
        assert all(worker.is_alive() for worker in workers)
        assert [executor.submit(abs, -n).result(timeout=60) for n in range(4)] == [0, 1, 2, 3]
    finally:
        executor.close()


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="needs Linux /proc to find the workers")
def test_a_study_started_with_ctrl_c_ignored_keeps_running_through_it(tmp_path):
    # A shell starts a script's background job with SIGINT ignored; the workers stopped their runs
    # on a Ctrl-C to the group anyway, and the command then stopped.
    proc, started = _start_study(tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                 preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    try:
        assert len(started) >= 2, "the study never started its workers"
        time.sleep(2.0)
        os.killpg(proc.pid, signal.SIGINT)
        time.sleep(4.0)
        assert proc.poll() is None and all(_alive(w) for w in started), proc.returncode
    finally:
        _kill_all(started | {proc.pid})
        proc.communicate(timeout=30)


_FINITE_STUDY = ('repetitions = 2\n[scenario]\nseed = 3\n[scenario.topology]\nkind = "single-switch"\nhosts = 16\n'
                 + ''.join(f'[[scenario.jobs]]\nname = "{n}"\nnodes = 8\nworkload = {{ kind = "all-to-all", '
                           'bytes = 65536, iterations = 1000 }\n' for n in "ab")
                 + '[[policies]]\nkind = "default"\n')


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="needs Linux /proc to find the workers")
def test_a_worker_that_dies_costs_its_runs_a_new_pool_not_the_study(tmp_path):
    # The OOM killer or an operator's kill of one worker broke the pool: every run it held was
    # stored as failed (BrokenProcessPool), six for one death. Now they go to a new pool.
    proc, workers = _start_study(tmp_path, 2, _FINITE_STUDY, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        assert len(workers) >= 2, "the study never started its workers"
        time.sleep(2.0)  # imported, and in their first runs (about 2 s each)
        os.kill(min(workers), signal.SIGKILL)
        output = proc.communicate(timeout=300)[0].decode()
        assert proc.returncode == 0, output
        runs = pq.read_table(tmp_path / "out" / "runs.parquet").to_pandas()
        assert len(runs) == 6 and (runs["status"] == "completed").all(), runs[["run_id", "status", "error"]]
    finally:
        _kill_all(workers | {proc.pid})
