"""MPI traces -> the engine's packed rank programs.

Two inputs are read:

* **OTF2** (the ``traces.otf2`` anchor file Score-P writes), through the ``otf2`` package;
* **DUMPI ASCII**: the text ``dumpi2ascii`` prints, one file per rank (``prefix-0000.txt``, ...).

Both end up in a :class:`PackedProgram`: per rank a stream of ops of four u64 words
``[code, a, b, c]`` (the codes of ``crates/qoslab-engine/src/mpi/program.rs``, module ``packed``),
``offsets`` (``ranks + 1`` values) saying where each rank's ops start, and the members of the
communicators its collectives run on. See docs/traces.md for how MPI calls map to ops and what is
approximated or skipped.

The modules, one job each:

* ``read``: :func:`read_trace`, the entry point (format, paths, options);
* ``otf2``, ``dumpi``: the two readers, each filling one :class:`~.program.RankProgram` per rank;
* ``communicators``: who is in each communicator (DUMPI's are rebuilt from the calls that made
  them, across ranks);
* ``pack``: cross-rank checks (collectives matched per communicator, iteration markers) and the
  packed arrays;
* ``program``: the packed form and one rank's program while it is read;
* ``calls``: which MPI calls carry no traffic.

Errors in the user's input (missing file, unknown format, malformed record, communicators that
cannot be rebuilt, a trace the engine cannot replay) raise :class:`qoslab.errors.ScenarioError`
naming the file and the line or event; unsupported MPI calls are skipped and counted in
``PackedProgram.skipped``.
"""

from qoslab.io.traces.dumpi import read_dumpi_rank
from qoslab.io.traces.program import (
    ANY,
    COLLECTIVE_KINDS,
    TAG_LIMIT,
    Code,
    PackedProgram,
)
from qoslab.io.traces.read import FORMATS, read_trace

__all__ = [
    "ANY",
    "COLLECTIVE_KINDS",
    "FORMATS",
    "TAG_LIMIT",
    "Code",
    "PackedProgram",
    "read_dumpi_rank",
    "read_trace",
]
