"""Slurm accounting as `sacct --json`: a real dump from Slurm 22.05.8 (tests/data/sacct/README.md)
read like the `sacct -P` text of the same jobs, a hand-made dump in the 23.11+/24.05 layout read
like the text sample of test_scheduler_logs, the 23.02 layout, and every bad input refused by file
and job."""

from __future__ import annotations

import copy
import dataclasses
import gzip
import json
import os
import time
from pathlib import Path

import pytest
from qoslab.errors import FileLineError
from qoslab.io.scheduler import (
    SchedulerJob,
    SchedulerLogError,
    map_snapshot,
    parse_sacct,
    parse_sacct_json,
    read_sacct,
    read_sacct_json,
    running_at,
)
from test_scheduler_logs import SACCT

DATA = Path(__file__).parent / "data" / "sacct"
REAL_JSON = DATA / "sacct-22.05.json"  # sacct -a -S ... -E ... --json, Slurm 22.05.8
REAL_TEXT = DATA / "sacct-22.05.txt"  # sacct -a -X -P -n -S ... -E ... -o <SACCT_FIELDS>, same jobs, same moment
HANDMADE = DATA / "sacct-24.05-handmade.json"  # 24.05 layout (data_parser v0.0.41), the jobs of SACCT


@pytest.fixture
def utc(monkeypatch):
    """The text dumps were printed in UTC (naive local times); read them in that zone."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def fields(job: SchedulerJob) -> dict:
    """A job's fields but where it came from (line, source, json_path)."""
    data = dataclasses.asdict(job)
    for key in ("line", "source", "json_path"):
        data.pop(key)
    return data


def by_id(jobs: list[SchedulerJob]) -> dict[str, dict]:
    return {j.job_id: fields(j) for j in jobs}


# ------------------------------------------------------------------------------------------------
# A real dump (Slurm 22.05.8)


def test_real_22_05_dump():
    raw = json.loads(REAL_JSON.read_text())
    assert raw["meta"]["Slurm"]["release"] == "22.05.8"
    assert any(j["steps"] for j in raw["jobs"])  # steps are nested in their jobs
    jobs = read_sacct_json(REAL_JSON)
    # 11 jobs: 8 (pending, begin later) and 9 (cancelled before it started) never got nodes.
    assert [j.job_id for j in jobs] == ["1", "2", "3", "4_2", "5+0", "5+1", "4_1", "10", "11"]
    assert all(j.source == str(REAL_JSON) for j in jobs)
    assert [j.json_path for j in jobs] == [f"jobs[{i}]" for i in (0, 1, 2, 3, 4, 5, 6, 9, 10)]
    assert [j.line for j in jobs] == [1, 2, 3, 4, 5, 6, 7, 10, 11]
    halo = jobs[0]
    assert (halo.name, halo.user, halo.state, halo.nodes, halo.node_count) == ("halo run", "root", "COMPLETED", ("c1", "c2"), 2)
    assert (halo.submit, halo.start, halo.end) == (1795685643, 1795685644, 1795685647)  # POSIX seconds as dumped
    assert halo.where == f"{REAL_JSON}:jobs[0]"
    assert jobs[1].state == "FAILED"
    assert jobs[2].nodes == ("c1", "c2", "c3")  # one allocation; its steps (batch on c1, 0 on c[1-3]) are not jobs
    running = jobs[7]
    assert (running.job_id, running.state, running.end) == ("10", "RUNNING", None)  # time.end 0: still running
    assert jobs[8].nodes == ("c1", "c3")  # c[1,3]
    assert running_at(jobs, running.start + 3600) == [running]


def test_real_json_and_text_of_the_same_jobs_agree(utc):
    from_json = read_sacct_json(REAL_JSON)
    from_text = read_sacct(REAL_TEXT)
    assert len(from_json) == len(from_text) == 9
    # sacct -P lists array tasks in submission order, --json by raw job id: compare by JobID.
    assert by_id(from_json) == by_id(from_text)


# ------------------------------------------------------------------------------------------------
# The 23.02+ layouts (hand-made from the data_parser schema)


def test_handmade_24_05_dump_reads_like_the_text_sample(utc):
    raw = json.loads(HANDMADE.read_text())
    assert raw["jobs"][0]["state"]["current"] == ["COMPLETED"]
    assert raw["jobs"][1]["array"]["task_id"] == {"set": True, "infinite": False, "number": 4}
    jobs = read_sacct_json(HANDMADE)
    text = parse_sacct(SACCT, "m100.sacct")
    assert [j.job_id for j in jobs] == ["1001", "1123_4", "2005+0", "2005+1", "3000"]
    assert [fields(j) for j in jobs] == [fields(j) for j in text]
    assert jobs[0].nodes == ("r256n01", "r256n02", "r256n03", "r256n04", "r256n07", "r257n01")
    assert jobs[2].end is None and jobs[3].state == "RUNNING"


def _layout_23_02(data: dict) -> dict:
    """The 23.02 (data_parser v0.0.39) layout: as 23.11+, but state.current a string."""
    data = copy.deepcopy(data)
    for job in data["jobs"]:
        job["state"]["current"] = job["state"]["current"][0]
    data["meta"]["slurm"] = {"version": {"major": "23", "micro": "6", "minor": "02"}, "release": "23.02.6"}
    return data


def _layout_22_05(data: dict) -> dict:
    """The 22.05 layout: every {"set", "infinite", "number"} a plain integer or null."""

    def plain(value):
        if isinstance(value, dict):
            if set(value) == {"set", "infinite", "number"}:
                return value["number"] if value["set"] else None
            return {k: plain(v) for k, v in value.items()}
        if isinstance(value, list):
            return [plain(v) for v in value]
        return value

    data = plain(_layout_23_02(data))
    data["meta"] = {"plugin": {"type": "openapi/dbv0.0.38"}, "Slurm": {"version": {"major": 22, "micro": 9, "minor": 5}}}
    return data


@pytest.mark.parametrize("layout", [_layout_23_02, _layout_22_05])
def test_older_layouts_of_the_same_jobs_read_the_same(layout):
    handmade = json.loads(HANDMADE.read_text())
    expected = [fields(j) for j in parse_sacct_json(json.dumps(handmade))]
    assert [fields(j) for j in parse_sacct_json(json.dumps(layout(handmade)))] == expected


def test_numbers_in_every_form_slurm_writes_them():
    job = json.loads(HANDMADE.read_text())["jobs"][0]
    for start, expected in [
        (1704873600, 1704873600.0),
        ({"set": True, "infinite": False, "number": 1704873600}, 1704873600.0),
    ]:
        job["time"]["start"] = start
        assert parse_sacct_json(json.dumps({"jobs": [job]}))[0].start == expected
    for unset in (0, None, {"set": False, "infinite": False, "number": 0}, {"set": False, "infinite": True, "number": 0}, "Infinity"):
        job["time"]["start"] = unset
        assert parse_sacct_json(json.dumps({"jobs": [job]})) == []  # never started
    job["time"]["start"] = 1704873600
    job["time"]["end"] = None
    assert parse_sacct_json(json.dumps({"jobs": [job]}))[0].end is None
    job["array"] = {"job_id": 77, "task_id": 0}  # task 0 is a task, not "unset"
    assert parse_sacct_json(json.dumps({"jobs": [job]}))[0].job_id == "77_0"
    job["state"] = {"current": ["RUNNING", "COMPLETING"], "reason": "None"}  # flags follow the base state
    assert parse_sacct_json(json.dumps({"jobs": [job]}))[0].state == "RUNNING"
    del job["allocation_nodes"], job["time"]["submission"]
    only = parse_sacct_json(json.dumps({"jobs": [job]}))[0]
    assert only.submit is None and only.node_count == 6


def test_a_gzipped_dump_and_an_empty_one(tmp_path):
    path = tmp_path / "day.json.gz"
    path.write_bytes(gzip.compress(HANDMADE.read_bytes()))
    assert len(read_sacct_json(path)) == 5
    assert parse_sacct_json('{"meta": {}, "errors": [], "jobs": []}') == []


# ------------------------------------------------------------------------------------------------
# Bad input

GOOD_JOB = {
    "job_id": 7,
    "name": "x",
    "user": "u",
    "state": {"current": ["COMPLETED"], "reason": "None"},
    "time": {"submission": 1704873500, "start": 1704873600, "end": 1704873660},
    "nodes": "n[1-2]",
    "allocation_nodes": 2,
    "steps": [],
}


def _with(**changes) -> dict:
    job = copy.deepcopy(GOOD_JOB)
    for path, value in changes.items():
        *parents, key = path.split("__")
        target = job
        for parent in parents:
            target = target[parent]
        if value is _DELETE:
            del target[key]
        else:
            target[key] = value
    return job


_DELETE = object()


@pytest.mark.parametrize(
    "job, expected",
    [
        ("not a job", "jobs[1]: expected a job object, got a JSON string"),
        (_with(job_id=_DELETE), "jobs[1]: expected a job_id (an integer >= 1), got null"),
        (_with(job_id="7"), 'jobs[1]: expected job_id as an integer >= 0, null or {"set", "infinite", "number"}, got "7"'),
        (_with(time=_DELETE), "jobs[1] (job 7): expected a time object (start, end, submission)"),
        (_with(time__start=_DELETE), "jobs[1] (job 7): expected time.start (POSIX seconds), but the job has none"),
        (_with(time__end=_DELETE), "jobs[1] (job 7): expected time.end (POSIX seconds), but the job has none"),
        (_with(time__start="2024-01-10T08:00:00"), "jobs[1] (job 7): expected time.start (POSIX seconds) as an integer >= 0"),
        (_with(time__start=-5), "jobs[1] (job 7): expected time.start (POSIX seconds) as an integer >= 0"),
        (_with(time__end=1704873000), "jobs[1] (job 7): expected time.end >= time.start, got start 1704873600 and end 1704873000"),
        (_with(nodes=_DELETE), "jobs[1] (job 7): expected nodes (a hostlist such as r256n[01-04]), but the job has none"),
        (_with(nodes=""), "jobs[1] (job 7): expected nodes (hostlist expression like r256n[01-04]) for a started job, got an empty field"),
        (_with(nodes=None), "jobs[1] (job 7): expected nodes (hostlist expression like r256n[01-04]) for a started job"),
        (_with(nodes=["n1", "n2"]), "jobs[1] (job 7): expected nodes as a hostlist string"),
        (_with(nodes="n[1-2"), "jobs[1] (job 7): expected a hostlist expression like r256n[01-04,07],r257n01 in nodes, got 'n[1-2'"),
        (_with(nodes="n[3-1]"), "jobs[1] (job 7): expected a hostlist expression like r256n[01-04,07],r257n01 in nodes, got 'n[3-1]'"),
        (_with(allocation_nodes=3), "jobs[1] (job 7): allocation_nodes is 3 but nodes 'n[1-2]' expands to 2 distinct host(s)"),
        (_with(allocation_nodes="two"), "jobs[1] (job 7): expected allocation_nodes as an integer >= 0"),
        (_with(het={"job_id": 7, "job_offset": -1}), "jobs[1] (job 7): expected het.job_offset as an integer >= 0"),
    ],
)
def test_bad_jobs_are_named_by_file_and_place(job, expected):
    text = json.dumps({"jobs": [GOOD_JOB, job, GOOD_JOB]})
    with pytest.raises(SchedulerLogError) as info:
        parse_sacct_json(text, "day.json")
    error = info.value
    assert isinstance(error, FileLineError)
    assert (error.source, error.line) == ("day.json", 0)  # no line numbers in JSON: the job's path instead
    assert str(error).startswith("day.json: jobs[1]") and expected in str(error), str(error)


@pytest.mark.parametrize(
    "text, line, expected",
    [
        ("", 1, "got text that is not JSON: Expecting value"),
        ('{"jobs": [\n  {"job_id": 1,}\n]}', 2, "got text that is not JSON"),
        ("1001|1001|hacc|alice|p|q|COMPLETED|...", 1, "got text that is not JSON"),
        ("[]", 0, "expected `sacct --json` output, a JSON object with a 'jobs' list, got a JSON array"),
        ('{"meta": {}, "errors": []}', 0, "a JSON object with a 'jobs' list, got an object with keys 'meta', 'errors'"),
        ('{"jobs": {"7": {}}}', 0, "a JSON object with a 'jobs' list"),
        ('{"jobs": [], "errors": [{"description": "Unable to connect to slurmdbd", "error_number": 1}]}', 0,
         "sacct reported 1 error(s) with this dump (errors[0]: 'Unable to connect to slurmdbd')"),
        ('{"jobs": [], "meta": {"Slurm": {"version": {"major": 21, "minor": 8, "micro": 8}}}}', 0,
         "meta says Slurm 21.8.8: before 22.05.8 `sacct --json` wrote the eligible time as time.start (SchedMD bug 15644)"),
        ('{"jobs": [], "meta": {"Slurm": {"version": {"major": 22, "minor": 5, "micro": 7}}}}', 0, "meta says Slurm 22.5.7"),
    ],
)
def test_bad_files_are_named(text, line, expected):
    with pytest.raises(SchedulerLogError) as info:
        parse_sacct_json(text, "day.json")
    assert info.value.line == line and expected in str(info.value), str(info.value)


def test_a_fixed_22_05_and_a_missing_file():
    assert parse_sacct_json('{"jobs": [], "meta": {"Slurm": {"version": {"major": 22, "minor": 5, "micro": 8}}}}') == []
    with pytest.raises(SchedulerLogError, match="no such file"):
        read_sacct_json(DATA / "nope.json")


def test_the_text_reader_points_json_to_its_reader():
    with pytest.raises(SchedulerLogError) as info:
        read_sacct(REAL_JSON)
    assert info.value.line == 1 and "read it with read_sacct_json" in str(info.value) and 'source = "sacct-json"' in str(info.value)


def test_snapshot_errors_name_a_json_job_by_its_place():
    jobs = parse_sacct_json(json.dumps({"jobs": [GOOD_JOB, _with(job_id=8, nodes="n[2-3]")]}), "day.json")
    with pytest.raises(SchedulerLogError) as info:
        map_snapshot(jobs, ["n1", "n2", "n3"])
    assert str(info.value) == "day.json: jobs[1]: job 8 and job 7 (jobs[0]) both hold host 'n2' at the same time"
    with pytest.raises(SchedulerLogError) as info:
        map_snapshot(jobs[:1], ["n1"])
    assert str(info.value) == "day.json: jobs[0]: job 7 runs on host 'n2', which is not in the fabric's host list"


def test_fixture_readme_names_every_fixture():
    readme = (DATA / "README.md").read_text()
    assert all(p.name in readme for p in DATA.iterdir() if p.name != "README.md")
    assert os.path.getsize(REAL_JSON) < 100_000
