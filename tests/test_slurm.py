"""Studies through a real Slurm (issue 18, part 3): a single-node Slurm started on this machine
(tests/slurm_harness.py) runs a small study's runs as Dask workers in Slurm jobs, over TLS with
temporary credentials; its tables equal a local run's. A partition that does not exist and a
cluster with no worker are said, not waited on. Skips, saying why, only where Slurm cannot be
installed (scripts/install-slurm)."""

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from slurm_harness import missing, single_node_slurm
from two_jobs import TOML as SCENARIO

pytestmark = pytest.mark.skipif(missing() is not None, reason=str(missing()))

STUDY = 'repetitions = 2\nscenario = "base.toml"\n[[policies]]\nkind = "default"\n' \
        '[[policies]]\nkind = "per-job"\nassignment = { a2a = 1, flood = 0 }\n'


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    with single_node_slurm(tmp_path_factory.mktemp("slurm")) as env:
        yield env


def qoslab(env, cwd, *args, timeout=600):
    bin_dir = str(Path(sys.executable).parent)
    env = {**env, "PATH": os.pathsep.join([bin_dir, env.get("PATH", "")])}
    return subprocess.run([sys.executable, "-m", "qoslab.cli", *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


def test_a_study_through_slurm_equals_a_local_one(slurm, tmp_path):
    (tmp_path / "base.toml").write_text(SCENARIO)
    (tmp_path / "study.toml").write_text(STUDY)
    local = qoslab(slurm, tmp_path, "study", "study.toml", "--out", "local", "--workers", "1")
    assert local.returncode == 0, local.stderr[-3000:]
    done = qoslab(slurm, tmp_path, "study", "study.toml", "--out", "slurm", "--executor", "slurm", "--workers", "2",
                  "--partition", "debug", "--cores", "1", "--memory", "1GB", "--walltime", "00:10:00")
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-3000:])
    for table, key in (("jobs", ["run_id", "job"]), ("slowdown", ["policy", "job"]), ("runs", ["run_id"])):
        a = pd.read_parquet(tmp_path / "local" / f"{table}.parquet").sort_values(key).reset_index(drop=True)
        b = pd.read_parquet(tmp_path / "slurm" / f"{table}.parquet").sort_values(key).reset_index(drop=True)
        same = [c for c in a.columns if c not in ("wall_seconds", "worker", "host", "started", "finished")]
        pd.testing.assert_frame_equal(a[same], b[same], check_like=True)
    # The credentials the workers got are the submitter's alone.
    security = tmp_path / "slurm" / ".dask-security"
    assert security.is_dir() and (security.stat().st_mode & 0o077) == 0
    jobs = subprocess.run(["squeue", "-h", "-o", "%i"], env=slurm, capture_output=True, text=True)
    assert jobs.stdout.strip() == "", f"worker jobs left behind: {jobs.stdout}"


def test_a_partition_that_does_not_exist_is_named_before_anything_is_submitted(slurm, tmp_path):
    (tmp_path / "base.toml").write_text(SCENARIO)
    (tmp_path / "study.toml").write_text(STUDY)
    done = qoslab(slurm, tmp_path, "study", "study.toml", "--out", "out", "--executor", "slurm",
                  "--partition", "nosuch", "--cores", "1", "--memory", "1GB")
    assert done.returncode == 2, done.stderr
    assert "no Slurm partition 'nosuch'" in done.stderr and "debug" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


def test_a_worker_job_slurm_cannot_run_is_refused_before_anything_is_submitted(slurm, tmp_path):
    (tmp_path / "base.toml").write_text(SCENARIO)
    (tmp_path / "study.toml").write_text(STUDY)
    done = qoslab(slurm, tmp_path, "study", "study.toml", "--out", "out", "--executor", "slurm",
                  "--cores", "1", "--memory", "4000GB")  # more memory than any node has
    assert done.returncode == 2, done.stderr
    assert "Slurm refuses the worker job" in done.stderr and "node configuration is not available" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


def test_a_study_with_no_live_worker_says_so(slurm, tmp_path):
    # A held job never starts, so no worker ever joins.
    (tmp_path / "base.toml").write_text(SCENARIO)
    (tmp_path / "study.toml").write_text(STUDY + '[executor]\nkind = "slurm"\nno_worker_timeout_s = 15\n'
                                         '[executor.slurm]\ncores = 1\nmemory = "1GB"\njob_extra_directives = ["--hold"]\n')
    done = qoslab(slurm, tmp_path, "study", "study.toml", "--out", "out", timeout=300)
    assert done.returncode == 4, (done.stdout[-2000:], done.stderr[-2000:])
    assert "no live Dask worker for 15 s" in done.stderr and "PENDING" in done.stderr, done.stderr
    assert "finished runs are kept" in done.stderr and "Traceback" not in done.stderr
    jobs = subprocess.run(["squeue", "-h", "-o", "%i"], env=slurm, capture_output=True, text=True)
    assert jobs.stdout.strip() == "", f"worker jobs left behind: {jobs.stdout}"


def test_the_walltime_leaves_room_for_the_worker_to_leave(tmp_path):
    from qoslab.errors import ScenarioError
    from qoslab.sweep.executors import slurm_cluster, walltime_seconds, worker_lifetime

    assert [walltime_seconds(w) for w in ("30", "1:30", "01:00:00", "2-00", "1-01:02", "1-01:02:03")] == \
        [1800, 90, 3600, 172800, 90120, 90123]
    assert worker_lifetime("01:00:00") == (3600 - 300, 100)  # 10% capped at 5 min
    assert worker_lifetime("00:10:00") == (540, 20)
    with pytest.raises(ValueError, match="Slurm time limit"):
        walltime_seconds("1:2:3:4")
    with pytest.raises(ScenarioError, match="executor.slurm.walltime: walltime '00:00:50' is too short"):
        slurm_cluster({"cores": 1, "memory": "1GB", "walltime": "00:00:50"})
    cluster = slurm_cluster({"cores": 1, "memory": "1GB", "walltime": "00:10:00"}, tmp_path / "sec")
    try:
        script = cluster.job_script()
    finally:
        cluster.close()
    assert "--lifetime 540s --lifetime-stagger 20s" in script and "--tls-ca-file" in script, script
    assert (tmp_path / "sec").stat().st_mode & 0o077 == 0


def test_a_job_array_then_collect_equals_a_local_study(slurm, tmp_path):
    import time

    (tmp_path / "base.toml").write_text(SCENARIO)
    (tmp_path / "study.toml").write_text(STUDY)
    local = qoslab(slurm, tmp_path, "study", "study.toml", "--out", "local", "--workers", "1")
    assert local.returncode == 0, local.stderr[-3000:]
    script = qoslab(slurm, tmp_path, "study", "study.toml", "--out", "array", "--array-script", "2",
                    "--partition", "debug", "--cores", "1", "--walltime", "00:10:00")
    assert script.returncode == 0, script.stderr
    submitted = subprocess.run(["sbatch", "--parsable", str(tmp_path / "array" / "array.sbatch")], env=slurm,
                               capture_output=True, text=True, check=True)
    job = submitted.stdout.strip().split(";")[0]
    deadline = time.monotonic() + 300
    while subprocess.run(["squeue", "-h", "-j", job], env=slurm, capture_output=True, text=True).stdout.strip():
        assert time.monotonic() < deadline, "the array did not finish in 300 s"
        time.sleep(1)
    logs = sorted((tmp_path / "array" / "array-logs").glob(f"{job}_*.out"))
    assert len(logs) == 2 and all("array task" in log.read_text() for log in logs), [log.read_text() for log in logs]
    collected = qoslab(slurm, tmp_path, "study", "study.toml", "--out", "array", "--collect")
    assert collected.returncode == 0, collected.stderr[-3000:]
    for table, key in (("jobs", ["run_id", "job"]), ("slowdown", ["policy", "job", "repetition"])):
        a = pd.read_parquet(tmp_path / "local" / f"{table}.parquet").sort_values(key).reset_index(drop=True)
        b = pd.read_parquet(tmp_path / "array" / f"{table}.parquet").sort_values(key).reset_index(drop=True)
        pd.testing.assert_frame_equal(a, b)
