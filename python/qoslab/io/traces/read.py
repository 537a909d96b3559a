"""``read_trace``: the entry point. Picks the format and hands over to the OTF2 or DUMPI reader."""

from __future__ import annotations

import math
import os
from fractions import Fraction
from pathlib import Path
from typing import NoReturn

from qoslab.errors import ScenarioError
from qoslab.io.traces.dumpi import DUMPI_FILE, glob_escape, read_dumpi
from qoslab.io.traces.otf2 import read_otf2
from qoslab.io.traces.pack import Fail
from qoslab.io.traces.program import PackedProgram

FORMATS = ("otf2", "dumpi")


def _sibling_key(key: str, name: str) -> str:
    if key.endswith(".path"):
        return key[: -len("path")] + name
    return key


def read_trace(
    path: str | os.PathLike[str],
    format: str | None = None,
    cpu_speedup: float = 1.0,
    *,
    key: str = "",
    source: str | None = None,
    base_dir: str | os.PathLike[str] | None = None,
    ranks: int | None = None,
) -> PackedProgram:
    """Reads an MPI trace into packed rank programs.

    ``path``: an OTF2 anchor file (``traces.otf2``) or the folder holding it; or DUMPI ASCII: one
    rank's file (``prefix-0000.txt``), the prefix (``dir/prefix``), the ``.meta`` file, or the
    folder. ``format``: ``"otf2"``, ``"dumpi"`` or None (inferred from the name).
    ``cpu_speedup``: compute gaps are divided by it. ``key``: the scenario key of ``path``
    (``"jobs[0].workload.path"``) for error messages; ``source``: the scenario file, passed on to
    :class:`ScenarioError`. ``base_dir``: a relative ``path`` is taken from there. ``ranks``: the
    job's rank count, checked against the trace's when given.
    """

    def fail_at(k: str, message: str) -> NoReturn:
        raise ScenarioError([(k, message)], source)

    def fail(message: str) -> NoReturn:
        fail_at(key, message)

    p = Path(path)
    if base_dir is not None and not p.is_absolute():
        p = Path(base_dir) / p
    try:
        speed = float(cpu_speedup)
    except (TypeError, ValueError):
        speed = float("nan")
    if not (math.isfinite(speed) and speed > 0):
        fail_at(_sibling_key(key, "cpu_speedup"), f"expected a positive number, got {cpu_speedup!r}")
    if format is not None and format not in FORMATS:
        fail_at(_sibling_key(key, "format"), f'expected "otf2" or "dumpi", got {format!r}')
    fmt = format or _infer_format(p, fail)
    if fmt == "otf2":
        program = read_otf2(p, Fraction(speed), fail)
    else:
        program = read_dumpi(p, Fraction(speed), fail)
    if ranks is not None and program.ranks != ranks:
        fail(f"{p}: the trace has {program.ranks} ranks but the job has {ranks}")
    return program


def _infer_format(p: Path, fail: Fail) -> str:
    name = p.name.lower()
    if name.endswith(".otf2"):
        return "otf2"
    if name.endswith((".txt", ".meta")):
        return "dumpi"
    if name.endswith(".bin"):
        return "dumpi"  # whose reader says that a binary DUMPI file is not read (given format = "dumpi" too)
    if name.endswith((".def", ".evt")):
        fail(f"{p}: give the OTF2 anchor file (the .otf2 file next to the traces folder), not a .def/.evt file")
    if p.is_dir():
        anchors = sorted(p.glob("*.otf2"))
        if anchors:
            return "otf2"
        if any(DUMPI_FILE.match(f.name) for f in p.glob("*.txt")) or any(p.glob("*.bin")):
            return "dumpi"  # .bin files alone: the DUMPI reader says to convert them
        fail(f"{p}: the folder holds no OTF2 anchor file (*.otf2) and no dumpi2ascii files (prefix-NNNN.txt)")
    ranks = (f"{glob_escape(p.name)}-*.{suffix}" for suffix in ("txt", "bin"))  # .bin: its reader says to convert
    if not p.exists() and p.parent.is_dir() and any(any(p.parent.glob(g)) for g in ranks):
        return "dumpi"  # a DUMPI prefix
    if not p.exists():
        fail(f"{p}: no such file or folder")
    fail(f'{p}: cannot tell the trace format from the name; set format = "otf2" or "dumpi"')
