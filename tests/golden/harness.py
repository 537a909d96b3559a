"""The golden net: what each stored scenario produces, and how it differs from what is stored.

Every folder of tests/golden holding a `scenario.toml` is one golden scenario. Its stored outputs
are the engine config (`engine.json`, plus `engine_traces.json` for trace replay), the summary
(`summary.json`, without wall-clock time and version), the link table (`links.csv`) and any other
table the run writes (`ranks.csv`, `interference.csv`, `port_counters.csv` and `.txt`,
`messages.csv`). tests/test_golden.py compares them exactly; regenerate.py rewrites them.
See docs/design/golden.md.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from qoslab import Scenario
from qoslab.errors import Deadlock
from qoslab.simulate import simulate, trace_programs

GOLDEN = Path(__file__).resolve().parent
# Differ between identical runs or builds: never golden.
VOLATILE_KEYS = ("wall_seconds", "qoslab_version")
# Every file a scenario's outputs may hold; a stored one the run no longer writes is a difference.
OUTPUT_FILES = ("engine.json", "engine_traces.json", "summary.json", "links.csv", "ranks.csv", "interference.csv",
                "port_counters.csv", "port_counters.txt", "messages.csv")
TRACE_PARTS = ("offsets", "words", "comm_offsets", "comm_members")


def names() -> list[str]:
    return sorted(p.parent.name for p in GOLDEN.glob("*/scenario.toml"))


def produce(name: str, overrides: list[str] | None = None) -> dict[str, str]:
    """Runs one golden scenario from its TOML (with `--set`-style overrides, for tests of the net
    itself); returns {file name: text} of its outputs."""
    folder = GOLDEN / name
    scenario = Scenario.from_toml(folder / "scenario.toml")
    if overrides:
        scenario = scenario.with_overrides(overrides)
    files = {"engine.json": dumps(scenario.to_engine_config())}
    traces, _ = trace_programs(scenario)
    if traces:
        files["engine_traces.json"] = dumps({str(job): unpack_trace(arrays) for job, arrays in sorted(traces.items())})
    try:
        result = simulate(scenario)
    except Deadlock as deadlock:  # a golden outcome like any other (status "deadlock")
        result = deadlock.result
    files["summary.json"] = dumps(stable_summary(result.summary, folder))
    files["links.csv"] = table_csv(result.links)
    for label, table in (("ranks", result.ranks), ("interference", result.interference),
                         ("port_counters", result.port_counters), ("messages", result.messages)):
        if table is not None:
            files[f"{label}.csv"] = table_csv(table)
    if result.port_counters is not None:
        from qoslab.counters import perfquery_text

        files["port_counters.txt"] = perfquery_text(result.port_counters)
    return files


def stored(name: str) -> dict[str, str]:
    folder = GOLDEN / name
    return {f: (folder / f).read_text() for f in OUTPUT_FILES if (folder / f).exists()}


def write(name: str, files: dict[str, str]) -> None:
    folder = GOLDEN / name
    for f in OUTPUT_FILES:
        path = folder / f
        if f in files:
            path.write_text(files[f])
        elif path.exists():
            path.unlink()


def stable_summary(summary: dict[str, Any], folder: Path) -> dict[str, Any]:
    """The summary without what changes between identical runs, and with file paths relative to
    the scenario's folder (the scenario stores them absolute), so any checkout compares equal."""
    s = {k: v for k, v in summary.items() if k not in VOLATILE_KEYS}
    prefix = str(folder) + "/"

    def relative(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: relative(v) for k, v in value.items()}
        if isinstance(value, list):
            return [relative(v) for v in value]
        if isinstance(value, str) and value.startswith(prefix):
            return value[len(prefix):]
        return value

    return relative(s)


def unpack_trace(arrays: tuple[bytes, ...]) -> dict[str, list[int]]:
    """The packed arrays the engine gets, as lists of u64 (empty communicator table if none)."""
    parts = [np.frombuffer(a, dtype="<u8").tolist() for a in arrays]
    parts += [[]] * (len(TRACE_PARTS) - len(parts))
    return dict(zip(TRACE_PARTS, parts, strict=True))


def dumps(value: Any) -> str:
    """JSON with sorted keys, one line per key and lists of scalars on one line: small diffs."""
    return _dump(value, 0) + "\n"


def _dump(value: Any, depth: int) -> str:
    pad, inner = " " * depth, " " * (depth + 1)
    if isinstance(value, dict) and value:
        items = [f"{inner}{json.dumps(k)}: {_dump(v, depth + 1)}" for k, v in sorted(value.items())]
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(value, list) and any(isinstance(v, dict | list) for v in value):
        return "[\n" + ",\n".join(inner + _dump(v, depth + 1) for v in value) + "\n" + pad + "]"
    return json.dumps(value)


def table_csv(table: pa.Table) -> str:
    """CSV with Python's float repr (shortest round-trip), so equal text means equal values."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(table.column_names)
    columns = [table.column(c).to_pylist() for c in table.column_names]
    for row in zip(*columns, strict=True):
        writer.writerow(["" if v is None else repr(v) if isinstance(v, float) else v for v in row])
    return out.getvalue()


# -- differences ---------------------------------------------------------------------------------

MAX_SHOWN = 12


def differences(old: dict[str, str], new: dict[str, str]) -> list[str]:
    """What differs between stored and produced outputs, one line per field or column."""
    lines = []
    for f in OUTPUT_FILES:
        if f not in old and f not in new:
            continue
        if f not in new:
            lines.append(f"{f}: stored, but the run no longer writes it")
        elif f not in old:
            lines.append(f"{f}: new output, not stored")
        elif old[f] != new[f]:
            if f.endswith(".json"):
                found = json_differences(json.loads(old[f]), json.loads(new[f]))
            elif f.endswith(".csv"):
                found = csv_differences(old[f], new[f])
            else:
                found = text_differences(old[f], new[f])
            lines += [f"{f}: {d}" for d in found] or [f"{f}: text differs"]
    return lines


def json_differences(old: Any, new: Any, path: str = "") -> list[str]:
    if isinstance(old, dict) and isinstance(new, dict):
        out = []
        for k in sorted(set(old) | set(new)):
            p = f"{path}.{k}" if path else k
            if k not in new:
                out.append(f"{p}: removed (was {_short(old[k])})")
            elif k not in old:
                out.append(f"{p}: added ({_short(new[k])})")
            else:
                out += json_differences(old[k], new[k], p)
        return out
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        return [d for i, (a, b) in enumerate(zip(old, new, strict=True)) for d in json_differences(a, b, f"{path}[{i}]")]
    # Types matter: 1 and 1.0 are the same number but not the same output.
    if old != new or type(old) is not type(new):
        return [f"{path}: {_short(old)} -> {_short(new)}"]
    return []


def csv_differences(old: str, new: str) -> list[str]:
    a, b = list(csv.reader(io.StringIO(old))), list(csv.reader(io.StringIO(new)))
    if not a or not b or a[0] != b[0]:
        return [f"columns {a[0] if a else []} -> {b[0] if b else []}"]
    header, a, b = a[0], a[1:], b[1:]
    out = [f"{len(a)} rows -> {len(b)} rows"] if len(a) != len(b) else []
    for c, column in enumerate(header):
        changed = [i for i, (x, y) in enumerate(zip(a, b)) if x[c] != y[c]]
        if changed:
            i = changed[0]
            out.append(f"column {column}: {len(changed)} rows differ (row {i + 1}: {a[i][c]} -> {b[i][c]})")
    return out


def text_differences(old: str, new: str) -> list[str]:
    a, b = old.splitlines(), new.splitlines()
    out = [f"line {i + 1}: {x!r} -> {y!r}" for i, (x, y) in enumerate(zip(a, b)) if x != y]
    if len(a) != len(b):
        out.append(f"{len(a)} lines -> {len(b)} lines")
    return out


def _short(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= 80 else text[:77] + "..."
