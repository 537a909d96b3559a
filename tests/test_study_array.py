"""Job-array mode (issue 18, part 3): array tasks each run their share of a study's runs into the
shared run store and `--collect` builds the tables, equal to a study run in one go; a stage that
waits for other tasks' runs is said; a task finding its runs done skips them."""

import pandas as pd
import pytest
from qoslab.cli import app
from qoslab.study.stages import task_of
from qoslab.sweep.array import array_script, parse_array_task
from two_jobs import TOML as SCENARIO
from typer.testing import CliRunner

PLAIN = 'repetitions = 3\nscenario = "base.toml"\n[[policies]]\nkind = "default"\n' \
        '[[policies]]\nkind = "per-job"\nassignment = { a2a = 1, flood = 0 }\n'
# per-rank needs the default run's profile: a second stage.
STAGED = PLAIN + '[[policies]]\nkind = "per-rank"\njob = "a2a"\nfraction = 0.25\n'


def study(tmp_path, *args):
    return CliRunner().invoke(app, ["study", str(tmp_path / "study.toml"), *map(str, args)])


def tables(out):
    return {name: pd.read_parquet(out / f"{name}.parquet") for name in ("jobs", "slowdown", "policies")}


def assert_same(a, b):
    for name, key in (("jobs", ["run_id", "job"]), ("slowdown", ["policy", "job", "repetition"]), ("policies", ["policy"])):
        x, y = a[name].sort_values(key).reset_index(drop=True), b[name].sort_values(key).reset_index(drop=True)
        pd.testing.assert_frame_equal(x, y)


@pytest.mark.parametrize("text", [PLAIN, STAGED], ids=["one-stage", "two-stages"])
def test_array_tasks_then_collect_equal_one_study(tmp_path, text):
    (tmp_path / "base.toml").write_text(SCENARIO)
    (tmp_path / "study.toml").write_text(text)
    whole = study(tmp_path, "--out", tmp_path / "whole", "--workers", "1")
    assert whole.exit_code == 0, whole.output
    array = tmp_path / "array"
    early = study(tmp_path, "--out", array, "--collect")
    assert early.exit_code == 4 and "not stored yet" in early.output and not (array / "runs.parquet").exists()
    passes = 0
    while True:  # as a user would: run the array, again while a stage waits
        passes += 1
        outputs = [study(tmp_path, "--out", array, "--array-task", f"{i}/3", "--workers", "1") for i in range(3)]
        assert all(o.exit_code == 0 for o in outputs), [o.output for o in outputs]
        if all("waits for" not in o.output for o in outputs):
            break
        assert passes < 4
    assert passes == (1 if text == PLAIN else 2)
    assert not (array / "runs.parquet").exists()  # tasks write no tables
    collected = study(tmp_path, "--out", array, "--collect")
    assert collected.exit_code == 0, collected.output
    assert_same(tables(tmp_path / "whole"), tables(array))
    again = study(tmp_path, "--out", array, "--array-task", "0/3", "--workers", "1")  # its runs are done
    assert again.exit_code == 0 and "done, ran 0 run(s)" in again.output, again.output


def test_runs_split_evenly_and_the_same_everywhere():
    ids = [f"{i:016x}" for i in range(3000)]
    counts = [sum(task_of(r, 4) == t for r in ids) for t in range(4)]
    assert min(counts) > 650 and max(counts) < 850, counts
    assert task_of("abc", 7) == task_of("abc", 7)


def test_array_task_options():
    assert parse_array_task("2/5") == (2, 5)
    assert parse_array_task("slurm", {"SLURM_ARRAY_TASK_ID": "12", "SLURM_ARRAY_TASK_MIN": "10",
                                      "SLURM_ARRAY_TASK_COUNT": "4"}) == (2, 4)
    assert parse_array_task("slurm", {"SLURM_ARRAY_TASK_ID": "3", "SLURM_ARRAY_TASK_MAX": "7"}) == (3, 8)
    for bad, words in (("5/5", "0 <= I < N"), ("x", "expected I/N"), ("slurm", "not inside a Slurm array task")):
        with pytest.raises(ValueError, match=words):
            parse_array_task(bad, {})


def test_bad_combinations_are_refused(tmp_path):
    (tmp_path / "base.toml").write_text(SCENARIO)
    (tmp_path / "study.toml").write_text(PLAIN)
    both = study(tmp_path, "--out", tmp_path / "o", "--array-task", "0/2", "--collect")
    assert both.exit_code == 2 and "give one" in both.output
    remote = study(tmp_path, "--out", tmp_path / "o", "--array-task", "0/2", "--executor", "slurm")
    assert remote.exit_code == 2 and "run on this machine's cores" in remote.output


def test_the_array_script_runs_the_study_as_slurm_array_tasks(tmp_path):
    text = array_script(tmp_path / "s.toml", tmp_path / "out", 4,
                        {"queue": "compute", "account": "proj", "walltime": "01:00:00", "cores": 8, "memory": "16GB"})
    for line in ("#SBATCH --array=0-3", "#SBATCH --cpus-per-task=8", "#SBATCH --partition=compute",
                 "#SBATCH --account=proj", "#SBATCH --time=01:00:00", "#SBATCH --mem=16GB"):
        assert line in text.splitlines(), text
    assert "--array-task slurm --workers 8" in text and "--collect" in text


def test_values_the_array_script_cannot_carry_are_refused_before_anything_is_written(tmp_path):
    # A line break in an #SBATCH value or a path would start a line of the script: a command.
    (tmp_path / "base.toml").write_text(SCENARIO)
    (tmp_path / "study.toml").write_text(PLAIN)
    # And values sbatch would refuse only when the array is submitted (they were written as given).
    for option, value in (("--partition", "compute\ntouch /tmp/x"), ("--account", "a b"), ("--walltime", ""),
                          ("--walltime", "abc"), ("--memory", "-5GB"), ("--memory", "lots")):
        result = study(tmp_path, "--out", tmp_path / "o", "--array-script", "2", option, value)
        assert result.exit_code == 2 and "Traceback" not in result.output, result.output
        assert f"{option} {value!r}" in result.output and "#SBATCH" in result.output
    assert not (tmp_path / "o").exists()
    with pytest.raises(ValueError, match="white space"):
        array_script(None, tmp_path / "my out", 2, {})
    with pytest.raises(ValueError, match="control characters"):
        array_script(tmp_path / "dir\necho injected #" / "s.toml", tmp_path / "out", 2, {})


def test_a_line_break_in_a_slurm_worker_option_is_refused_naming_the_key(tmp_path):
    (tmp_path / "base.toml").write_text(SCENARIO)
    (tmp_path / "study.toml").write_text(PLAIN + '[executor]\nkind = "slurm"\n[executor.slurm]\nqueue = "a\\nb"\n'
                                         'job_extra_directives = ["--exclusive", "x\\ny"]\n')
    result = study(tmp_path, "--out", tmp_path / "o", "--plan")
    assert result.exit_code == 2 and "Traceback" not in result.output, result.output
    assert "executor.slurm.queue" in result.output and "control characters" in result.output
