"""Scheduler logs (sacct, SWF): parsing real-looking dumps, refusing bad ones by file and line,
time windows, mapping a snapshot onto fabric hosts, and the background-traffic heuristic b
checked against hand-computed values."""

from __future__ import annotations

import gzip
import itertools
import textwrap
from datetime import datetime

import numpy as np
import pytest
from qoslab.errors import FileLineError
from qoslab.io import scheduler
from qoslab.io.scheduler import (
    HEURISTICS,
    SACCT_FIELDS,
    SchedulerJob,
    SchedulerLogError,
    background_traffic,
    concurrent_with,
    map_snapshot,
    parse_jobcomp,
    parse_sacct,
    parse_sacct_json,
    parse_swf,
    read_jobcomp,
    read_sacct,
    read_swf,
    register_heuristic,
    running_at,
)


def ts(text: str) -> float:
    """sacct's naive local time as POSIX seconds, computed independently of the parser."""
    return datetime(*map(int, text.replace("T", "-").replace(":", "-").split("-"))).timestamp()


# `sacct -a -X -P -n -o JobIDRaw,JobID,JobName,User,Partition,QOS,State,Submit,Start,End,ElapsedRaw,NNodes,AllocNodes,NodeList`
# as it comes: an array task, a het job's two components, a cancelled-by-user job, a running job,
# a pending job, a job cancelled before it got nodes, a step row that -X would have dropped.
SACCT = textwrap.dedent("""\
    1001|1001|hacc|alice|m100_usr_prod|normal|COMPLETED|2024-01-10T07:59:00|2024-01-10T08:00:00|2024-01-10T09:30:00|5400|6|6|r256n[01-04,07],r257n01
    1124|1123_4|sweep|bob|m100_usr_prod|normal|COMPLETED|2024-01-10T08:10:00|2024-01-10T08:15:00|2024-01-10T08:45:00|1800|1|1|r258n12
    2005|2005+0|coupled|carol|m100_usr_prod|normal|RUNNING|2024-01-10T08:20:00|2024-01-10T08:30:00|Unknown|3600|2|2|r259n[01-02]
    2006|2005+1|coupled|carol|m100_usr_prod|normal|RUNNING|2024-01-10T08:20:00|2024-01-10T08:30:00|Unknown|3600|1|1|r259n03

    # a comment the user added
    3000|3000|amr|dave|m100_usr_prod|normal|CANCELLED by 1234|2024-01-10T08:00:00|2024-01-10T08:05:00|2024-01-10T08:50:00|2700|2|2|r260n[05-06]
    3000.batch|3000.batch|batch||||CANCELLED|2024-01-10T08:05:00|2024-01-10T08:05:00|2024-01-10T08:50:00|2700|1|1|r260n05
    4000|4000|queued|erin|m100_usr_prod|normal|PENDING|2024-01-10T08:40:00|Unknown|Unknown|0|4|0|None assigned
    4100|4100|gaveup|erin|m100_usr_prod|normal|CANCELLED by 0|2024-01-10T08:40:00|2024-01-10T08:41:00|2024-01-10T08:41:00|0|2|0|None assigned
    4200|4200_[1-5]|arr|erin|m100_usr_prod|normal|PENDING|2024-01-10T08:40:00|Unknown|Unknown|0|1|0|None assigned
""")


def test_sacct_no_header_realistic():
    jobs = parse_sacct(SACCT, "m100.sacct")
    assert [j.job_id for j in jobs] == ["1001", "1123_4", "2005+0", "2005+1", "3000"]
    hacc = jobs[0]
    assert hacc.nodes == ("r256n01", "r256n02", "r256n03", "r256n04", "r256n07", "r257n01")
    assert hacc.node_count == 6
    assert (hacc.name, hacc.user, hacc.state, hacc.line, hacc.source) == ("hacc", "alice", "COMPLETED", 1, "m100.sacct")
    assert hacc.submit == ts("2024-01-10T07:59:00")
    assert hacc.start == ts("2024-01-10T08:00:00")
    assert hacc.end == ts("2024-01-10T09:30:00")
    assert hacc.end - hacc.start == 5400
    het0, het1 = jobs[2], jobs[3]
    assert het0.end is None and het1.end is None and het0.state == "RUNNING"
    assert het1.nodes == ("r259n03",)
    cancelled = jobs[4]
    assert cancelled.state == "CANCELLED" and cancelled.line == 7
    assert jobs[1].line == 2


def test_sacct_with_header_takes_columns_by_name_and_ignores_extras(tmp_path):
    text = textwrap.dedent("""\
        JobID|Account|NodeList|State|End|Start|NNodes
        77_3|proj|r1n[1-2]|TIMEOUT|2024-01-10T10:00:00|2024-01-10T09:00:00|2
        78|proj|None assigned|PENDING|Unknown|Unknown|1
        78.extern|proj|r1n3|COMPLETED|2024-01-10T10:00:00|2024-01-10T09:00:00|1
    """)
    path = tmp_path / "jobs.txt"
    path.write_text(text)
    jobs = read_sacct(path)
    assert len(jobs) == 1
    job = jobs[0]
    assert (job.job_id, job.nodes, job.state, job.line, job.source) == ("77_3", ("r1n1", "r1n2"), "TIMEOUT", 2, str(path))
    assert job.submit is None and job.name == "" and job.user == ""
    assert job.start == ts("2024-01-10T09:00:00")


def test_sacct_header_of_the_full_query_and_parsable_trailing_delimiter():
    header = "|".join(SACCT_FIELDS) + "|"
    row = "9|9|x|u|p|q|FAILED|2024-01-10T08:00:00|2024-01-10T08:00:00|2024-01-10T08:00:05|5|1|1|n1|"
    jobs = parse_sacct(f"{header}\n{row}\n{header}\n{row}\n")  # two dumps concatenated
    assert [j.line for j in jobs] == [2, 4] and jobs[0].state == "FAILED"


def test_sacct_job_id_raw_only_header():
    jobs = parse_sacct("JobIDRaw|Start|End|NodeList\n55|2024-01-10T08:00:00|Unknown|a[1-3]\n55.0|2024-01-10T08:00:00|Unknown|a1\n")
    assert [(j.job_id, j.node_count) for j in jobs] == [("55", 3)]


def test_sacct_other_delimiter_allows_pipes_in_names():
    text = "1;1;a|b;u;p;q;COMPLETED;2024-01-10T08:00:00;2024-01-10T08:00:00;2024-01-10T08:01:00;60;1;1;n1\n"
    assert parse_sacct(text, delimiter=";")[0].name == "a|b"


GOOD = "1|1|x|u|p|q|COMPLETED|2024-01-10T08:00:00|2024-01-10T08:00:00|2024-01-10T08:01:00|60|2|2|n[1-2]"


@pytest.mark.parametrize(
    "bad, expected",
    [
        ("1|1|x|u|p|q|COMPLETED|2024-01-10T08:00:00|2024-01-10T08:00:00|2024-01-10T08:01:00|60|2|2", "expected 14 '|'-separated fields"),
        (GOOD + "|extra|more", "--delimiter"),
        (GOOD.replace("T08:01:00", " 08:01"), "expected End as YYYY-MM-DDTHH:MM:SS"),
        (GOOD.replace("|2024-01-10T08:00:00|2024-01-10T08:01", "|2024-13-10T08:00:00|2024-01-10T08:01"), "expected Start as YYYY-MM-DDTHH:MM:SS"),
        (GOOD.replace("|2024-01-10T08:00:00|2024-01-10T08:00:00", "|yesterday|2024-01-10T08:00:00"), "expected Submit as YYYY-MM-DDTHH:MM:SS"),
        (GOOD.replace("n[1-2]", "n[1-2"), "expected a hostlist expression"),
        (GOOD.replace("n[1-2]", "n[3-1]"), "expected a hostlist expression"),
        (GOOD.replace("|60|2|2|", "|60|3|2|"), "NNodes is 3 but NodeList 'n[1-2]' expands to 2"),
        (GOOD.replace("|60|2|2|", "|60|2|5|"), "AllocNodes is 5 but NodeList 'n[1-2]' expands to 2"),
        (GOOD.replace("|60|2|2|", "|60|two|2|"), "expected a node count in NNodes"),
        (GOOD.replace("T08:01:00", "T07:00:00"), "expected End >= Start"),
        (GOOD.replace("|n[1-2]", "|"), "expected a NodeList"),
        (GOOD.replace("1|1|", "||", 1), "expected a job id"),
    ],
)
def test_sacct_errors_name_file_line_and_expectation(bad, expected):
    text = f"# header comment\n{GOOD}\n\n{bad}\n{GOOD}\n"
    with pytest.raises(SchedulerLogError) as info:
        parse_sacct(text, "day.sacct")
    error = info.value
    assert isinstance(error, FileLineError)
    assert (error.source, error.line) == ("day.sacct", 4)
    assert str(error).startswith("day.sacct:4: ")
    assert expected in str(error)


@pytest.mark.parametrize(
    "text, line, expected",
    [
        ("JobID|Start|End\n1|2024-01-10T08:00:00|Unknown\n", 1, "header lacks column(s) NodeList"),
        ("JobID|Start|End|NodeList|start\n", 1, "twice"),
        ("JobID|Start|End|NodeList\n1|2024-01-10T08:00:00|Unknown\n", 2, "expected 4 '|'-separated fields (as many as the header on line 1)"),
        (GOOD + "\nJobID|Start|End|NodeList\n", 2, "expected one header, at the top"),
        ("JobID|Start|End|NodeList\nJobID|End|Start|NodeList\n", 2, "differs"),
    ],
)
def test_sacct_header_errors(text, line, expected):
    with pytest.raises(SchedulerLogError) as info:
        parse_sacct(text, "h.sacct")
    assert info.value.line == line and expected in str(info.value)


def test_missing_file_is_an_error_not_a_traceback(tmp_path):
    with pytest.raises(SchedulerLogError, match="no such file"):
        read_sacct(tmp_path / "nope.sacct")
    with pytest.raises(SchedulerLogError, match="expected a file"):
        read_swf(tmp_path)
    with pytest.raises(SchedulerLogError, match="expected a regular file, got a device"):
        read_swf("/dev/zero")  # read whole, it never ended


def test_logs_that_cannot_be_read_whole_are_refused_by_name(tmp_path, monkeypatch):
    # A gzip bomb (14 MB -> 3 GB of zeros) was a MemoryError traceback; the cap holds for what is
    # decompressed, not only for the file.
    monkeypatch.setattr(scheduler, "MAX_LOG_BYTES", 1 << 20)
    bomb = tmp_path / "bomb.swf.gz"
    bomb.write_bytes(gzip.compress(b"0" * (2 << 20)))
    with pytest.raises(SchedulerLogError, match="bomb.swf.gz: larger than"):
        read_swf(bomb)
    plain = tmp_path / "big.swf"
    plain.write_bytes(b";" * (2 << 20))
    with pytest.raises(SchedulerLogError, match="big.swf: larger than"):
        read_swf(plain)


def test_sacct_json_that_python_cannot_decode_names_the_log():
    # RecursionError and Python's 4300-digit limit came out as tracebacks, or named the study file.
    with pytest.raises(SchedulerLogError, match="log.json: .*nested too deeply"):
        parse_sacct_json("[" * 200_000 + "]" * 200_000, "log.json")
    with pytest.raises(SchedulerLogError, match="log.json: a number of more than"):
        parse_sacct_json('{"jobs": [' + "9" * 5000 + "]}", "log.json")


# ------------------------------------------------------------------------------------------------
# SWF

# jobcomp/filetxt lines as the plugin writes them (one per finished job): a job name and a
# work directory with spaces, an array task, a het job component, a job that never got nodes.
JOBCOMP = textwrap.dedent("""\
    JobId=1001 UserId=alice(1001) GroupId=hpc(100) Name=hacc run 3 JobState=COMPLETED Partition=m100_usr_prod TimeLimit=120 StartTime=2024-01-10T08:00:00 EndTime=2024-01-10T09:30:00 NodeList=r256n[01-04,07],r257n01 NodeCnt=6 ProcCnt=768 WorkDir=/m100/home/alice/my runs ReservationName= Tres=cpu=768,node=6 Account=prj1 QOS=normal WcKey= Cluster=m100 SubmitTime=2024-01-10T07:59:00 EligibleTime=2024-01-10T07:59:00 DerivedExitCode=0:0 ExitCode=0:0
    JobId=1124 UserId=bob(1002) GroupId=hpc(100) Name=sweep JobState=TIMEOUT Partition=m100_usr_prod TimeLimit=30 StartTime=2024-01-10T08:15:00 EndTime=2024-01-10T08:45:00 NodeList=r258n12 NodeCnt=1 ProcCnt=128 WorkDir=/tmp ReservationName= Tres=cpu=128,node=1 Account=prj1 QOS=normal WcKey= Cluster=m100 SubmitTime=2024-01-10T08:10:00 EligibleTime=2024-01-10T08:10:00 ArrayJobId=1123 ArrayTaskId=4 DerivedExitCode=0:0 ExitCode=0:1

    JobId=2006 UserId=carol(1003) GroupId=hpc(100) Name=coupled JobState=COMPLETED Partition=m100_usr_prod TimeLimit=60 StartTime=2024-01-10T08:30:00 EndTime=2024-01-10T09:00:00 NodeList=r259n[01-02] NodeCnt=2 ProcCnt=256 WorkDir=/tmp ReservationName= Tres=cpu=256,node=2 Account=prj2 QOS=normal WcKey= Cluster=m100 SubmitTime=2024-01-10T08:20:00 EligibleTime=2024-01-10T08:20:00 HetJobId=2005 HetJobOffset=1 DerivedExitCode=0:0 ExitCode=0:0
    JobId=4100 UserId=erin(1005) GroupId=hpc(100) Name=gaveup JobState=CANCELLED Partition=m100_usr_prod TimeLimit=60 StartTime=Unknown EndTime=2024-01-10T08:41:00 NodeList=(null) NodeCnt=0 ProcCnt=0 WorkDir=/tmp ReservationName= Tres= Account=prj2 QOS=normal WcKey= Cluster=m100 SubmitTime=2024-01-10T08:40:00 EligibleTime=2024-01-10T08:40:00 DerivedExitCode=0:0 ExitCode=0:0
""")


def test_jobcomp_realistic(tmp_path):
    (tmp_path / "slurm_jobcomp.log").write_text(JOBCOMP)
    jobs = read_jobcomp(tmp_path / "slurm_jobcomp.log")
    assert [j.job_id for j in jobs] == ["1001", "1124", "2006"]
    hacc = jobs[0]
    assert (hacc.name, hacc.user, hacc.state, hacc.line) == ("hacc run 3", "alice", "COMPLETED", 1)
    assert hacc.nodes == ("r256n01", "r256n02", "r256n03", "r256n04", "r256n07", "r257n01")
    assert hacc.submit == ts("2024-01-10T07:59:00") and hacc.end - hacc.start == 5400
    assert jobs[1].state == "TIMEOUT" and jobs[1].nodes == ("r258n12",)
    assert jobs[2].line == 4 and jobs[2].nodes == ("r259n01", "r259n02")
    # The same jobs as the sacct dump of that cluster, by name and time.
    by_sacct = {j.job_id: j for j in parse_sacct(SACCT)}
    assert hacc.nodes == by_sacct["1001"].nodes and hacc.start == by_sacct["1001"].start


JOB = ("JobId=7 UserId=u(1) GroupId=g(1) Name=x JobState=COMPLETED Partition=p TimeLimit=1 StartTime=2024-01-10T08:00:00 "
       "EndTime=2024-01-10T08:01:00 NodeList=n[1-2] NodeCnt=2 ProcCnt=2 WorkDir=/ ReservationName= Tres= Account=a QOS=q "
       "WcKey= Cluster=c SubmitTime=2024-01-10T08:00:00 EligibleTime=2024-01-10T08:00:00 DerivedExitCode=0:0 ExitCode=0:0")


@pytest.mark.parametrize("bad, expected", [
    ("7|7|x", "expected a jobcomp line starting with JobId="),
    (JOB.split(" NodeList")[0], "expected NodeList=... on a jobcomp line (a line cut short?)"),
    (JOB.replace("NodeCnt=2", "NodeCnt=3"), "NodeCnt is 3 but NodeList 'n[1-2]' expands to 2 distinct host(s)"),
    (JOB.replace("n[1-2]", "n[1-"), "expected a hostlist expression like r256n[01-04,07],r257n01 in NodeList"),
    (JOB.replace("EndTime=2024-01-10T08:01:00", "EndTime=2024-01-10T07:01:00"), "expected EndTime >= StartTime"),
    (JOB.replace("StartTime=2024-01-10T08:00:00", "StartTime=10/01/24"), "expected StartTime as YYYY-MM-DDTHH:MM:SS"),
    # A started job with nodes counted but none listed: a damaged line, as in sacct (it was skipped).
    (JOB.replace("NodeList=n[1-2]", "NodeList="), "expected a NodeList (hostlist expression like r256n[01-04]) for a "
                                                 "started job, got an empty field"),
])
def test_jobcomp_errors_name_file_line_and_expectation(bad, expected):
    with pytest.raises(SchedulerLogError) as error:
        parse_jobcomp(JOB + "\n\n" + bad + "\n", "jobcomp.log")
    assert str(error.value).startswith("jobcomp.log:3: ") and expected in str(error.value), str(error.value)


SWF = textwrap.dedent("""\
    ; Version: 2.2
    ; Computer: Test cluster
    ; UnixStartTime: 1704067200
    ; MaxNodes: 8
    ; MaxProcs: 32
    ; Note: -1 marks unknown fields
    1 0 10 100 8 -1 -1 8 200 -1 1 3 1 -1 1 -1 -1 -1
    2 5 -1 50 4 -1 -1 4 100 -1 1 3 1 -1 1 -1 -1 -1
    3 20 0 30 -1 -1 -1 6 60 -1 0 -1 1 -1 1 -1 -1 -1
    4 25 5 -1 4 -1 -1 4 60 -1 5 4 1 -1 1 -1 -1 -1
    5 30 0 0 -1 -1 -1 -1 60 -1 5 4 1 -1 1 -1 -1 -1

    6 40 2.5 7.5 32 12.25 -1 32 60 -1 4 4 1 -1 1 -1 -1 -1
""")


def test_swf_realistic():
    jobs = parse_swf(SWF, "trace.swf", procs_per_node=4)
    # 2: unknown wait; 4: unknown run time; 5: no processor count at all
    assert [j.job_id for j in jobs] == ["1", "3", "6"]
    first, third, sixth = jobs
    assert (first.submit, first.start, first.end, first.node_count, first.state, first.user) == (0, 10, 110, 2, "completed", "3")
    assert first.nodes == () and first.line == 7 and first.source == "trace.swf"
    # allocated unknown: requested 6 processors -> ceil(6 / 4) = 2 nodes; user -1 -> ""
    assert (third.start, third.end, third.node_count, third.state, third.user) == (20, 50, 2, "failed", "")
    assert (sixth.start, sixth.end, sixth.node_count, sixth.state) == (42.5, 50, 8, "partial-failed")


def test_swf_unknown_wait_can_be_read_as_zero(tmp_path):
    path = tmp_path / "t.swf"
    path.write_text(SWF)
    jobs = read_swf(path, 4, assume_zero_wait=True)
    assert [j.job_id for j in jobs] == ["1", "2", "3", "6"]
    assert (jobs[1].start, jobs[1].end) == (5, 55)


def test_swf_with_no_usable_job_says_why():
    text = "1 0 -1 10 1 -1 -1 1 -1 -1 1 -1 -1 -1 -1 -1 -1 -1\n"
    with pytest.raises(SchedulerLogError, match="assume_zero_wait=True") as info:
        parse_swf(text, "nowait.swf")
    assert info.value.line == 0
    assert parse_swf(text, assume_zero_wait=True)[0].end == 10
    assert parse_swf("; only comments\n") == []


ROW = "7 0 0 10 4 -1 -1 4 -1 -1 1 -1 -1 -1 -1 -1 -1 -1"


@pytest.mark.parametrize(
    "header, bad, expected",
    [
        ("", "7 0 0 10 4 -1 -1 4 -1 -1 1 -1 -1 -1 -1 -1 -1", "expected 18 whitespace-separated SWF fields, got 17"),
        ("", ROW.replace(" 10 ", " ten "), "expected a number in SWF field 4, got 'ten'"),
        ("", ROW.replace(" 10 ", " nan "), "expected a number in SWF field 4"),
        ("", ROW.replace(" 0 0 ", " 0 -5 "), "expected the wait time (SWF field 3) as -1 or seconds >= 0"),
        ("", ROW.replace(" 4 -1 -1 4 ", " 4.5 -1 -1 4 "), "expected the allocated processors (SWF field 5)"),
        ("", ROW.replace(" 1 -1 -1 -1 -1", " 9 -1 -1 -1 -1"), "expected the status (SWF field 11) as one of"),
        ("; MaxNodes: 1\n", ROW, "need 4 nodes, more than the header's MaxNodes 1"),
        ("; MaxProcs: 2\n", ROW, "SWF field 5 gives 4 processors, more than the header's MaxProcs 2"),
    ],
)
def test_swf_errors_name_file_and_line(header, bad, expected):
    small = ROW.replace(" 4 -1 -1 4 ", " 1 -1 -1 1 ")  # within every limit
    text = f"; Version: 2.2\n{header}{small}\n{bad}\n"
    line = 3 + header.count("\n")
    with pytest.raises(SchedulerLogError) as info:
        parse_swf(text, "bad.swf")
    assert (info.value.source, info.value.line) == ("bad.swf", line)
    assert str(info.value).startswith(f"bad.swf:{line}: ") and expected in str(info.value)


def test_swf_bad_header_value_and_bad_procs_per_node():
    with pytest.raises(SchedulerLogError, match="bad.swf:2: expected an integer after '; MaxNodes:'"):
        parse_swf(f"; Version: 2.2\n; MaxNodes: lots\n{ROW}\n", "bad.swf")
    assert parse_swf(f"; MaxNodes: -1\n{ROW}\n")[0].node_count == 4  # -1: not recorded, no check
    with pytest.raises(ValueError, match="procs_per_node"):
        parse_swf(ROW, procs_per_node=0)


# ------------------------------------------------------------------------------------------------
# Time windows


def job(job_id: str, start: float, end: float | None, nodes: tuple[str, ...] = (), count: int | None = None, line: int = 1) -> SchedulerJob:
    return SchedulerJob(job_id, "", "", "", 0.0, start, end, nodes, len(nodes) if count is None else count, line, "snap.log")


def test_running_at_boundaries():
    a, b, c = job("a", 10, 20), job("b", 20, 30), job("c", 15, None)
    assert running_at([a, b, c], 9.999) == []
    assert running_at([a, b, c], 10) == [a]
    assert running_at([a, b, c], 19.5) == [a, c]
    assert running_at([a, b, c], 20) == [b, c]  # a has ended at 20, b starts at 20
    assert running_at([a, b, c], 1e9) == [c]


def test_concurrent_with_boundaries():
    a, b, c, d = job("a", 0, 10), job("b", 10, 20), job("c", 20, 30), job("d", 25, None)
    assert concurrent_with([a, b, c, d], 10, 20) == [b]  # touching ends do not overlap
    assert concurrent_with([a, b, c, d], 9.5, 20.5) == [a, b, c]
    assert concurrent_with([a, b, c, d], 30, 31) == [d]
    assert concurrent_with([a, b, c, d], 15, None) == [b, c, d]


# ------------------------------------------------------------------------------------------------
# Snapshot mapping

HOSTS = [f"n{i:02d}" for i in range(16)]


def test_map_by_name_from_sacct():
    jobs = running_at(parse_sacct(SACCT, "m100.sacct"), ts("2024-01-10T08:31:00"))
    fabric = [f"r256n{i:02d}" for i in range(1, 9)] + ["r257n01", "r258n12"] + [f"r259n{i:02d}" for i in range(1, 4)] + ["r260n05", "r260n06"]
    mapped = map_snapshot(jobs, fabric)
    assert [(j.job_id, hosts) for j, hosts in mapped] == [
        ("1001", (0, 1, 2, 3, 6, 8)),
        ("1123_4", (9,)),
        ("2005+0", (10, 11)),
        ("2005+1", (12,)),
        ("3000", (13, 14)),
    ]


def test_map_unknown_host_names_job_line_and_host():
    jobs = parse_sacct(SACCT, "m100.sacct")
    with pytest.raises(SchedulerLogError) as info:
        map_snapshot(jobs, HOSTS)
    assert str(info.value).startswith("m100.sacct:1: ") and "'r256n01'" in str(info.value)


def test_map_overlap_names_both_lines_only_when_times_overlap():
    first = job("a", 0, 100, ("n01", "n02"), line=3)
    second = job("b", 50, None, ("n02",), line=9)
    with pytest.raises(SchedulerLogError) as info:
        map_snapshot([first, second], HOSTS)
    message = str(info.value)
    assert message.startswith("snap.log:9: ") and "line 3" in message and "'n02'" in message
    later = job("c", 100, 200, ("n02",), line=12)  # starts when a ends: the host is free again
    assert map_snapshot([first, later], HOSTS)[1][1] == (2,)


def test_map_random_placement_is_seeded_and_avoids_held_hosts():
    named = job("named", 0, 100, ("n00", "n01", "n02", "n03"))
    counted = [job(f"s{i}", 0, 100, count=3, line=10 + i) for i in range(3)]
    one = map_snapshot([named, *counted], HOSTS, rng=np.random.default_rng(7))
    same = map_snapshot([named, *counted], HOSTS, rng=7)
    other = map_snapshot([named, *counted], HOSTS, rng=8)
    assert [h for _, h in one] == [h for _, h in same]
    assert [h for _, h in one] != [h for _, h in other]
    placed = [h for _, h in one[1:]]
    assert all(len(h) == 3 for h in placed)
    flat = [x for h in placed for x in h]
    assert len(set(flat)) == 9 and not set(flat) & {0, 1, 2, 3}
    with pytest.raises(ValueError, match="needs rng="):
        map_snapshot(counted, HOSTS)


def test_map_contiguous_placement_takes_lowest_free_block():
    named = job("named", 0, 100, ("n02", "n06"))
    a = job("a", 0, 100, count=2, line=2)
    b = job("b", 0, 100, count=3, line=3)
    c = job("c", 200, 300, count=16, line=4)  # later: the whole fabric is free again
    mapped = map_snapshot([named, a, b, c], HOSTS, placement="contiguous")
    assert [h for _, h in mapped] == [(2, 6), (0, 1), (3, 4, 5), tuple(range(16))]
    too_big = job("big", 0, 100, count=10, line=5)
    with pytest.raises(SchedulerLogError) as info:
        map_snapshot([named, too_big], HOSTS, placement="contiguous")
    assert str(info.value).startswith("snap.log:5: ") and "10 contiguous hosts" in str(info.value)
    with pytest.raises(SchedulerLogError, match="snap.log:5: .*needs 15 hosts but only 14"):
        map_snapshot([named, job("big", 0, 100, count=15, line=5)], HOSTS, rng=0)
    with pytest.raises(ValueError, match="random, contiguous"):
        map_snapshot([a], HOSTS, placement="packed")


def test_map_swf_jobs_end_to_end():
    jobs = parse_swf(SWF, "trace.swf", procs_per_node=4)
    snapshot = running_at(jobs, 45)  # 1: 10-110, 3: 20-50, 6: 42.5-50
    assert [j.job_id for j in snapshot] == ["1", "3", "6"]
    with pytest.raises(SchedulerLogError, match="trace.swf:13: job 6 needs 8 hosts but only 4 of 8 are free"):
        map_snapshot(snapshot, HOSTS[:8], rng=1)
    mapped = map_snapshot(snapshot, HOSTS, rng=1)
    assert sorted(len(h) for _, h in mapped) == [2, 2, 8]


# ------------------------------------------------------------------------------------------------
# Background-traffic heuristic

GROUPS = [h // 4 for h in range(16)]  # 4 groups x 4 hosts


ALL = lambda i: True  # every background job communicates (one-node ones too)


def test_b_published_definition_by_hand():
    """Nc unique communicating hosts, Nt the fabric, N'c communicating hosts with duplication, Na all
    running hosts with duplication; communicating by default = jobs of 2+ hosts."""
    target = (0, 1)
    background = [(2, 3), (8, 9, 10), (12,)]
    # Nc = 5, Nt = 16, N'c = 5, Na = 6 (the one-node job counts only there)
    assert background_traffic(target, background, GROUPS) == pytest.approx(5 / 16 * 5 / 6 * 100)
    # where the target sits does not matter
    assert background_traffic((14, 15), background, GROUPS) == pytest.approx(5 / 16 * 5 / 6 * 100)
    # a host shared by two jobs: once in Nc, twice in N'c and Na
    shared = [(2, 3), (3, 4, 5)]
    assert background_traffic(target, shared, GROUPS) == pytest.approx(4 / 16 * 5 / 5 * 100)
    assert background_traffic(target, shared + [(6,)], GROUPS) == pytest.approx(4 / 16 * 5 / 6 * 100)
    # the predicate decides who communicates: here only the second job
    assert background_traffic(target, background, GROUPS, intensive=[False, True, False]) == pytest.approx(
        3 / 16 * 3 / 6 * 100)
    assert background_traffic(target, background, GROUPS, intensive=ALL) == pytest.approx(6 / 16 * 6 / 6 * 100)


def test_b_published_definition_never_falls_when_a_communicating_job_starts():
    background: list[tuple[int, ...]] = [(12,), (13,)]
    series = [background_traffic((0,), background, GROUPS)]
    for job in [(1, 2), (4, 5, 6), (8, 9), (14, 15)]:
        background.append(job)
        series.append(background_traffic((0,), background, GROUPS))
    assert series[0] == 0.0
    assert all(x < y for x, y in itertools.pairwise(series)), series


def test_b_published_definition_monotone_on_random_snapshots():
    """Adding a communicating multi-node job never lowers b: Nc cannot fall, and
    (N'c + k) / (Na + k) >= N'c / Na because N'c <= Na. Nodes may be shared between jobs, and
    which jobs communicate is decided by a mask as well as by the default."""
    rng = np.random.default_rng(7)
    for _ in range(300):
        jobs = [tuple(rng.choice(16, size=rng.integers(1, 6), replace=False)) for _ in range(rng.integers(0, 6))]
        mask = [bool(x) for x in rng.integers(0, 2, size=len(jobs))]
        new = tuple(rng.choice(16, size=rng.integers(2, 6), replace=False))
        target = (int(rng.integers(16)),)
        assert background_traffic(target, jobs + [new], GROUPS) >= background_traffic(target, jobs, GROUPS) - 1e-12
        assert background_traffic(target, jobs + [new], GROUPS, intensive=mask + [True]) >= background_traffic(
            target, jobs, GROUPS, intensive=mask) - 1e-12
        # and whatever b is, it is in [0, 100]
        assert 0.0 <= background_traffic(target, jobs, GROUPS, intensive=mask) <= 100.0


def test_b_counts_seen_by_a_definition():
    seen = []
    register_heuristic("spy", lambda c: seen.append(c) or 0.0)
    try:
        background_traffic((0, 1), [(2, 3), (3, 4, 5), (12,)], GROUPS, "spy")
    finally:
        del HEURISTICS["spy"]
    (c,) = seen
    assert (c.nc_unique, c.nt, c.nc_with_duplicates, c.na_with_duplicates) == (4, 16, 5, 6)
    assert c.nc == c.nc_unique
    assert c.background == (frozenset({2, 3}), frozenset({3, 4, 5}))
    assert len(c.every_job) == 3 and c.target == frozenset({0, 1}) and c.target_groups == frozenset({0})
    assert (c.nc_in_target_groups, c.na) == (2, 4)  # hosts 2, 3 of group 0's four (groups-touched)
    with pytest.raises(AttributeError):
        c.nt = 1  # type: ignore[misc]


def test_b_groups_touched_by_hand_four_groups():
    target = (0, 1)  # group 0
    background = [(2, 3), (8, 9, 10)]  # group 0 and group 2
    # Nc = 5 communicating hosts, Nt = 16, 2 of them in group 0, 4 hosts in group 0
    assert background_traffic(target, background, GROUPS, "groups-touched") == pytest.approx(5 / 16 * 2 / 4 * 100)
    assert background_traffic(target, background, GROUPS, "shared-groups") == pytest.approx(50.0)
    # a target in groups 0 and 2: 8 hosts there, 5 communicating
    assert background_traffic((0, 8), [(2, 3), (9, 10, 11)], GROUPS, "groups-touched") == pytest.approx(5 / 16 * 5 / 8 * 100)
    # a mapping works as well as a list
    assert background_traffic(target, background, dict(enumerate(GROUPS)), "groups-touched") == pytest.approx(15.625)


def test_b_is_zero_without_background_and_in_other_groups():
    assert background_traffic((0, 1), [], GROUPS) == 0.0
    assert background_traffic((0, 1), [(12,)], GROUPS) == 0.0  # one-node jobs do not communicate
    assert background_traffic((0, 1), [(4, 5, 6, 7), (12,)], GROUPS, "groups-touched") == 0.0
    assert background_traffic((0, 1), [(4, 5, 6, 7), (12,)], GROUPS, "shared-groups") == 0.0


def test_b_rises_as_jobs_join_the_target_group():
    target = (0,)
    background: list[tuple[int, ...]] = [(8, 9)]
    values = {name: [background_traffic(target, background, GROUPS, name, intensive=ALL)]
              for name in ("groups-touched", "shared-groups")}
    for host in (1, 2, 3):
        background.append((host,))
        for name, series in values.items():
            series.append(background_traffic(target, background, GROUPS, name, intensive=ALL))
    for name, series in values.items():
        assert all(a < b for a, b in itertools.pairwise(series)), (name, series)
    assert values["groups-touched"][-1] == pytest.approx(5 / 16 * 3 / 4 * 100)


def test_b_counts_only_intensive_jobs():
    background = [(2, 3), (8, 9, 10)]
    assert background_traffic((0, 1), background, GROUPS, "groups-touched", intensive=[False, True]) == 0.0
    assert background_traffic((0, 1), background, GROUPS, "groups-touched", intensive=lambda i: i == 0) == pytest.approx(
        2 / 16 * 2 / 4 * 100)
    with pytest.raises(ValueError, match="intensive has 1 entries but there are 2"):
        background_traffic((0, 1), background, GROUPS, intensive=[True])


def test_b_shared_hosts_count_once_in_nc():
    assert background_traffic((0,), [(1, 2), (2, 3)], GROUPS, "groups-touched") == pytest.approx(3 / 16 * 3 / 4 * 100)


def test_b_errors():
    with pytest.raises(ValueError, match="known: groups-touched, salimi-beni, shared-groups"):
        background_traffic((0,), [], GROUPS, "salimi")
    with pytest.raises(ValueError, match="target_hosts is empty"):
        background_traffic((), [], GROUPS)
    with pytest.raises(ValueError, match="host 98 has no group"):
        background_traffic((0,), [(98, 99)], GROUPS)
    with pytest.raises(ValueError, match="host 16 has no group"):
        background_traffic((16,), [], GROUPS)


def test_register_heuristic():
    register_heuristic("jobs-in-groups", lambda c: float(sum(1 for b in c.background if any(GROUPS[h] in c.target_groups for h in b))))
    try:
        assert background_traffic((0,), [(1,), (2, 3), (8,)], GROUPS, "jobs-in-groups", intensive=ALL) == 2.0
        with pytest.raises(ValueError, match="already exists"):
            register_heuristic("jobs-in-groups", lambda c: 0.0)
        register_heuristic("jobs-in-groups", lambda c: 1.0, replace=True)
        assert background_traffic((0,), [], GROUPS, "jobs-in-groups") == 1.0
        with pytest.raises(TypeError):
            register_heuristic("broken", 3)  # type: ignore[arg-type]
    finally:
        HEURISTICS.pop("jobs-in-groups", None)


def test_end_to_end_sacct_to_b():
    """A day's sacct, a 16-host fabric of 4 groups, b for the job that started at 08:30."""
    fabric = [f"r256n{i:02d}" for i in range(1, 9)] + ["r257n01", "r258n12"] + [f"r259n{i:02d}" for i in range(1, 4)] + ["r260n05", "r260n06", "spare"]
    groups = [h // 4 for h in range(16)]
    jobs = parse_sacct(SACCT, "m100.sacct")
    target = next(j for j in jobs if j.job_id == "2005+0")
    others = [j for j in concurrent_with(jobs, target.start, target.end) if j is not target and not j.job_id.startswith("2005+")]
    mapped = {j.job_id: h for j, h in map_snapshot([target, *others], fabric)}
    background = [mapped[j.job_id] for j in others]
    # target on hosts 10, 11 (group 2); others: 1001 on 0-3, 6, 8 (groups 0, 1, 2), 1123_4 on 9
    # (group 2, one node), 3000 on 13, 14 (group 3). Published: the communicating jobs (2+ nodes)
    # hold 8 hosts (Nc = N'c = 8), all jobs 9 (Na); groups-touched with every job: 9 foreign
    # hosts, 2 of them (8, 9) in the target's group of 4.
    assert background_traffic(mapped[target.job_id], background, groups) == pytest.approx(8 / 16 * 8 / 9 * 100)
    assert background_traffic(mapped[target.job_id], background, groups, "groups-touched",
                              intensive=lambda i: True) == pytest.approx(9 / 16 * 2 / 4 * 100)


def test_sacct_truncated_state_keeps_the_word():
    jobs = parse_sacct(GOOD.replace("COMPLETED", "CANCELLED+") + "\n" + GOOD.replace("COMPLETED", "OUT_OF_MEMORY"))
    assert [j.state for j in jobs] == ["CANCELLED", "OUT_OF_MEMORY"]


def test_sacct_job_named_like_a_column_is_data_not_a_header():
    jobs = parse_sacct(GOOD.replace("|x|", "|JobID|") + "\n" + GOOD)
    assert [j.name for j in jobs] == ["JobID", "x"]
