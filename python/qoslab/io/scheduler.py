"""Job-scheduler logs (Slurm ``sacct`` text or JSON, ``jobcomp/filetxt``, Standard Workload Format) turned
into background-traffic snapshots on a fabric, and the background-traffic heuristic of Salimi Beni
& Cosenza.

Three steps, each usable alone:

1. ``read_sacct`` / ``read_sacct_json`` / ``read_jobcomp`` / ``read_swf``: the log as
   ``SchedulerJob`` records (started jobs only).
2. ``running_at`` / ``concurrent_with`` and ``map_snapshot``: the jobs running beside a target,
   as host indices of our fabric (by name for Slurm logs, placed with a seeded RNG for SWF).
3. ``background_traffic``: the heuristic b, as the authors define its symbols (their Bench 2022
   talk), with pluggable definitions for which jobs communicate and for locality-aware variants
   (docs/scheduler-logs.md).
"""

from __future__ import annotations

import gzip
import json
import math
import re
import sys
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import hostlist
import numpy as np

from qoslab.errors import FileLineError
from qoslab.io.files import NotReadable, read_bytes

__all__ = [
    "HEURISTICS",
    "SACCT_FIELDS",
    "BackgroundCounts",
    "SchedulerJob",
    "SchedulerLogError",
    "background_traffic",
    "concurrent_with",
    "map_snapshot",
    "parse_jobcomp",
    "parse_sacct",
    "parse_sacct_json",
    "parse_swf",
    "read_jobcomp",
    "read_sacct",
    "read_sacct_json",
    "read_swf",
    "register_heuristic",
    "running_at",
]


class SchedulerLogError(FileLineError):
    """A scheduler log (or a job from one) qoslab cannot use; names the file and line (for
    ``sacct --json``, line 0 and the job's place in the file, ``jobs[3]``, in the message)."""


@dataclass(frozen=True)
class SchedulerJob:
    """One job allocation that ran (or is running).

    Times are POSIX seconds for sacct (naive local datetimes, as sacct prints them; ``sacct --json``
    gives POSIX seconds itself) and seconds from the log's start for SWF. ``end`` is None for a job
    still running. ``submit`` is None only when a sacct file with a header has no Submit column (or
    a JSON job has no submission time). ``nodes`` is empty for SWF (counts only). ``line`` is the
    line in the file; for ``sacct --json``, where there are no lines to speak of, it is the job's
    position in the ``jobs`` list counting from 1, and ``json_path`` says where it is (``jobs[0]``).
    """

    job_id: str
    name: str
    user: str
    state: str
    submit: float | None
    start: float
    end: float | None
    nodes: tuple[str, ...]
    node_count: int
    line: int
    source: str = "<text>"
    json_path: str | None = None

    @property
    def where(self) -> str:
        return f"{self.source}:{self.json_path}" if self.json_path else f"{self.source}:{self.line}"


def _job_error(job: SchedulerJob, message: str) -> SchedulerLogError:
    """An error about a job read earlier, placed by line or, for JSON, by its path in the file."""
    if job.json_path:
        return SchedulerLogError(job.source, 0, f"{job.json_path}: {message}")
    return SchedulerLogError(job.source, job.line, message)


def _place(job: SchedulerJob) -> str:
    return job.json_path if job.json_path else f"line {job.line}"


# ------------------------------------------------------------------------------------------------
# sacct

#: The columns of the recommended query, in order (the no-header form must have exactly these).
SACCT_FIELDS = (
    "JobIDRaw",
    "JobID",
    "JobName",
    "User",
    "Partition",
    "QOS",
    "State",
    "Submit",
    "Start",
    "End",
    "ElapsedRaw",
    "NNodes",
    "AllocNodes",
    "NodeList",
)
_REQUIRED_COLUMNS = ("Start", "End", "NodeList")
_NOT_SET = ("Unknown", "None", "")
_TIME_FORMAT = "%Y-%m-%dT%H:%M:%S"
_COLUMN_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")


def read_sacct(path: str | Path, *, delimiter: str = "|") -> list[SchedulerJob]:
    """The started job allocations in a ``sacct -P`` dump (with or without its header line)."""
    return parse_sacct(_read_text(path), str(path), delimiter=delimiter)


def parse_sacct(text: str, source: str = "<text>", *, delimiter: str = "|") -> list[SchedulerJob]:
    """Parses ``sacct -a -X -P [-n] -o ...`` output; see ``SACCT_FIELDS`` for the no-header form.

    Skipped, not errors: blank and ``#`` lines, step rows (JobID with a '.'), jobs that never got
    nodes (Start Unknown/None, NodeList ``None assigned``, AllocNodes 0)."""
    if text.lstrip().startswith("{"):
        number = text[: len(text) - len(text.lstrip())].count("\n") + 1
        raise SchedulerLogError(
            source, number, 'this looks like `sacct --json` output, not `sacct -P` text; read it with read_sacct_json '
            '(in a tail study: source = "sacct-json")'
        )
    default = {name.lower(): i for i, name in enumerate(SACCT_FIELDS)}
    columns: dict[str, int] | None = None  # from the header line, else the default order
    header_line = 0
    jobs: list[SchedulerJob] = []
    for number, raw in enumerate(text.split("\n"), start=1):
        line = raw.rstrip("\r")
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        fields = [f.strip() for f in line.split(delimiter)]
        header = _sacct_header(fields, source, number)
        if header is not None:
            if columns is None:
                columns, header_line = header, number
            elif header != columns or not header_line:
                raise SchedulerLogError(
                    source, number, "expected one header, at the top (or repeated unchanged), got a header that differs from the columns above"
                )
            continue  # the header, or the same one again (concatenated dumps)
        if columns is None:
            columns = default
        width = max(columns.values()) + 1
        if len(fields) == width + 1 and fields[-1] == "":
            fields.pop()  # `sacct -p` ends every line with the delimiter
        if len(fields) != width:
            expected = f"as many as the header on line {header_line}" if header_line else f"{delimiter.join(SACCT_FIELDS)}"
            hint = " (a job name holding the delimiter? re-run sacct with --delimiter)" if len(fields) > width else ""
            raise SchedulerLogError(
                source, number, f"expected {width} '{delimiter}'-separated fields ({expected}), got {len(fields)}{hint}"
            )
        job = _sacct_row(fields, columns, source, number)
        if job is not None:
            jobs.append(job)
    return jobs


def _sacct_header(fields: list[str], source: str, number: int) -> dict[str, int] | None:
    """Column positions by lowercase name if this line is a header, else None."""
    if fields and fields[-1] == "":
        fields = fields[:-1]
    names = [f.lower() for f in fields]
    if "jobid" not in names and "jobidraw" not in names:
        return None
    if not all(_COLUMN_NAME.match(f) for f in fields):
        return None  # a data row (dates, numbers) whose job happens to be named "JobID"
    columns: dict[str, int] = {}
    for i, name in enumerate(names):
        if name in columns:
            raise SchedulerLogError(source, number, f"header names column {fields[i]!r} twice")
        columns[name] = i
    missing = [c for c in _REQUIRED_COLUMNS if c.lower() not in columns]
    if missing:
        raise SchedulerLogError(
            source, number, f"header lacks column(s) {', '.join(missing)}; expected at least JobID (or JobIDRaw), Start, End, NodeList"
        )
    return columns


def _sacct_row(fields: list[str], columns: dict[str, int], source: str, number: int) -> SchedulerJob | None:
    def get(name: str) -> str | None:
        i = columns.get(name.lower())
        return None if i is None else fields[i]

    job_id = get("JobID") or get("JobIDRaw") or ""
    raw_id = get("JobIDRaw") or ""
    if not job_id:
        raise SchedulerLogError(source, number, "expected a job id in JobID/JobIDRaw, got an empty field")
    if "." in job_id or "." in raw_id:
        return None  # a step row (.batch, .extern, .0): its nodes belong to the allocation row
    start_text, end_text, node_text = get("Start") or "", get("End") or "", get("NodeList") or ""
    alloc_text = get("AllocNodes")
    if start_text in _NOT_SET or node_text.startswith("None assigned") or alloc_text == "0":
        return None  # pending, or cancelled before it got nodes: no traffic
    start = _sacct_time(start_text, "Start", source, number)
    end = None if end_text in _NOT_SET else _sacct_time(end_text, "End", source, number)
    if end is not None and end < start:
        raise SchedulerLogError(source, number, f"expected End >= Start, got Start {start_text} and End {end_text}")
    submit_text = get("Submit")
    submit = None if submit_text is None else _sacct_time(submit_text, "Submit", source, number)
    nodes = _node_list(node_text, {column: get(column) for column in ("NNodes", "AllocNodes")}, source, number)
    state = (get("State") or "").split()
    return SchedulerJob(
        job_id=job_id,
        name=get("JobName") or "",
        user=get("User") or "",
        state=state[0].rstrip("+") if state else "",  # "CANCELLED by 1234" -> CANCELLED; '+' marks truncation
        submit=submit,
        start=start,
        end=end,
        nodes=nodes,
        node_count=len(nodes),
        line=number,
        source=source,
    )


def _node_list(
    node_text: str, counts: Mapping[str, str | None], source: str, number: int, *, field: str = "NodeList", at: str = ""
) -> tuple[str, ...]:
    """A started job's NodeList expanded, checked against the node-count fields it comes with.

    ``field`` names the list in messages; ``at`` prefixes them (a JSON job's place in its file)."""
    if not node_text:
        what = "a NodeList" if field == "NodeList" else field
        raise SchedulerLogError(source, number, f"{at}expected {what} (hostlist expression like r256n[01-04]) for a started job, got an empty field")
    try:
        nodes = tuple(hostlist.expand_hostlist(node_text))
    except hostlist.BadHostlist as error:
        raise SchedulerLogError(
            source, number, f"{at}expected a hostlist expression like r256n[01-04,07],r257n01 in {field}, got {node_text!r} ({error})"
        ) from None
    if not nodes or any(not n or any(c.isspace() for c in n) for n in nodes):
        raise SchedulerLogError(source, number, f"{at}expected a hostlist expression like r256n[01-04,07],r257n01 in {field}, got {node_text!r}")
    for column, value in counts.items():
        if value is None or value == "":
            continue
        if not value.isdigit():
            raise SchedulerLogError(source, number, f"{at}expected a node count in {column}, got {value!r}")
        if int(value) != len(nodes):
            raise SchedulerLogError(
                source, number, f"{at}{column} is {value} but {field} {node_text!r} expands to {len(nodes)} distinct host(s); expected them equal"
            )
    return nodes


def _sacct_time(text: str, column: str, source: str, number: int) -> float:
    try:
        # sacct prints local wall-clock time without a zone; a naive datetime's timestamp() reads it
        # in the local zone the same way.
        return datetime.strptime(text, _TIME_FORMAT).timestamp()
    except ValueError:
        raise SchedulerLogError(
            source, number, f"expected {column} as YYYY-MM-DDTHH:MM:SS (or Unknown), got {text!r}"
        ) from None


# ------------------------------------------------------------------------------------------------
# sacct --json

# Before 22.05.8, sacct --json filled time.start with the job's eligible time (SchedMD bug 15644,
# fixed by "openapi/dbv0.0.38 - fix time/start field for job parser"); such dumps are refused.
_FIRST_GOOD_JSON = (22, 5, 8)


def read_sacct_json(path: str | Path) -> list[SchedulerJob]:
    """The started job allocations in a ``sacct --json`` dump (Slurm 22.05.8 and later layouts)."""
    return parse_sacct_json(_read_text(path), str(path))


def parse_sacct_json(text: str, source: str = "<text>") -> list[SchedulerJob]:
    """Parses ``sacct -a --json [-S ... -E ...]`` output: ``{"meta": ..., "errors": [...], "jobs": [...]}``.

    Each entry of ``jobs`` is one job allocation; its steps are nested in it (``steps``) and are not
    read. Both layouts are read: 22.05's (``state.current`` a string, ``array.task_id`` and
    ``het.job_offset`` plain integers or null) and 23.02 onwards' (those two as ``{"set", "infinite",
    "number"}``, and from 23.11 ``state.current`` a list such as ``["COMPLETED"]``). Times
    (``time.submission``, ``time.start``, ``time.end``) are POSIX seconds; a number given as a
    ``{"set", "infinite", "number"}`` object is read too. Skipped, not errors: jobs that never got
    nodes (start 0 or null, ``nodes`` ``None assigned``, ``allocation_nodes`` 0). ``end`` 0 or null
    means still running. Errors name the file and the job (``jobs[3] (job 1004)``)."""
    try:
        data = json.loads(text)
    except RecursionError:
        raise SchedulerLogError(source, 0, "expected `sacct --json` output, got JSON nested too deeply to read") from None
    except json.JSONDecodeError as error:
        raise SchedulerLogError(
            source, error.lineno, f"expected `sacct --json` output (a JSON object with a jobs list), got text that is not JSON: {error.msg} (column {error.colno})"
        ) from None
    except ValueError:  # Python's limit on integer digits
        raise SchedulerLogError(source, 0, f"a number of more than {sys.get_int_max_str_digits()} digits: "
                                "not `sacct --json` output") from None
    if not isinstance(data, dict) or not isinstance(data.get("jobs"), list):
        got = f"an object with keys {', '.join(map(repr, list(data)[:6]))}" if isinstance(data, dict) else f"a JSON {_json_kind(data)}"
        raise SchedulerLogError(source, 0, f"expected `sacct --json` output, a JSON object with a 'jobs' list, got {got}")
    errors = data.get("errors")
    if isinstance(errors, list) and errors:
        first = errors[0]
        said = first.get("description") or first.get("error") if isinstance(first, dict) else first
        raise SchedulerLogError(
            source, 0, f"sacct reported {len(errors)} error(s) with this dump (errors[0]: {said!r}); its jobs list may be incomplete"
        )
    version = _slurm_version(data.get("meta"))
    if version is not None and version < _FIRST_GOOD_JSON:
        raise SchedulerLogError(
            source,
            0,
            f"meta says Slurm {'.'.join(map(str, version))}: before 22.05.8 `sacct --json` wrote the eligible time as time.start "
            "(SchedMD bug 15644), so the start times are wrong; dump with `sacct -P` (read_sacct) or a newer sacct",
        )
    jobs: list[SchedulerJob] = []
    for index, entry in enumerate(data["jobs"]):
        job = _sacct_json_job(entry, index, source)
        if job is not None:
            jobs.append(job)
    return jobs


def _json_kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    return {dict: "object", list: "array", str: "string", int: "number", float: "number"}.get(type(value), type(value).__name__)


def _slurm_version(meta: object) -> tuple[int, int, int] | None:
    """meta.Slurm.version (22.05: integers) or meta.slurm.version (23.02+: strings), if readable."""
    if not isinstance(meta, dict):
        return None
    slurm = meta.get("slurm", meta.get("Slurm"))
    version = slurm.get("version") if isinstance(slurm, dict) else None
    if not isinstance(version, dict):
        return None
    try:
        major, minor, micro = (int(version[k]) for k in ("major", "minor", "micro"))
    except (KeyError, TypeError, ValueError):
        return None
    return major, minor, micro


class _NoVal:
    """Marks a number Slurm left unset (NO_VAL) or infinite."""


_UNSET = _NoVal()


def _json_int(value: object, what: str, at: str, source: str) -> int | _NoVal:
    """A JSON integer as Slurm dumps it: plain, null, or {"set", "infinite", "number"}."""
    if value is None:
        return _UNSET
    if isinstance(value, dict) and "number" in value:
        if value.get("infinite") is True or value.get("set") is False:
            return _UNSET
        value = value["number"]
    if value == "Infinity":  # the data_parser's "complex" mode
        return _UNSET
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        shown = json.dumps(value)
        raise SchedulerLogError(
            source, 0, f"{at}: expected {what} as an integer >= 0, null or {{\"set\", \"infinite\", \"number\"}}, got {shown[:60]}"
        )
    return value


def _json_time(time: dict[str, Any], key: str, at: str, source: str, *, required: bool) -> float | None:
    """time.<key> as POSIX seconds; None when 0 or unset (not started, still running)."""
    if key not in time:
        if required:
            raise SchedulerLogError(source, 0, f"{at}: expected time.{key} (POSIX seconds), but the job has none")
        return None
    value = _json_int(time[key], f"time.{key} (POSIX seconds)", at, source)
    return None if isinstance(value, _NoVal) or value == 0 else float(value)


def _sacct_json_job(entry: object, index: int, source: str) -> SchedulerJob | None:
    path = f"jobs[{index}]"
    if not isinstance(entry, dict):
        raise SchedulerLogError(source, 0, f"{path}: expected a job object, got a JSON {_json_kind(entry)}")
    raw_id = _json_int(entry.get("job_id"), "job_id", path, source)
    if isinstance(raw_id, _NoVal) or raw_id == 0:
        raise SchedulerLogError(source, 0, f"{path}: expected a job_id (an integer >= 1), got {json.dumps(entry.get('job_id'))}")
    at = f"{path} (job {raw_id})"
    job_id = _json_job_id(entry, raw_id, at, source)
    time = entry.get("time")
    if not isinstance(time, dict):
        raise SchedulerLogError(source, 0, f"{at}: expected a time object (start, end, submission), got {json.dumps(time)[:40]}")
    if "nodes" not in entry:
        raise SchedulerLogError(source, 0, f"{at}: expected nodes (a hostlist such as r256n[01-04]), but the job has none")
    start = _json_time(time, "start", at, source, required=True)
    end = _json_time(time, "end", at, source, required=True)
    node_text = entry["nodes"]
    if node_text is not None and not isinstance(node_text, str):
        raise SchedulerLogError(source, 0, f"{at}: expected nodes as a hostlist string, got {json.dumps(node_text)[:40]}")
    allocated = entry.get("allocation_nodes")
    count = None if allocated is None else _json_int(allocated, "allocation_nodes", at, source)
    if start is None or (node_text or "").startswith("None assigned") or count == 0:
        return None  # pending, or cancelled before it got nodes: no traffic
    if end is not None and end < start:
        raise SchedulerLogError(source, 0, f"{at}: expected time.end >= time.start, got start {start:.0f} and end {end:.0f}")
    submit = _json_time(time, "submission", at, source, required=False)
    counts = {"allocation_nodes": None if count is None or isinstance(count, _NoVal) else str(count)}
    nodes = _node_list(node_text or "", counts, source, 0, field="nodes", at=f"{at}: ")
    return SchedulerJob(
        job_id=job_id,
        name=_json_text(entry.get("name")),
        user=_json_text(entry.get("user")),
        state=_json_state(entry.get("state")),
        submit=submit,
        start=start,
        end=end,
        nodes=nodes,
        node_count=len(nodes),
        line=index + 1,
        source=source,
        json_path=path,
    )


def _json_job_id(entry: dict[str, Any], raw_id: int, at: str, source: str) -> str:
    """The JobID sacct prints: 1123_4 for an array task, 2005+1 for a het-job component."""
    array, het = entry.get("array"), entry.get("het")
    if isinstance(array, dict):
        array_id = _json_int(array.get("job_id"), "array.job_id", at, source)
        if not isinstance(array_id, _NoVal) and array_id:
            task = _json_int(array.get("task_id"), "array.task_id", at, source)
            if not isinstance(task, _NoVal):
                return f"{array_id}_{task}"
            if isinstance(array.get("task"), str) and array["task"]:
                return f"{array_id}_[{array['task']}]"  # a pending range, as sacct prints it
    if isinstance(het, dict):
        het_id = _json_int(het.get("job_id"), "het.job_id", at, source)
        if not isinstance(het_id, _NoVal) and het_id:
            offset = _json_int(het.get("job_offset"), "het.job_offset", at, source)
            if not isinstance(offset, _NoVal):
                return f"{het_id}+{offset}"
    return str(raw_id)


def _json_text(value: object) -> str:
    return value if isinstance(value, str) else ""


def _json_state(state: object) -> str:
    """state.current: "COMPLETED" (22.05, 23.02) or ["COMPLETED"] (23.11+; flags follow the base state)."""
    current = state.get("current") if isinstance(state, dict) else state
    if isinstance(current, list):
        current = current[0] if current else ""
    return current.split()[0] if isinstance(current, str) and current.split() else ""


# ------------------------------------------------------------------------------------------------
# Slurm jobcomp/filetxt

# The keys jobcomp_filetxt.c writes, in order; a value may hold spaces (Name, WorkDir), so a line
# is cut only where a space is followed by one of these keys and '='.
_JOBCOMP_KEYS = (
    "UserId", "GroupId", "Name", "JobState", "Partition", "TimeLimit", "StartTime", "EndTime", "NodeList",
    "NodeCnt", "ProcCnt", "WorkDir", "ReservationName", "Tres", "Account", "QOS", "WcKey", "Cluster",
    "SubmitTime", "EligibleTime", "ArrayJobId", "ArrayTaskId", "HetJobId", "HetJobOffset", "DerivedExitCode",
    "ExitCode",
)
_JOBCOMP_CUT = re.compile(r" (?=(?:" + "|".join(_JOBCOMP_KEYS) + ")=)")
_JOBCOMP_REQUIRED = ("StartTime", "EndTime", "NodeList")


def read_jobcomp(path: str | Path) -> list[SchedulerJob]:
    """The jobs of a Slurm ``jobcomp/filetxt`` log (``/var/log/slurm_jobcomp.log``)."""
    return parse_jobcomp(_read_text(path), str(path))


def parse_jobcomp(text: str, source: str = "<text>") -> list[SchedulerJob]:
    """Parses jobcomp/filetxt lines (``JobId=... UserId=alice(1001) ... NodeList=r[01-04] ...``).

    The plugin logs a job when it ends, so every job has an end. Skipped, not errors: blank lines
    and jobs that never got nodes (StartTime Unknown/None, NodeList ``(null)`` or ``None assigned``,
    NodeCnt 0)."""
    jobs: list[SchedulerJob] = []
    for number, raw in enumerate(text.split("\n"), start=1):
        line = raw.strip()
        if not line:
            continue
        if not line.startswith("JobId="):
            raise SchedulerLogError(source, number, f"expected a jobcomp line starting with JobId=, got {line[:40]!r}")
        fields: dict[str, str] = {}
        for part in _JOBCOMP_CUT.split(line):
            key, _, value = part.partition("=")
            fields[key] = value.strip()
        missing = [k for k in _JOBCOMP_REQUIRED if k not in fields]
        if missing:
            raise SchedulerLogError(source, number, f"expected {', '.join(missing)}=... on a jobcomp line (a line cut short?)")
        node_text, count = fields["NodeList"], fields.get("NodeCnt")
        # An empty NodeList is a job that got no nodes, unless NodeCnt says it got some: that
        # line is damaged, and _node_list names it (as sacct's reader does).
        never_ran = node_text == "(null)" or node_text.startswith("None assigned") or count == "0"
        if fields["StartTime"] in _NOT_SET or never_ran or (node_text == "" and not count):
            continue
        start = _sacct_time(fields["StartTime"], "StartTime", source, number)
        end = None if fields["EndTime"] in _NOT_SET else _sacct_time(fields["EndTime"], "EndTime", source, number)
        if end is not None and end < start:
            raise SchedulerLogError(source, number, f"expected EndTime >= StartTime, got {fields['StartTime']} and {fields['EndTime']}")
        submit_text = fields.get("SubmitTime")
        submit = None if submit_text in (None, *_NOT_SET) else _sacct_time(submit_text, "SubmitTime", source, number)
        nodes = _node_list(node_text, {"NodeCnt": count}, source, number)
        state = fields.get("JobState", "").split()
        jobs.append(SchedulerJob(
            job_id=fields["JobId"],
            name=fields.get("Name", ""),
            user=fields.get("UserId", "").split("(")[0],  # "alice(1001)" -> alice
            state=state[0] if state else "",
            submit=submit,
            start=start,
            end=end,
            nodes=nodes,
            node_count=len(nodes),
            line=number,
            source=source,
        ))
    return jobs


# ------------------------------------------------------------------------------------------------
# SWF

_SWF_FIELDS = 18
_SWF_STATUS = {
    -1: "unknown",
    0: "failed",
    1: "completed",
    2: "partial",
    3: "partial-completed",
    4: "partial-failed",
    5: "cancelled",
}
_SWF_LIMIT = re.compile(r"^;\s*(MaxProcs|MaxNodes)\s*:\s*(.*?)\s*$", re.IGNORECASE)


def read_swf(path: str | Path, procs_per_node: int = 1, *, assume_zero_wait: bool = False) -> list[SchedulerJob]:
    """The jobs of a Standard Workload Format log (Parallel Workloads Archive)."""
    return parse_swf(_read_text(path), str(path), procs_per_node, assume_zero_wait=assume_zero_wait)


def parse_swf(text: str, source: str = "<text>", procs_per_node: int = 1, *, assume_zero_wait: bool = False) -> list[SchedulerJob]:
    """Parses SWF (18 whitespace-separated numbers a line, ``;`` header comments, -1 unknown).

    start = submit + wait, end = start + run time; node_count = ceil(processors / procs_per_node),
    with allocated processors, else requested ones. Jobs whose submit, wait, run time or both
    processor counts are unknown are skipped; ``assume_zero_wait`` reads an unknown wait as 0
    (some archive logs record none). ``; MaxProcs:`` / ``; MaxNodes:`` are checked against."""
    if isinstance(procs_per_node, bool) or not isinstance(procs_per_node, int) or procs_per_node < 1:
        raise ValueError(f"procs_per_node must be an integer >= 1, got {procs_per_node!r}")
    limits: dict[str, int] = {}
    rows: list[tuple[int, list[float]]] = []
    for number, raw in enumerate(text.split("\n"), start=1):
        line = raw.strip()
        if not line:
            continue
        if line.startswith(";"):
            match = _SWF_LIMIT.match(line)
            if match:
                try:
                    limit = int(match[2])
                except ValueError:
                    raise SchedulerLogError(source, number, f"expected an integer after '; {match[1]}:', got {match[2]!r}") from None
                if limit > 0:  # -1: not recorded
                    limits[match[1].lower()] = limit
            continue
        parts = line.split()
        if len(parts) != _SWF_FIELDS:
            raise SchedulerLogError(source, number, f"expected {_SWF_FIELDS} whitespace-separated SWF fields, got {len(parts)}")
        values: list[float] = []
        for i, part in enumerate(parts, start=1):
            try:
                value = float(part)
            except ValueError:
                value = math.nan
            if not math.isfinite(value):
                raise SchedulerLogError(source, number, f"expected a number in SWF field {i}, got {part!r}")
            values.append(value)
        rows.append((number, values))

    jobs: list[SchedulerJob] = []
    for number, v in rows:
        job = _swf_row(v, limits, source, number, procs_per_node, assume_zero_wait)
        if job is not None:
            jobs.append(job)
    if rows and not jobs:
        raise SchedulerLogError(
            source,
            0,
            f"none of the {len(rows)} job(s) has a known submit time, wait time, run time and processor count"
            + ("" if assume_zero_wait else " (if the log records no wait times, read it assuming none: "
               "background.assume_zero_wait = true in a tail study, assume_zero_wait=True from Python)"),
        )
    return jobs


def _swf_row(v: list[float], limits: dict[str, int], source: str, number: int, procs_per_node: int, zero_wait: bool) -> SchedulerJob | None:
    def whole(i: int, what: str, unknown_ok: bool = True) -> int:
        value = v[i - 1]
        if value != int(value) or (value < 0 and not (unknown_ok and value == -1)):
            expected = "-1 or an integer >= 0" if unknown_ok else "an integer >= 0"
            raise SchedulerLogError(source, number, f"expected {what} (SWF field {i}) as {expected}, got {value:g}")
        return int(value)

    def seconds(i: int, what: str) -> float:
        value = v[i - 1]
        if value < 0 and value != -1:
            raise SchedulerLogError(source, number, f"expected {what} (SWF field {i}) as -1 or seconds >= 0, got {value:g}")
        return value

    job_number = whole(1, "the job number", unknown_ok=False)
    submit, wait, run = seconds(2, "the submit time"), seconds(3, "the wait time"), seconds(4, "the run time")
    allocated, requested = whole(5, "the allocated processors"), whole(8, "the requested processors")
    status = whole(11, "the status")
    user = whole(12, "the user id")
    if status not in _SWF_STATUS:
        raise SchedulerLogError(source, number, f"expected the status (SWF field 11) as one of {sorted(_SWF_STATUS)}, got {status}")
    procs, field_no = (allocated, 5) if allocated > 0 else (requested, 8)
    if "maxprocs" in limits and procs > limits["maxprocs"]:
        raise SchedulerLogError(source, number, f"SWF field {field_no} gives {procs} processors, more than the header's MaxProcs {limits['maxprocs']}")
    if wait == -1 and zero_wait:
        wait = 0.0
    if submit == -1 or wait == -1 or run == -1 or procs <= 0:
        return None  # cannot be placed in time or on hosts
    node_count = math.ceil(procs / procs_per_node)
    if "maxnodes" in limits and node_count > limits["maxnodes"]:
        raise SchedulerLogError(
            source,
            number,
            f"{procs} processors at {procs_per_node} per node need {node_count} nodes, more than the header's MaxNodes {limits['maxnodes']}",
        )
    start = submit + wait
    return SchedulerJob(
        job_id=str(job_number),
        name="",
        user="" if user == -1 else str(user),
        state=_SWF_STATUS[status],
        submit=submit,
        start=start,
        end=start + run,
        nodes=(),
        node_count=node_count,
        line=number,
        source=source,
    )


# A log beyond this (gzipped or not) is refused rather than read whole: a year of sacct on a large
# cluster is a few hundred MB, and a gzip bomb or a device would otherwise take every byte.
MAX_LOG_BYTES = 4 << 30


def _read_text(path: str | Path) -> str:
    p = Path(path)
    if not p.exists() or p.is_dir():
        raise SchedulerLogError(str(p), 0, "expected a file, got a folder" if p.is_dir() else "no such file")
    try:
        # Archives hand out their logs gzipped (the Parallel Workloads Archive's .swf.gz): read them
        # as they come, by their magic number, so a copy never has to be unpacked next to the project.
        data = read_bytes(p, MAX_LOG_BYTES, gunzip=True)
    except NotReadable as error:
        raise SchedulerLogError(str(p), 0, str(error)) from None
    except (EOFError, gzip.BadGzipFile, zlib.error) as error:  # cut short or damaged
        raise SchedulerLogError(str(p), 0, f"cannot read the gzip data: {error}") from None
    except OSError as error:
        raise SchedulerLogError(str(p), 0, f"cannot read: {error.strerror or error}") from None
    if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
        raise SchedulerLogError(str(p), 0, "UTF-16 text: expected UTF-8 (or ASCII), as sacct writes it; convert it "
                                "with iconv -f UTF-16 -t UTF-8")
    # "utf-8-sig": a byte-order mark (an editor's, Excel's) would otherwise hide the first header field.
    return data.decode("utf-8-sig", errors="replace")


# ------------------------------------------------------------------------------------------------
# Time windows


def running_at(jobs: Iterable[SchedulerJob], t: float) -> list[SchedulerJob]:
    """The jobs running at time t: start <= t < end (end None: still running)."""
    return [j for j in jobs if j.start <= t and (j.end is None or t < j.end)]


def concurrent_with(jobs: Iterable[SchedulerJob], start: float, end: float | None) -> list[SchedulerJob]:
    """The jobs overlapping [start, end): Start < end and End > start (None: still running)."""
    return [j for j in jobs if (end is None or j.start < end) and (j.end is None or j.end > start)]


def _overlap(a: SchedulerJob, b: SchedulerJob) -> bool:
    return (a.end is None or b.start < a.end) and (b.end is None or a.start < b.end) and a.start != a.end and b.start != b.end


# ------------------------------------------------------------------------------------------------
# Snapshot on the fabric

_PLACEMENTS = ("random", "contiguous")


def map_snapshot(
    jobs: Sequence[SchedulerJob],
    host_names: Sequence[str],
    *,
    rng: np.random.Generator | int | None = None,
    placement: str = "random",
) -> list[tuple[SchedulerJob, tuple[int, ...]]]:
    """Each job with the fabric host indices it holds, in the order given.

    Jobs with node names (sacct) map by name (``host_names[i]`` is host i). Jobs without (SWF) are
    placed, in start order, on hosts no time-overlapping job holds: ``"random"`` draws them with
    ``rng`` (a numpy Generator or a seed), ``"contiguous"`` takes the lowest free block."""
    if placement not in _PLACEMENTS:
        raise ValueError(f"unknown placement {placement!r}; expected one of {', '.join(_PLACEMENTS)}")
    index: dict[str, int] = {}
    for i, name in enumerate(host_names):
        if name in index:
            raise ValueError(f"host_names lists {name!r} twice (positions {index[name]} and {i})")
        index[name] = i

    held: dict[int, tuple[int, ...]] = {}  # position in jobs -> host indices
    claims: dict[int, list[int]] = {}  # host -> positions of jobs holding it
    for k, job in enumerate(jobs):
        if not job.nodes:
            continue
        named: list[int] = []
        for name in job.nodes:
            if name not in index:
                raise _job_error(job, f"job {job.job_id} runs on host {name!r}, which is not in the fabric's host list")
            h = index[name]
            for other in claims.get(h, ()):
                if _overlap(job, jobs[other]):
                    o = jobs[other]
                    raise _job_error(job, f"job {job.job_id} and job {o.job_id} ({_place(o)}) both hold host {name!r} at the same time")
            claims.setdefault(h, []).append(k)
            named.append(h)
        held[k] = tuple(named)

    to_place = sorted((k for k, j in enumerate(jobs) if not j.nodes and j.node_count > 0), key=lambda k: (jobs[k].start, jobs[k].line, k))
    generator: np.random.Generator | None = None
    if to_place and placement == "random":
        if rng is None:
            raise ValueError("placing jobs without node names at random needs rng= (a seed or a numpy Generator), so the snapshot can be repeated")
        generator = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    n_hosts = len(host_names)
    for k in to_place:
        job = jobs[k]
        busy = np.zeros(n_hosts, dtype=bool)
        for other, hosts in held.items():
            if _overlap(job, jobs[other]):
                busy[list(hosts)] = True
        free = np.flatnonzero(~busy)
        need = job.node_count
        if placement == "random":
            if len(free) < need:
                raise _job_error(job, f"job {job.job_id} needs {need} hosts but only {len(free)} of {n_hosts} are free")
            assert generator is not None
            chosen = np.sort(generator.choice(free, size=need, replace=False))
        else:
            block = _lowest_block(busy, need)
            if block is None:
                raise _job_error(job, f"job {job.job_id} needs {need} contiguous hosts; no free block that long among {n_hosts} hosts ({len(free)} free)")
            chosen = block
        held[k] = tuple(int(h) for h in chosen)
    return [(job, held.get(k, ())) for k, job in enumerate(jobs)]


def _lowest_block(busy: np.ndarray, need: int) -> np.ndarray | None:
    run = 0
    for h, taken in enumerate(busy):
        run = 0 if taken else run + 1
        if run == need:
            return np.arange(h - need + 1, h + 1)
    return None


# ------------------------------------------------------------------------------------------------
# Background-traffic heuristic


@dataclass(frozen=True)
class BackgroundCounts:
    """What a heuristic sees: the target, the background jobs and the counts b is made of.

    "Communicating" jobs are those ``background_traffic`` was told contribute to communication
    (by default the jobs on 2 or more hosts). "With duplicates" counts a host once per job that
    holds it (Marconi100 shares nodes between jobs); "unique" counts it once.

    Attributes:
        target: the target job's host indices.
        background: the communicating background jobs, as host sets.
        every_job: all background jobs, communicating or not.
        group_of_host: host index -> group, as given.
        target_groups: the groups the target's hosts are in.
        nc_unique: Nc of the slides, distinct hosts of the communicating jobs.
        nt: Nt, hosts in the fabric (the length of ``group_of_host``).
        nc_with_duplicates: N'c, the host counts of the communicating jobs summed.
        na_with_duplicates: Na, the host counts of all background jobs summed.
        nc_in_target_groups: hosts of ``nc_unique`` in the target's groups (groups-touched).
        na: all hosts in the target's groups (the groups-touched denominator, not the slides' Na).
    """

    target: frozenset[int]
    background: tuple[frozenset[int], ...]
    every_job: tuple[frozenset[int], ...]
    group_of_host: Mapping[int, int] | Sequence[int]
    target_groups: frozenset[int]
    nc_unique: int
    nt: int
    nc_with_duplicates: int
    na_with_duplicates: int
    nc_in_target_groups: int
    na: int

    @property
    def nc(self) -> int:
        """Alias of ``nc_unique`` (the name definitions written before it used)."""
        return self.nc_unique


Heuristic = Callable[[BackgroundCounts], float]


def _salimi_beni(c: BackgroundCounts) -> float:
    """The published definition (Salimi Beni & Cosenza, Bench 2022 talk): b = Nc/Nt * N'c/Na * 100
    with Nc the unique nodes contributing to communication, Nt the cluster's nodes, N'c the nodes
    contributing to communication counted with duplication, Na all allocated running nodes with
    duplication. It does not depend on where the target sits."""
    if c.na_with_duplicates == 0:
        return 0.0
    return (c.nc_unique / c.nt) * (c.nc_with_duplicates / c.na_with_duplicates) * 100.0


def _groups_touched(c: BackgroundCounts) -> float:
    """Our locality-aware variant: the same product with the second factor restricted to the
    groups the target touches (communicating hosts there over all hosts there)."""
    return (c.nc_unique / c.nt) * (c.nc_in_target_groups / c.na) * 100.0


def _shared_groups(c: BackgroundCounts) -> float:
    return c.nc_in_target_groups / c.na * 100.0


#: Definitions of b by name; add your own with ``register_heuristic``.
HEURISTICS: dict[str, Heuristic] = {
    "salimi-beni": _salimi_beni,  # the published symbols; communicating = jobs of 2+ nodes by default
    "groups-touched": _groups_touched,  # (Nc/Nt) * (communicating hosts in our groups / hosts there) * 100
    "shared-groups": _shared_groups,  # only the communicating load in our groups, * 100
}


def register_heuristic(name: str, fn: Heuristic, *, replace: bool = False) -> None:
    """Adds a definition of b: ``fn(BackgroundCounts) -> float``."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"a heuristic needs a non-empty name, got {name!r}")
    if not callable(fn):
        raise TypeError(f"heuristic {name!r} must be callable, got {type(fn).__name__}")
    if name in HEURISTICS and not replace:
        raise ValueError(f"heuristic {name!r} already exists; pass replace=True to redefine it")
    HEURISTICS[name] = fn


def background_traffic(
    target_hosts: Iterable[int],
    background_hosts: Sequence[Iterable[int]],
    group_of_host: Mapping[int, int] | Sequence[int],
    definition: str = "salimi-beni",
    intensive: Callable[[int], bool] | Sequence[bool] | None = None,
) -> float:
    """The background-traffic estimate b for a job on ``target_hosts``.

    ``background_hosts``: host indices of each other running job. ``group_of_host``: host index ->
    group (Dragonfly+ group, or pod/leaf of a fat tree); its length is the fabric's host count.
    ``intensive``: which background jobs contribute to communication, as a predicate on the job's
    position in ``background_hosts`` or a mask of the same length. None: jobs on 2 or more hosts
    (their MPI traffic crosses the network; a one-node job's stays inside the node). The same
    choice applies to every definition. ``definition``: a name in ``HEURISTICS``; the default,
    "salimi-beni", is the published b and does not depend on where the target sits. The target
    itself is not background: it is in none of the counts (Na included), only in the group ones.
    With no background job (Na = 0) b is 0."""
    if definition not in HEURISTICS:
        raise ValueError(f"unknown background-traffic definition {definition!r}; known: {', '.join(sorted(HEURISTICS))}")
    nt = len(group_of_host)

    def group(h: int) -> int:
        try:
            return group_of_host[h]
        except (KeyError, IndexError, TypeError):
            raise ValueError(f"host {h!r} has no group in group_of_host ({nt} hosts)") from None

    target = frozenset(target_hosts)
    if not target:
        raise ValueError("target_hosts is empty; b needs the target job's hosts")
    background = [frozenset(hosts) for hosts in background_hosts]
    if intensive is None:
        counted = [b for b in background if len(b) >= 2]
    elif callable(intensive):
        counted = [b for i, b in enumerate(background) if intensive(i)]
    else:
        if len(intensive) != len(background):
            raise ValueError(f"intensive has {len(intensive)} entries but there are {len(background)} background jobs")
        counted = [b for b, keep in zip(background, intensive) if keep]

    target_groups = frozenset(group(h) for h in target)
    foreign = frozenset().union(*counted) if counted else frozenset()
    for h in sorted(frozenset().union(*background)) if background else ():
        group(h)  # every background host must be on the fabric, counted or not
    hosts = group_of_host.keys() if isinstance(group_of_host, Mapping) else range(nt)
    counts = BackgroundCounts(
        target=target,
        background=tuple(counted),
        every_job=tuple(background),
        group_of_host=group_of_host,
        target_groups=target_groups,
        nc_unique=len(foreign),
        nt=nt,
        nc_with_duplicates=sum(len(b) for b in counted),
        na_with_duplicates=sum(len(b) for b in background),
        nc_in_target_groups=sum(1 for h in foreign if group(h) in target_groups),
        na=sum(1 for h in hosts if group_of_host[h] in target_groups),
    )
    return float(HEURISTICS[definition](counts))
