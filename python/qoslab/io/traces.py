"""MPI traces -> the engine's packed rank programs.

Two inputs are read:

* **OTF2** (the ``traces.otf2`` anchor file Score-P writes), through the ``otf2`` package;
* **DUMPI ASCII**: the text ``dumpi2ascii`` prints, one file per rank (``prefix-0000.txt``, ...).

Both end up in a :class:`PackedProgram`: per rank a stream of ops of four u64 words
``[code, a, b, c]`` (the codes of ``crates/qoslab-engine/src/mpi/program.rs``, module ``packed``),
and ``offsets`` (``ranks + 1`` values) saying where each rank's ops start. See docs/traces.md for
how MPI calls map to ops and what is approximated or skipped.

Errors in the user's input (missing file, unknown format, malformed record, a trace the engine
cannot replay) raise :class:`qoslab.errors.ScenarioError` naming the file and the line or event;
unsupported MPI calls are skipped and counted in ``PackedProgram.skipped``.
"""

from __future__ import annotations

import math
import os
import re
from collections import Counter
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from qoslab.errors import ScenarioError

__all__ = [
    "ANY",
    "COLLECTIVE_KINDS",
    "Code",
    "PackedProgram",
    "read_dumpi_rank",
    "read_trace",
]

# ---------------------------------------------------------------------------------------------
# The packed form (mirror of crates/qoslab-engine/src/mpi/program.rs, module `packed`)
# ---------------------------------------------------------------------------------------------


class Code:
    COMPUTE = 0  # a = picoseconds
    ISEND = 1  # a = peer, b = bytes, c = tag
    IRECV = 2  # a = peer or ANY, c = tag or ANY
    PUT = 3  # a = peer, b = bytes
    GET = 4  # a = peer, b = bytes
    WAITALL = 5
    WAIT = 6  # a = request number
    COLLECTIVE = 7  # a = kind, b = bytes, c = 0 (world)
    ITERATION_END = 8


ANY = 0xFFFFFFFF  # MPI_ANY_SOURCE / MPI_ANY_TAG in IRECV
TAG_LIMIT = 1 << 31  # tags at or above are reserved for the engine's collectives

COLLECTIVE_KINDS = {"barrier": 0, "bcast": 1, "reduce": 2, "allreduce": 3, "alltoall": 4, "allgather": 5}
_KIND_NAMES = {v: k for k, v in COLLECTIVE_KINDS.items()}

FORMATS = ("otf2", "dumpi")


@dataclass
class PackedProgram:
    """A trace's rank programs in the engine's packed form.

    ``offsets``: ``ranks + 1`` little-endian u64; rank r's ops are op indices
    ``offsets[r] .. offsets[r + 1]``. ``words``: 4 little-endian u64 per op ``[code, a, b, c]``.
    ``skipped``: MPI calls the reader could not map, by name, with their count over all ranks;
    ``approximated``: calls replayed as a close supported op (e.g. ``MPI_Alltoallv`` as an
    alltoall of the mean block), by name and count.
    """

    ranks: int
    offsets: np.ndarray
    words: np.ndarray
    format: str
    path: str
    iterations: int = 1
    skipped: dict[str, int] = field(default_factory=dict)
    approximated: dict[str, int] = field(default_factory=dict)

    @property
    def ops_per_rank(self) -> np.ndarray:
        return np.diff(self.offsets).astype(np.int64)

    @property
    def total_ops(self) -> int:
        return int(self.offsets[-1])

    def rank_ops(self, rank: int) -> np.ndarray:
        """Rank ``rank``'s ops as an ``(n, 4)`` array of ``[code, a, b, c]``."""
        a, b = int(self.offsets[rank]), int(self.offsets[rank + 1])
        return self.words[4 * a : 4 * b].reshape(-1, 4)

    def op_tuples(self, rank: int) -> list[tuple[int, int, int, int]]:
        return [tuple(int(v) for v in row) for row in self.rank_ops(rank)]  # type: ignore[misc]

    def summary(self) -> dict[str, Any]:
        """Counts over all ranks: messages and bytes sent, collectives by kind, compute time."""
        ops = self.words.reshape(-1, 4)
        codes = ops[:, 0]
        sends = ops[codes == Code.ISEND]
        colls = ops[codes == Code.COLLECTIVE]
        return {
            "ranks": self.ranks,
            "iterations": self.iterations,
            "ops": int(len(ops)),
            "messages": int(len(sends)),
            "message_bytes": int(sends[:, 2].sum()) if len(sends) else 0,
            "receives": int((codes == Code.IRECV).sum()),
            "collectives": {_KIND_NAMES[int(k)]: int(n) for k, n in zip(*np.unique(colls[:, 1], return_counts=True))}
            if len(colls)
            else {},
            "compute_ps": int(ops[codes == Code.COMPUTE][:, 1].sum()),
        }

    @property
    def warnings(self) -> list[str]:
        out = [f"{name} skipped ({n} call{'s' if n != 1 else ''})" for name, n in sorted(self.skipped.items())]
        out += [f"{name} approximated ({n} call{'s' if n != 1 else ''})" for name, n in sorted(self.approximated.items())]
        return out


# ---------------------------------------------------------------------------------------------
# Building one rank's program
# ---------------------------------------------------------------------------------------------


class _Request:
    """A request as issued; its number is assigned at the end, once dropped requests are known."""

    __slots__ = ("number", "dropped", "op")

    def __init__(self) -> None:
        self.number = -1
        self.dropped = False
        self.op: list[Any] | None = None


class _Rank:
    """One rank's ops while reading; requests are objects until `finish` numbers them."""

    def __init__(self, ps_per_tick: Fraction):
        self.ops: list[list[Any]] = []
        self.ps_per_tick = ps_per_tick
        self.pending_ticks = 0  # compute not yet emitted (merged across skipped calls)
        self.collectives: list[tuple[int, int, str]] = []  # (kind, bytes estimate, where)

    def gap(self, ticks: int) -> None:
        if ticks > 0:
            self.pending_ticks += ticks

    def _flush(self) -> None:
        if self.pending_ticks:
            ps = round(self.pending_ticks * self.ps_per_tick)
            self.pending_ticks = 0
            if ps > 0:
                self.ops.append([Code.COMPUTE, ps, 0, 0])

    def isend(self, peer: int, nbytes: int, tag: int) -> _Request:
        self._flush()
        req = _Request()
        req.op = [Code.ISEND, peer, nbytes, tag, req]
        self.ops.append(req.op)
        return req

    def irecv(self, peer: int | None, tag: int | None) -> _Request:
        """`peer is None`: not known yet (OTF2 fills it in when the receive completes)."""
        self._flush()
        req = _Request()
        req.op = [Code.IRECV, peer, 0, tag, req]
        self.ops.append(req.op)
        return req

    def null_request(self) -> _Request:
        """A request that carries no traffic (MPI_PROC_NULL): waits on it vanish."""
        req = _Request()
        req.dropped = True
        return req

    def wait(self, req: _Request) -> None:
        if req.dropped:
            return
        self._flush()
        self.ops.append([Code.WAIT, req, 0, 0])

    def collective(self, kind: int, nbytes: int, where: str) -> None:
        self._flush()
        self.ops.append([Code.COLLECTIVE, kind, len(self.collectives), 0])
        self.collectives.append((kind, max(0, int(nbytes)), where))

    def iteration_end(self) -> None:
        self._flush()
        self.ops.append([Code.ITERATION_END, 0, 0, 0])

    def finish(self, coll_bytes: list[int]) -> list[tuple[int, int, int, int]]:
        """Numbers the requests that survive, resolves waits and collective sizes."""
        self.pending_ticks = 0  # time after the last MPI call is not part of the program
        out: list[tuple[int, int, int, int]] = []
        next_number = 0
        for op in self.ops:
            code = op[0]
            if code in (Code.ISEND, Code.IRECV):
                req = op[4]
                if req.dropped or op[1] is None:
                    req.dropped = True
                    continue
                req.number = next_number
                next_number += 1
                out.append((code, op[1], op[2], op[3]))
            elif code == Code.WAIT:
                req = op[1]
                if req.dropped or req.number < 0:
                    continue
                out.append((Code.WAIT, req.number, 0, 0))
            elif code == Code.COLLECTIVE:
                out.append((Code.COLLECTIVE, op[1], coll_bytes[op[2]], 0))
            else:
                out.append((code, op[1], op[2], op[3]))
        return out


def _assemble(
    ranks: list[_Rank],
    fmt: str,
    path: str,
    skipped: Counter,
    approximated: Counter,
    fail: Any,
) -> PackedProgram:
    """Cross-rank checks (collectives, iteration markers), then the packed arrays."""
    n = len(ranks)
    # Collectives: the k-th collective of every rank is the same call (we replay them all on the
    # whole job); its size is the largest any rank reports, so every rank agrees on it.
    counts = [len(r.collectives) for r in ranks]
    if len(set(counts)) > 1:
        r = max(range(n), key=lambda i: counts[i] != counts[0])
        fail(
            f"rank {r} calls {counts[r]} collectives but rank 0 calls {counts[0]}: the trace cannot be "
            "replayed (collectives on sub-communicators are replayed as whole-job collectives, which "
            "needs every rank to take part in each)"
        )
    coll_bytes: list[int] = []
    for k in range(counts[0] if counts else 0):
        kinds = {r.collectives[k][0] for r in ranks}
        if len(kinds) > 1:
            first = ranks[0].collectives[k]
            other = next(i for i in range(n) if ranks[i].collectives[k][0] != first[0])
            fail(
                f"collective #{k} is {_KIND_NAMES[first[0]]} on rank 0 ({first[2]}) but "
                f"{_KIND_NAMES[ranks[other].collectives[k][0]]} on rank {other} ({ranks[other].collectives[k][2]}): "
                "the ranks do not call the same collectives in the same order (collectives on "
                "sub-communicators cannot be replayed as whole-job collectives here)"
            )
        coll_bytes.append(max(r.collectives[k][1] for r in ranks))
    programs = [r.finish(coll_bytes) for r in ranks]
    markers = [sum(1 for op in p if op[0] == Code.ITERATION_END) for p in programs]
    if len(set(markers)) > 1:
        r = next(i for i in range(n) if markers[i] != markers[0])
        fail(
            f"rank {r} has {markers[r]} iteration markers (MPI_Pcontrol calls) but rank 0 has "
            f"{markers[0]}: every rank needs the same number"
        )
    iterations = 1
    if markers and markers[0]:
        # Ops after the last marker form one more iteration; a rank with none gets an empty one so
        # that every rank has the same number of iterations.
        trailing = [bool(p) and p[-1][0] != Code.ITERATION_END for p in programs]
        iterations = markers[0] + (1 if any(trailing) else 0)
        if any(trailing):
            for p, t in zip(programs, trailing):
                if not t:
                    p.append((Code.ITERATION_END, 0, 0, 0))
    offsets = np.zeros(n + 1, dtype="<u8")
    offsets[1:] = np.cumsum([len(p) for p in programs], dtype=np.uint64)
    total = int(offsets[-1])
    words = np.zeros(4 * total, dtype="<u8")
    if total:
        flat = np.array([v for p in programs for op in p for v in op], dtype=np.uint64)
        words[:] = flat
    return PackedProgram(
        ranks=n,
        offsets=offsets,
        words=words,
        format=fmt,
        path=path,
        iterations=iterations,
        skipped=dict(sorted(skipped.items())),
        approximated=dict(sorted(approximated.items())),
    )


# ---------------------------------------------------------------------------------------------
# MPI calls: what is ignored (no traffic, no synchronisation worth replaying)
# ---------------------------------------------------------------------------------------------

_LOCAL_PREFIXES = (
    "MPI_Type_",
    "MPI_Group_",
    "MPI_Op_",
    "MPI_Keyval_",
    "MPI_Attr_",
    "MPI_Errhandler_",
    "MPI_Error_",
    "MPI_Comm_get_",
    "MPI_Comm_set_",
    "MPI_Comm_call_",
    "MPI_Comm_create_errhandler",
    "MPI_Comm_create_keyval",
    "MPI_Comm_delete_attr",
    "MPI_Comm_free_keyval",
    "MPI_Info_",
    "MPI_Cart",
    "MPI_Graph",
    "MPI_Dist_graph_neighbors",
    "MPI_Pack",
    "MPI_Unpack",
    "MPI_Status_",
    "MPI_T_",
)
_LOCAL_CALLS = {
    "MPI_Init",
    "MPI_Init_thread",
    "MPI_Initialized",
    "MPI_Finalize",
    "MPI_Finalized",
    "MPI_Abort",
    "MPI_Comm_rank",
    "MPI_Comm_size",
    "MPI_Comm_remote_size",
    "MPI_Comm_remote_group",
    "MPI_Comm_group",
    "MPI_Comm_compare",
    "MPI_Comm_test_inter",
    "MPI_Comm_free",
    "MPI_Dims_create",
    "MPI_Wtime",
    "MPI_Wtick",
    "MPI_Query_thread",
    "MPI_Is_thread_main",
    "MPI_Address",
    "MPI_Get_address",
    "MPI_Get_count",
    "MPI_Get_elements",
    "MPI_Get_elements_x",
    "MPI_Get_processor_name",
    "MPI_Get_version",
    "MPI_Get_library_version",
    "MPI_Buffer_attach",
    "MPI_Buffer_detach",
    "MPI_Request_free",
    "MPI_Request_get_status",
    "MPI_Reduce_local",
    "MPI_Iprobe",  # a poll: the time it takes is communication time, not compute
    "MPI_Pcontrol",
    # Communicator construction is collective, but carries next to no traffic; replayed as nothing.
    "MPI_Comm_dup",
    "MPI_Comm_dup_with_info",
    "MPI_Comm_split",
    "MPI_Comm_split_type",
    "MPI_Comm_create",
    "MPI_Comm_create_group",
}
# Completion calls: they produce WAITs for what completed, or nothing when nothing did.
_COMPLETION_CALLS = {
    "MPI_Wait",
    "MPI_Waitall",
    "MPI_Waitany",
    "MPI_Waitsome",
    "MPI_Test",
    "MPI_Testall",
    "MPI_Testany",
    "MPI_Testsome",
}


def _is_local(name: str) -> bool:
    return name in _LOCAL_CALLS or name in _COMPLETION_CALLS or name.startswith(_LOCAL_PREFIXES)


# ---------------------------------------------------------------------------------------------
# Entry point
# ---------------------------------------------------------------------------------------------


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

    def fail_at(k: str, message: str) -> None:
        raise ScenarioError([(k, message)], source)

    def fail(message: str) -> None:
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
        program = _read_otf2(p, Fraction(speed), fail)
    else:
        program = _read_dumpi(p, Fraction(speed), fail)
    if ranks is not None and program.ranks != ranks:
        fail(f"{p}: the trace has {program.ranks} ranks but the job has {ranks}")
    return program


def _infer_format(p: Path, fail: Any) -> str:
    name = p.name.lower()
    if name.endswith(".otf2"):
        return "otf2"
    if name.endswith(".txt") or name.endswith(".meta"):
        return "dumpi"
    if name.endswith(".bin"):
        fail(f"{p}: binary DUMPI files cannot be read; convert each rank's .bin with dumpi2ascii to .txt")
    if name.endswith(".def") or name.endswith(".evt"):
        fail(f"{p}: give the OTF2 anchor file (the .otf2 file next to the traces folder), not a .def/.evt file")
    if p.is_dir():
        anchors = sorted(p.glob("*.otf2"))
        if anchors:
            return "otf2"
        if any(_DUMPI_FILE.match(f.name) for f in p.glob("*.txt")):
            return "dumpi"
        fail(f"{p}: the folder holds no OTF2 anchor file (*.otf2) and no dumpi2ascii files (prefix-NNNN.txt)")
    if not p.exists() and p.parent.is_dir() and any(p.parent.glob(f"{_glob_escape(p.name)}-*.txt")):
        return "dumpi"  # a DUMPI prefix
    if not p.exists():
        fail(f"{p}: no such file or folder")
    fail(f'{p}: cannot tell the trace format from the name; set format = "otf2" or "dumpi"')
    raise AssertionError  # unreachable


def _glob_escape(s: str) -> str:
    return re.sub(r"([*?\[])", r"[\1]", s)


# ---------------------------------------------------------------------------------------------
# OTF2
# ---------------------------------------------------------------------------------------------


def _read_otf2(p: Path, speed: Fraction, fail: Any) -> PackedProgram:
    import otf2  # a dependency of qoslab; imported here so the rest of the package loads without it
    from otf2.enums import CollectiveOp, GroupType, Paradigm

    anchor = p
    if p.is_dir():
        anchors = sorted(p.glob("*.otf2"))
        if len(anchors) != 1:
            fail(f"{p}: expected one OTF2 anchor file (*.otf2) in the folder, found {len(anchors)}")
        anchor = anchors[0]
    if not anchor.is_file():
        fail(f"{anchor}: no such file")

    coll_map = {
        CollectiveOp.BARRIER: ("barrier", None),
        CollectiveOp.BCAST: ("bcast", None),
        CollectiveOp.REDUCE: ("reduce", None),
        CollectiveOp.ALLREDUCE: ("allreduce", None),
        CollectiveOp.ALLTOALL: ("alltoall", None),
        CollectiveOp.ALLGATHER: ("allgather", None),
        CollectiveOp.ALLGATHERV: ("allgather", "approx"),
        CollectiveOp.ALLTOALLV: ("alltoall", "approx"),
        CollectiveOp.ALLTOALLW: ("alltoall", "approx"),
        CollectiveOp.REDUCE_SCATTER: ("allreduce", "approx"),
        CollectiveOp.REDUCE_SCATTER_BLOCK: ("allreduce", "approx"),
    }

    try:
        reader_cm = otf2.reader.open(str(anchor))
        reader = reader_cm.__enter__()
    except Exception as e:  # the otf2 package raises its own error types on bad archives
        fail(f"{anchor}: not a readable OTF2 archive ({e})")
        raise AssertionError

    skipped: Counter = Counter()
    approximated: Counter = Counter()
    try:
        defs = reader.definitions
        res = int(defs.clock_properties.timer_resolution)
        if res <= 0:
            fail(f"{anchor}: the trace's timer resolution is {res}")
        ps_per_tick = Fraction(10**12, res) / speed

        # The ranks: the MPI locations group lists the location of rank i at position i.
        world_locations = None
        for g in defs.groups:
            if g.group_type == GroupType.COMM_LOCATIONS and g.paradigm == Paradigm.MPI:
                world_locations = list(g.members)
                break
        if not world_locations:
            fail(f"{anchor}: the trace has no MPI ranks (no MPI locations group); was it recorded from an MPI program?")
        rank_of = {loc: r for r, loc in enumerate(world_locations)}
        nranks = len(world_locations)
        comm_cache: dict[Any, list[int] | None] = {}

        def comm_ranks(comm: Any) -> list[int] | None:
            """World ranks of a communicator's members, in comm-rank order (None: COMM_SELF)."""
            if comm in comm_cache:
                return comm_cache[comm]
            g = getattr(comm, "group", None)
            if g is None:
                fail(f"{anchor}: communicator {getattr(comm, 'name', comm)!r} has no group (inter-communicators are not supported)")
            if g.group_type == GroupType.COMM_SELF:
                members = None
            else:
                try:
                    members = [rank_of[loc] for loc in g.members]
                except KeyError:
                    fail(f"{anchor}: communicator {comm.name!r} has a member that is not an MPI rank")
                    raise AssertionError
            comm_cache[comm] = members
            return members

        states = [_Otf2Rank(_Rank(ps_per_tick)) for _ in range(nranks)]

        def peer_of(me: int, comm: Any, r: int, what: str, ev: Any) -> int:
            members = comm_ranks(comm)
            if members is None:
                if r != 0:
                    fail(f"{anchor}: rank {me}, {what} at time {ev.time}: peer {r} on MPI_COMM_SELF")
                return me
            if r >= len(members):
                fail(f"{anchor}: rank {me}, {what} at time {ev.time}: peer {r} is not in communicator {comm.name!r} ({len(members)} ranks)")
            return members[r]

        def check_tag(me: int, tag: int, what: str, ev: Any) -> int:
            if not 0 <= tag < TAG_LIMIT:
                fail(f"{anchor}: rank {me}, {what} at time {ev.time}: tag {tag} is out of range (below 2^31)")
            return tag

        for loc, ev in reader.events:
            me = rank_of.get(loc)
            if me is None:
                continue  # a non-MPI location (e.g. an OpenMP thread): its events are not replayed
            st = states[me]
            rk = st.rank
            kind = type(ev).__name__
            if kind == "Enter":
                region = ev.region
                if region.paradigm != Paradigm.MPI:
                    continue
                if not st.stack:
                    if st.last_leave is not None:
                        rk.gap(ev.time - st.last_leave)
                    st.produced = False
                st.stack.append(region.name)
                if region.name == "MPI_Pcontrol" and len(st.stack) == 1:
                    rk.iteration_end()
                    st.produced = True
            elif kind == "Leave":
                region = ev.region
                if region.paradigm != Paradigm.MPI or not st.stack:
                    continue
                st.stack.pop()
                if not st.stack:
                    for req in st.blocking:
                        rk.wait(req)
                    st.blocking.clear()
                    st.last_leave = ev.time
                    if not st.produced and not _is_local(region.name):
                        skipped[region.name] += 1
            elif kind == "MpiSend":
                peer = peer_of(me, ev.communicator, ev.receiver, "MpiSend", ev)
                st.blocking.append(rk.isend(peer, ev.msg_length, check_tag(me, ev.msg_tag, "MpiSend", ev)))
                st.produced = True
            elif kind == "MpiIsend":
                peer = peer_of(me, ev.communicator, ev.receiver, "MpiIsend", ev)
                st.requests[ev.request_id] = rk.isend(peer, ev.msg_length, check_tag(me, ev.msg_tag, "MpiIsend", ev))
                st.produced = True
            elif kind == "MpiIsendComplete":
                req = st.requests.pop(ev.request_id, None)
                if req is not None:
                    rk.wait(req)
                st.produced = True
            elif kind == "MpiIrecvRequest":
                st.requests[ev.request_id] = rk.irecv(None, None)
                st.produced = True
            elif kind == "MpiIrecv":
                peer = peer_of(me, ev.communicator, ev.sender, "MpiIrecv", ev)
                tag = check_tag(me, ev.msg_tag, "MpiIrecv", ev)
                req = st.requests.pop(ev.request_id, None)
                if req is None or req.op is None or req.op[0] != Code.IRECV:
                    # No MpiIrecvRequest was recorded: post the receive where it completed.
                    req = rk.irecv(peer, tag)
                    approximated["MPI_Irecv without MpiIrecvRequest"] += 1
                else:
                    req.op[1], req.op[3] = peer, tag
                rk.wait(req)
                st.produced = True
            elif kind == "MpiRecv":
                peer = peer_of(me, ev.communicator, ev.sender, "MpiRecv", ev)
                st.blocking.append(rk.irecv(peer, check_tag(me, ev.msg_tag, "MpiRecv", ev)))
                st.produced = True
            elif kind == "MpiRequestCancelled":
                req = st.requests.pop(ev.request_id, None)
                if req is not None:
                    req.dropped = True
                st.produced = True
            elif kind == "MpiCollectiveEnd":
                where = st.stack[0] if st.stack else str(ev.collective_op)
                mapped = coll_map.get(ev.collective_op)
                if mapped is None:
                    continue  # the call is counted as skipped when it returns (nothing produced)
                name, how = mapped
                members = comm_ranks(ev.communicator)
                if members is None:
                    st.produced = True
                    continue  # a collective on MPI_COMM_SELF: no traffic
                n = max(1, len(members))
                st.produced = True
                if n != nranks or members != list(range(nranks)):
                    approximated[f"{where} on a sub-communicator (replayed on all ranks)"] += 1
                elif how == "approx":
                    approximated[where] += 1
                sent, recvd = int(ev.size_sent), int(ev.size_received)
                if name == "barrier":
                    nbytes = 0
                elif name == "bcast":
                    nbytes = recvd
                elif ev.collective_op in (CollectiveOp.REDUCE, CollectiveOp.REDUCE_SCATTER, CollectiveOp.REDUCE_SCATTER_BLOCK):
                    nbytes = sent
                else:  # allreduce, alltoall(v/w), allgather(v): Score-P counts n blocks sent
                    nbytes = -(-sent // n)
                rk.collective(COLLECTIVE_KINDS[name], nbytes, f"{where} at time {ev.time}")
            # Other events (MpiCollectiveBegin, MpiRequestTest, RMA, metrics, ...) produce nothing.
        for r, st in enumerate(states):
            for req in st.requests.values():
                if req.op is not None and req.op[0] == Code.IRECV and req.op[1] is None:
                    skipped["MPI_Irecv never completed"] += 1
    except ScenarioError:
        raise
    except Exception as e:
        fail(f"{anchor}: cannot read the OTF2 events ({type(e).__name__}: {e})")
        raise AssertionError
    finally:
        try:
            reader_cm.__exit__(None, None, None)
        except Exception:
            pass

    return _assemble([st.rank for st in states], "otf2", str(anchor), skipped, approximated, fail)


class _Otf2Rank:
    __slots__ = ("rank", "stack", "last_leave", "produced", "blocking", "requests")

    def __init__(self, rank: _Rank):
        self.rank = rank
        self.stack: list[str] = []
        self.last_leave: int | None = None
        self.produced = False
        self.blocking: list[_Request] = []  # blocking sends/receives: waited for when the call returns
        self.requests: dict[int, _Request] = {}


# ---------------------------------------------------------------------------------------------
# DUMPI ASCII (dumpi2ascii output)
# ---------------------------------------------------------------------------------------------

_DUMPI_FILE = re.compile(r"^(?P<prefix>.+)-(?P<rank>\d+)\.txt$")
_ENTER = re.compile(r"^(?P<name>\w+) entering at walltime (?P<s>\d+)\.(?P<ns>\d+), cputime \S+ seconds in thread \d+\.$")
_RETURN = re.compile(r"^(?P<name>\w+) returning at walltime (?P<s>\d+)\.(?P<ns>\d+), cputime \S+ seconds in thread \d+\.$")
_PARAM = re.compile(r"^(?P<type>[A-Za-z_]\w*(?: [A-Za-z_]\w*)*) (?P<name>[A-Za-z_]\w*)(?:\[[^\]=]*\])*=(?P<value>.*)$")
_DATATYPE_SIZE = re.compile(r"^Datatype (?P<id>\d+) \((?P<name>[^)]*)\) has size (?P<size>-?\d+)$")
_INT = re.compile(r"^\s*(-?\d+)")

# Sizes of the predefined types (used when the file has no datatype size table).
_TYPE_SIZES = {
    "MPI_CHAR": 1,
    "MPI_SIGNED_CHAR": 1,
    "MPI_UNSIGNED_CHAR": 1,
    "MPI_BYTE": 1,
    "MPI_PACKED": 1,
    "MPI_WCHAR": 4,
    "MPI_SHORT": 2,
    "MPI_UNSIGNED_SHORT": 2,
    "MPI_INT": 4,
    "MPI_UNSIGNED": 4,
    "MPI_LONG": 8,
    "MPI_UNSIGNED_LONG": 8,
    "MPI_FLOAT": 4,
    "MPI_DOUBLE": 8,
    "MPI_LONG_DOUBLE": 16,
    "MPI_LONG_LONG_INT": 8,
    "MPI_LONG_LONG": 8,
    "MPI_UNSIGNED_LONG_LONG": 8,
    "MPI_FLOAT_INT": 8,
    "MPI_DOUBLE_INT": 16,
    "MPI_LONG_INT": 16,
    "MPI_SHORT_INT": 8,
    "MPI_2INT": 8,
    "MPI_LONG_DOUBLE_INT": 32,
    "MPI_INT8_T": 1,
    "MPI_UINT8_T": 1,
    "MPI_INT16_T": 2,
    "MPI_UINT16_T": 2,
    "MPI_INT32_T": 4,
    "MPI_UINT32_T": 4,
    "MPI_INT64_T": 8,
    "MPI_UINT64_T": 8,
    "MPI_C_BOOL": 1,
    "MPI_C_FLOAT_COMPLEX": 8,
    "MPI_C_DOUBLE_COMPLEX": 16,
}

_DUMPI_SENDS = {"MPI_Send", "MPI_Bsend", "MPI_Ssend", "MPI_Rsend"}
_DUMPI_ISENDS = {"MPI_Isend", "MPI_Ibsend", "MPI_Issend", "MPI_Irsend"}


def _dumpi_files(p: Path, fail: Any) -> tuple[str, dict[int, Path], int | None, Path]:
    """(prefix, {rank: file}, rank count from the .meta file or None, what to name in errors)."""
    if p.is_dir():
        found: dict[str, dict[int, Path]] = {}
        for f in p.glob("*.txt"):
            m = _DUMPI_FILE.match(f.name)
            if m:
                found.setdefault(m["prefix"], {})[int(m["rank"])] = f
        if not found:
            fail(f"{p}: the folder holds no dumpi2ascii files (prefix-NNNN.txt)")
        if len(found) > 1:
            fail(f"{p}: the folder holds the files of several DUMPI traces ({', '.join(sorted(found))}); give one prefix")
        prefix = next(iter(found))
        prefix_path = p / prefix
    else:
        m = _DUMPI_FILE.match(p.name)
        if m:
            if not p.is_file():
                fail(f"{p}: no such file")
            prefix_path = p.parent / m["prefix"]
        elif p.name.endswith(".meta"):
            if not p.is_file():
                fail(f"{p}: no such file")
            prefix_path = p.parent / p.name[: -len(".meta")]
        elif p.suffix == ".txt":
            if not p.is_file():
                fail(f"{p}: no such file")
            fail(f"{p}: not a dumpi2ascii rank file name (expected prefix-NNNN.txt, NNNN the rank)")
            raise AssertionError
        else:
            prefix_path = p
    prefix = prefix_path.name
    files: dict[int, Path] = {}
    for f in prefix_path.parent.glob(f"{_glob_escape(prefix)}-*.txt"):
        m = _DUMPI_FILE.match(f.name)
        if m and m["prefix"] == prefix:
            files[int(m["rank"])] = f
    meta_ranks = None
    meta = prefix_path.parent / f"{prefix}.meta"
    if meta.is_file():
        for line in meta.read_text(errors="replace").splitlines():
            if line.startswith("numprocs="):
                try:
                    meta_ranks = int(line.split("=", 1)[1])
                except ValueError:
                    fail(f"{meta}: malformed numprocs line {line!r}")
    if not files:
        fail(f"{prefix_path}-NNNN.txt: no dumpi2ascii files found for this prefix")
    return prefix, files, meta_ranks, prefix_path


def _read_dumpi(p: Path, speed: Fraction, fail: Any) -> PackedProgram:
    prefix, files, meta_ranks, prefix_path = _dumpi_files(p, fail)
    nranks = meta_ranks if meta_ranks is not None else max(files) + 1
    missing = [r for r in range(nranks) if r not in files]
    if missing:
        names = ", ".join(f"{prefix}-{r:04d}.txt" for r in missing[:8]) + (", ..." if len(missing) > 8 else "")
        fail(
            f"{prefix_path}: the trace has {nranks} ranks but the dumpi2ascii files of "
            f"{len(missing)} are missing (ranks {_ranges(missing)}: {names}); convert every rank's "
            ".bin file with dumpi2ascii"
        )
    extra = [r for r in files if r >= nranks]
    if extra:
        fail(f"{prefix_path}: files for ranks {_ranges(sorted(extra))} but the .meta file says {nranks} ranks")
    ps_per_ns = Fraction(1000) / speed
    skipped: Counter = Counter()
    approximated: Counter = Counter()
    ranks = [_DumpiRank(r, nranks, files[r], ps_per_ns, skipped, approximated, fail).read() for r in range(nranks)]
    return _assemble(ranks, "dumpi", str(prefix_path), skipped, approximated, fail)


def read_dumpi_rank(
    path: str | os.PathLike[str], rank: int, ranks: int, cpu_speedup: float = 1.0
) -> tuple[list[tuple[int, int, int, int]], dict[str, int]]:
    """One rank's dumpi2ascii file on its own: its ops (collective sizes as this rank reports them,
    not reconciled with the other ranks) and the calls it skipped. For looking at a trace whose
    other ranks are not at hand; a job needs :func:`read_trace`."""
    skipped: Counter = Counter()

    def fail(message: str) -> None:
        raise ScenarioError([("", message)])

    rk = _DumpiRank(rank, ranks, Path(path), Fraction(1000) / Fraction(float(cpu_speedup)), skipped, Counter(), fail).read()
    return rk.finish([c[1] for c in rk.collectives]), dict(sorted(skipped.items()))


def _ranges(xs: list[int]) -> str:
    out, i = [], 0
    while i < len(xs):
        j = i
        while j + 1 < len(xs) and xs[j + 1] == xs[j] + 1:
            j += 1
        out.append(str(xs[i]) if i == j else f"{xs[i]}-{xs[j]}")
        i = j + 1
    return ", ".join(out)


class _Record:
    __slots__ = ("name", "line", "start", "params")

    def __init__(self, name: str, line: int, start: int):
        self.name = name
        self.line = line
        self.start = start
        self.params: dict[str, tuple[str, str, int]] = {}  # name -> (type, value, line)


_WORLD_COMM_NAME = "MPI_COMM_WORLD"
_SELF_COMM_NAME = "MPI_COMM_SELF"


class _DumpiRank:
    """Reads one rank's dumpi2ascii file."""

    def __init__(self, rank: int, nranks: int, path: Path, ps_per_ns: Fraction, skipped: Counter, approximated: Counter, fail: Any):
        self.me = rank
        self.n = nranks
        self.path = path
        self.rank = _Rank(ps_per_ns)
        self.skipped = skipped
        self.approximated = approximated
        self._fail = fail
        self.type_sizes: dict[int, int] = {}
        self.requests: dict[int, _Request] = {}
        self.world_comms: set[int] = set()  # user communicators known to be copies of MPI_COMM_WORLD
        self.self_comms: set[int] = set()
        self.last_return: int | None = None

    # -- errors ---------------------------------------------------------------------------------

    def fail(self, line: int, message: str) -> None:
        self._fail(f"{self.path}, line {line}: {message}")

    # -- reading --------------------------------------------------------------------------------

    def read(self) -> _Rank:
        try:
            text = self.path.read_text(errors="strict")
        except UnicodeDecodeError:
            self._fail(f"{self.path}: not a text file (binary DUMPI? convert it with dumpi2ascii)")
            raise AssertionError
        except OSError as e:
            self._fail(f"{self.path}: cannot read ({e.strerror or e})")
            raise AssertionError
        lines = text.splitlines()
        # The footer's datatype size table first: records refer to it.
        for line in lines:
            m = _DATATYPE_SIZE.match(line)
            if m and int(m["size"]) > 0:
                self.type_sizes[int(m["id"])] = int(m["size"])
        rec: _Record | None = None
        seen_record = False
        in_footer = False
        for i, line in enumerate(lines, start=1):
            m = _ENTER.match(line)
            if m:
                if rec is not None:
                    self.fail(rec.line, f"{rec.name} record has no 'returning' line before the next record (line {i})")
                if in_footer:
                    self.fail(i, "MPI record after the end-of-trace summary")
                rec = _Record(m["name"], i, _ns(m))
                seen_record = True
                continue
            m = _RETURN.match(line)
            if m:
                if rec is None:
                    self.fail(i, f"{m['name']} 'returning' line without an 'entering' line")
                    raise AssertionError
                if m["name"] != rec.name:
                    self.fail(i, f"{m['name']} returns inside the {rec.name} record that starts at line {rec.line}")
                self.record(rec, _ns(m), i)
                rec = None
                continue
            if rec is not None:
                if line.startswith("Perfcounters:") or not line.strip():
                    continue
                pm = _PARAM.match(line)
                if pm:
                    rec.params[pm["name"]] = (pm["type"], pm["value"], i)
                elif rec.name in _DUMPI_HANDLERS:
                    self.fail(i, f"malformed parameter line in the {rec.name} record that starts at line {rec.line}: {line[:80]!r}")
                # A line we cannot parse in a call we do not replay (e.g. a 2-D array): ignored.
                continue
            # Outside records: header lines (key=value) before the first record, a summary after.
            if not line.strip():
                continue
            if line.startswith("Total keyvals:") or " called " in line and " times and ignored " in line:
                in_footer = True
                continue
            if in_footer:
                continue
            if not seen_record and "=" in line and not line.startswith("MPI_"):
                continue
            self.fail(i, f"unexpected line outside an MPI record: {line[:80]!r}" + ("" if seen_record else " (is this a dumpi2ascii file?)"))
        if rec is not None:
            self.fail(rec.line, f"{rec.name} record is cut off: the file ends before its 'returning' line")
        if not seen_record:
            self._fail(f"{self.path}: no MPI records in the file (is it a dumpi2ascii file?)")
        return self.rank

    def record(self, rec: _Record, end: int, end_line: int) -> None:
        rk = self.rank
        if self.last_return is not None:
            rk.gap(rec.start - self.last_return)
        self.last_return = end
        handler = _DUMPI_HANDLERS.get(rec.name)
        if handler is not None:
            handler(self, rec)
        elif not _is_local(rec.name):
            self.skipped[rec.name] += 1

    # -- parameters -----------------------------------------------------------------------------

    def param(self, rec: _Record, name: str) -> tuple[str, str, int]:
        if name not in rec.params:
            self.fail(rec.line, f"{rec.name} record has no {name!r} parameter")
        return rec.params[name]

    def int_param(self, rec: _Record, name: str) -> int:
        _, value, line = self.param(rec, name)
        m = _INT.match(value)
        if not m:
            self.fail(line, f"{rec.name}: parameter {name!r} is not an integer: {value[:60]!r}")
            raise AssertionError
        return int(m.group(1))

    def int_list(self, rec: _Record, name: str) -> list[int] | None:
        """`[1, 2, 3]` -> list; `<IGNORED>` -> None."""
        _, value, line = self.param(rec, name)
        value = value.strip()
        if value == "<IGNORED>":
            return None
        if not (value.startswith("[") and value.endswith("]")):
            self.fail(line, f"{rec.name}: parameter {name!r} is not a list: {value[:60]!r}")
        inner = value[1:-1].strip()
        if not inner:
            return []
        try:
            return [int(v) for v in inner.split(",")]
        except ValueError:
            self.fail(line, f"{rec.name}: parameter {name!r} is not a list of integers: {value[:60]!r}")
            raise AssertionError

    def request_param(self, rec: _Record, name: str) -> int | None:
        values = self.int_list(rec, name)
        if not values:
            return None
        return values[0]

    def type_size(self, rec: _Record, name: str) -> int:
        _, value, line = self.param(rec, name)
        m = re.match(r"^\s*(-?\d+)\s*(?:\((?P<n>[^)]*)\))?", value)
        if not m:
            self.fail(line, f"{rec.name}: parameter {name!r} is not a datatype: {value[:60]!r}")
            raise AssertionError
        tid = int(m.group(1))
        if tid in self.type_sizes:
            return self.type_sizes[tid]
        tname = m.group("n") or ""
        if tname in _TYPE_SIZES:
            return _TYPE_SIZES[tname]
        self.fail(line, f"{rec.name}: the size of datatype {tid} ({tname or 'unnamed'}) is unknown (the file's datatype size table does not list it)")
        raise AssertionError

    def count_bytes(self, rec: _Record, count: str, dtype: str) -> int:
        c = self.int_param(rec, count)
        if c < 0:
            self.fail(self.param(rec, count)[2], f"{rec.name}: negative count {c}")
        return c * self.type_size(rec, dtype)

    def comm(self, rec: _Record, name: str = "comm") -> str:
        """'world', 'self' or 'other'."""
        _, value, line = self.param(rec, name)
        m = re.match(r"^\s*(-?\d+)\s*(?:\((?P<n>[^)]*)\))?", value)
        if not m:
            self.fail(line, f"{rec.name}: parameter {name!r} is not a communicator: {value[:60]!r}")
            raise AssertionError
        cid, cname = int(m.group(1)), m.group("n") or ""
        if cname == _WORLD_COMM_NAME or cid in self.world_comms:
            return "world"
        if cname == _SELF_COMM_NAME or cid in self.self_comms:
            return "self"
        return "other"

    def peer(self, rec: _Record, name: str, comm: str, receive: bool) -> int | None:
        """A world rank, ANY (receives only) or None (MPI_PROC_NULL: no traffic)."""
        _, value, line = self.param(rec, name)
        r = self.int_param(rec, name)
        if receive and (r == -1 or "MPI_ANY_SOURCE" in value):
            return ANY
        if r < 0:
            return None  # MPI_PROC_NULL
        if comm == "self":
            if r != 0:
                self.fail(line, f"{rec.name}: rank {r} on MPI_COMM_SELF")
            return self.me
        if comm == "other":
            self.fail(
                rec.line,
                f"{rec.name} on a communicator other than MPI_COMM_WORLD (or a copy of it made with "
                "MPI_Comm_dup): its ranks cannot be mapped to the job's ranks",
            )
        if r >= self.n:
            self.fail(line, f"{rec.name}: rank {r} is not a rank of the job (0..{self.n - 1})")
        return r

    def tag(self, rec: _Record, name: str, receive: bool) -> int:
        _, value, line = self.param(rec, name)
        t = self.int_param(rec, name)
        if receive and (t == -1 or "MPI_ANY_TAG" in value):
            return ANY
        if not 0 <= t < TAG_LIMIT:
            self.fail(line, f"{rec.name}: tag {t} is out of range (0 to 2^31-1)")
        return t

    # -- ops ------------------------------------------------------------------------------------

    def send(self, rec: _Record, count: str, dtype: str, dest: str, tag: str) -> _Request:
        comm = self.comm(rec)
        peer = self.peer(rec, dest, comm, receive=False)
        nbytes = self.count_bytes(rec, count, dtype)
        t = self.tag(rec, tag, receive=False)
        if peer is None:
            return self.rank.null_request()
        return self.rank.isend(peer, nbytes, t)

    def recv(self, rec: _Record, source: str, tag: str) -> _Request:
        comm = self.comm(rec)
        peer = self.peer(rec, source, comm, receive=True)
        t = self.tag(rec, tag, receive=True)
        if peer is None:
            return self.rank.null_request()
        return self.rank.irecv(peer, t)

    def issue(self, rec: _Record, req: _Request) -> None:
        handle = self.request_param(rec, "request")
        if handle is not None:
            self.requests[handle] = req

    def complete(self, handle: int | None) -> None:
        if handle is None:
            return
        req = self.requests.pop(handle, None)
        if req is not None:  # unknown handles: MPI_REQUEST_NULL or requests of skipped calls
            self.rank.wait(req)

    def collective(self, rec: _Record, kind: str, nbytes: int, approx: bool = False) -> None:
        comm = self.comm(rec)
        if comm == "self":
            return
        if comm == "other":
            self.approximated[f"{rec.name} on a sub-communicator (replayed on all ranks)"] += 1
        elif approx:
            self.approximated[rec.name] += 1
        self.rank.collective(COLLECTIVE_KINDS[kind], nbytes, f"{rec.name} at line {rec.line}")


def _ns(m: re.Match[str]) -> int:
    frac = m["ns"]
    # dumpi2ascii prints nanoseconds with 9 digits; be lenient with other widths.
    ns = int(frac[:9].ljust(9, "0"))
    return int(m["s"]) * 1_000_000_000 + ns


def _h_send(d: _DumpiRank, rec: _Record) -> None:
    d.rank.wait(d.send(rec, "count", "datatype", "dest", "tag"))


def _h_isend(d: _DumpiRank, rec: _Record) -> None:
    d.issue(rec, d.send(rec, "count", "datatype", "dest", "tag"))


def _h_recv(d: _DumpiRank, rec: _Record) -> None:
    d.rank.wait(d.recv(rec, "source", "tag"))


def _h_irecv(d: _DumpiRank, rec: _Record) -> None:
    d.issue(rec, d.recv(rec, "source", "tag"))


def _h_sendrecv(d: _DumpiRank, rec: _Record) -> None:
    r = d.recv(rec, "source", "recvtag")
    s = d.send(rec, "sendcount", "sendtype", "dest", "sendtag")
    d.rank.wait(r)
    d.rank.wait(s)


def _h_sendrecv_replace(d: _DumpiRank, rec: _Record) -> None:
    r = d.recv(rec, "source", "recvtag")
    s = d.send(rec, "count", "datatype", "dest", "sendtag")
    d.rank.wait(r)
    d.rank.wait(s)


def _h_wait(d: _DumpiRank, rec: _Record) -> None:
    d.complete(d.request_param(rec, "request"))


def _h_waitall(d: _DumpiRank, rec: _Record) -> None:
    for h in d.int_list(rec, "requests") or []:
        d.complete(h)


def _h_waitany(d: _DumpiRank, rec: _Record) -> None:
    reqs = d.int_list(rec, "requests") or []
    index = d.int_param(rec, "index")
    if 0 <= index < len(reqs):
        d.complete(reqs[index])


def _h_waitsome(d: _DumpiRank, rec: _Record) -> None:
    reqs = d.int_list(rec, "requests") or []
    outcount = d.int_param(rec, "outcount")
    indices = (d.int_list(rec, "indices") or []) if outcount > 0 else []
    for i in indices[: max(outcount, 0)]:
        if 0 <= i < len(reqs):
            d.complete(reqs[i])


def _h_test(d: _DumpiRank, rec: _Record) -> None:
    if d.int_param(rec, "flag"):
        d.complete(d.request_param(rec, "request"))


def _h_testall(d: _DumpiRank, rec: _Record) -> None:
    if d.int_param(rec, "flag"):
        _h_waitall(d, rec)


def _h_testany(d: _DumpiRank, rec: _Record) -> None:
    if d.int_param(rec, "flag"):
        _h_waitany(d, rec)


def _h_request_free(d: _DumpiRank, rec: _Record) -> None:
    h = d.request_param(rec, "request")
    if h is not None:
        d.requests.pop(h, None)


def _h_barrier(d: _DumpiRank, rec: _Record) -> None:
    d.collective(rec, "barrier", 0)


def _h_bcast(d: _DumpiRank, rec: _Record) -> None:
    d.collective(rec, "bcast", d.count_bytes(rec, "count", "datatype"))


def _h_reduce(d: _DumpiRank, rec: _Record) -> None:
    d.collective(rec, "reduce", d.count_bytes(rec, "count", "datatype"))


def _h_allreduce(d: _DumpiRank, rec: _Record) -> None:
    d.collective(rec, "allreduce", d.count_bytes(rec, "count", "datatype"))


def _h_alltoall(d: _DumpiRank, rec: _Record) -> None:
    d.collective(rec, "alltoall", d.count_bytes(rec, "sendcount", "sendtype"))


def _h_allgather(d: _DumpiRank, rec: _Record) -> None:
    d.collective(rec, "allgather", d.count_bytes(rec, "sendcount", "sendtype"))


def _h_allgatherv(d: _DumpiRank, rec: _Record) -> None:
    d.collective(rec, "allgather", d.count_bytes(rec, "sendcount", "sendtype"), approx=True)


def _h_alltoallv(d: _DumpiRank, rec: _Record) -> None:
    counts = d.int_list(rec, "sendcounts") or []
    size = d.type_size(rec, "sendtype")
    block = -(-sum(counts) * size // len(counts)) if counts else 0
    d.collective(rec, "alltoall", block, approx=True)


def _h_reduce_scatter(d: _DumpiRank, rec: _Record) -> None:
    counts = d.int_list(rec, "recvcounts") or []
    d.collective(rec, "allreduce", sum(counts) * d.type_size(rec, "datatype"), approx=True)


def _h_pcontrol(d: _DumpiRank, rec: _Record) -> None:
    d.rank.iteration_end()


def _h_comm_dup(d: _DumpiRank, rec: _Record) -> None:
    kind = d.comm(rec, "comm")
    new = d.int_param(rec, "newcomm")
    if kind == "world":
        d.world_comms.add(new)
    elif kind == "self":
        d.self_comms.add(new)


def _h_comm_free(d: _DumpiRank, rec: _Record) -> None:
    if "comm" in rec.params:
        c = d.int_param(rec, "comm")
        d.world_comms.discard(c)
        d.self_comms.discard(c)


_DUMPI_HANDLERS = {
    **{name: _h_send for name in _DUMPI_SENDS},
    **{name: _h_isend for name in _DUMPI_ISENDS},
    "MPI_Recv": _h_recv,
    "MPI_Irecv": _h_irecv,
    "MPI_Sendrecv": _h_sendrecv,
    "MPI_Sendrecv_replace": _h_sendrecv_replace,
    "MPI_Wait": _h_wait,
    "MPI_Waitall": _h_waitall,
    "MPI_Waitany": _h_waitany,
    "MPI_Waitsome": _h_waitsome,
    "MPI_Test": _h_test,
    "MPI_Testall": _h_testall,
    "MPI_Testany": _h_testany,
    "MPI_Testsome": _h_waitsome,  # same parameters: outcount, indices
    "MPI_Request_free": _h_request_free,
    "MPI_Barrier": _h_barrier,
    "MPI_Bcast": _h_bcast,
    "MPI_Reduce": _h_reduce,
    "MPI_Allreduce": _h_allreduce,
    "MPI_Alltoall": _h_alltoall,
    "MPI_Allgather": _h_allgather,
    "MPI_Allgatherv": _h_allgatherv,
    "MPI_Alltoallv": _h_alltoallv,
    "MPI_Reduce_scatter": _h_reduce_scatter,
    "MPI_Pcontrol": _h_pcontrol,
    "MPI_Comm_dup": _h_comm_dup,
    "MPI_Comm_free": _h_comm_free,
}
