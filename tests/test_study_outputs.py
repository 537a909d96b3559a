"""A study folder's own outputs (tables, study.json, figures, report.html): a file that cannot be
written fails the command naming it (exit 2), and never leaves a truncated file in place of the
previous one; a folder whose finishing was cut off is marked, and refused, until the study runs
again."""

from __future__ import annotations

import errno
import re
import resource
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from qoslab.cli import EXIT_USER_ERROR, app
from qoslab.deploy import ExportError, study_scenario
from qoslab.study.model import Study
from qoslab.study.runner import StudyRunner
from qoslab.sweep.executors import LocalExecutor
from qoslab.sweep.outputs import FINISHING, OutputError
from typer.testing import CliRunner

STUDY = ('[scenario]\nseed = 3\n[scenario.topology]\nkind = "xgft"\nm = [4, 4]\nw = [1, 2]\n'
         '[[scenario.jobs]]\nname = "a2a"\nnodes = 4\nworkload = { kind = "all-to-all", bytes = 32768, iterations = 2 }\n'
         '[[scenario.jobs]]\nname = "flood"\nnodes = 4\nworkload = { kind = "flood-pairs", iterations = 10 }\n'
         '[[policies]]\nkind = "default"\n')


def _study(tmp_path: Path, file_limit: int | None = None) -> subprocess.CompletedProcess[str]:
    """`qoslab study` on STUDY into tmp_path/out, its files limited to `file_limit` bytes (ulimit -f)."""
    path = tmp_path / "s.toml"
    path.write_text(STUDY)

    def limit() -> None:
        if file_limit is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (file_limit, file_limit))

    return subprocess.run([sys.executable, "-m", "qoslab.cli", "study", str(path), "--out", str(tmp_path / "out"),
                           "--workers", "1"], capture_output=True, text=True, preexec_fn=limit, timeout=300)


def _leftovers(out: Path) -> list[Path]:
    return list(out.rglob(".*.tmp"))


def test_a_report_that_cannot_be_written_fails_the_command_and_keeps_the_previous_one(tmp_path):
    # A full disk or a file-size limit while the report was written was called "a bug", exited 0
    # and left a truncated report.html.
    first = _study(tmp_path)
    assert first.returncode == 0, first.stderr
    report = tmp_path / "out" / "report.html"
    before = report.read_bytes()
    assert len(before) > 64 * 1024  # the limit below lets the tables through, not the report
    again = _study(tmp_path, file_limit=64 * 1024)
    assert again.returncode == EXIT_USER_ERROR, again.stderr
    said = " ".join(again.stderr.split())
    assert f"cannot write results: {report}: File too large" in said, said
    assert "a bug" not in said and "Traceback" not in said, said
    assert report.read_bytes() == before  # untouched, not cut off
    assert not _leftovers(tmp_path / "out")


def test_a_report_that_cannot_be_written_leaves_none(tmp_path):
    done = _study(tmp_path, file_limit=64 * 1024)
    assert done.returncode == EXIT_USER_ERROR, done.stderr
    assert not (tmp_path / "out" / "report.html").exists()
    assert not _leftovers(tmp_path / "out")


def _policy_study() -> Study:
    data = {"scenario": {"seed": 3, "topology": {"kind": "xgft", "m": [4, 4], "w": [1, 2]}, "jobs": [
        {"name": "a2a", "nodes": 4, "workload": {"kind": "all-to-all", "bytes": 32768, "iterations": 2}},
        {"name": "flood", "nodes": 4, "workload": {"kind": "flood-pairs", "iterations": 10}}]},
        "policies": [{"kind": "default"}]}
    return Study.from_dict(data, "study.toml")


def test_a_table_rewrite_that_fails_keeps_the_previous_table_and_marks_the_folder_until_rerun(tmp_path, monkeypatch):
    # A rewrite cut off part-way replaced a good table with a corrupt one, and a study killed while
    # finishing left new tables beside stale ones, unmarked: `export opensm` then failed on a
    # policy the new tables lacked.
    out = tmp_path / "out"
    StudyRunner(_policy_study(), out, LocalExecutor(1), progress=False).run()
    before = (out / "jobs.parquet").read_bytes()
    real = pq.write_table

    def disk_full_on_jobs(table, where, *args, **kwargs):
        if "jobs.parquet" in str(where):
            Path(where).write_bytes(b"PAR1 cut off")
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(table, where, *args, **kwargs)

    monkeypatch.setattr(pq, "write_table", disk_full_on_jobs)
    with pytest.raises(OutputError, match=r"jobs\.parquet: No space left on device"):
        StudyRunner(_policy_study(), out, LocalExecutor(1), progress=False).run()
    monkeypatch.undo()
    assert (out / "jobs.parquet").read_bytes() == before
    assert not _leftovers(out)
    assert (out / FINISHING).exists()
    refusal = f"run `qoslab study study.toml --out {out}` again to finish it"
    with pytest.raises(ExportError, match=re.escape(refusal)):
        study_scenario(out, None, 0)
    monkeypatch.chdir(tmp_path)
    refused = CliRunner().invoke(app, ["export", "opensm", str(out)])
    assert refused.exit_code == EXIT_USER_ERROR and "its results are incomplete" in refused.stderr, refused.output
    # Running the study again finishes the folder.
    StudyRunner(_policy_study(), out, LocalExecutor(1), progress=False).run()
    assert not (out / FINISHING).exists()
    assert study_scenario(out, None, 0).policy == "default"
