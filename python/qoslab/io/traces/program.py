"""The packed form the engine replays, and one rank's program while a reader builds it.

The op codes mirror ``crates/qoslab-engine/src/mpi/program.rs`` (module ``packed``). A reader
appends ops to a :class:`RankProgram` per rank; :func:`qoslab.io.traces.pack.assemble` then
checks the ranks against each other and packs them into a :class:`PackedProgram`.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np


class Code:
    COMPUTE = 0  # a = picoseconds
    ISEND = 1  # a = peer | mode << 32 (SendMode), b = bytes, c = tag | context << 32
    IRECV = 2  # a = peer or ANY, c = (tag or ANY) | context << 32
    PUT = 3  # a = peer, b = bytes
    GET = 4  # a = peer, b = bytes
    WAITALL = 5
    WAIT = 6  # a = request number
    COLLECTIVE = 7  # a = kind | root << 32, b = bytes, c = communicator | sequence << 32
    ITERATION_END = 8


class SendMode:
    """An ISEND's mode (crates/qoslab-engine/src/mpi/program.rs, ``SendMode``)."""

    STANDARD = 0  # MPI_Send, MPI_Rsend
    SYNCHRONOUS = 1  # MPI_Ssend: complete once the matching receive is posted
    BUFFERED = 2  # MPI_Bsend: complete at once, the data copied into the attached buffer


# Send calls by mode (blocking and non-blocking); the others are standard.
SEND_MODES = {
    "MPI_Ssend": SendMode.SYNCHRONOUS,
    "MPI_Issend": SendMode.SYNCHRONOUS,
    "MPI_Bsend": SendMode.BUFFERED,
    "MPI_Ibsend": SendMode.BUFFERED,
}

ANY = 0xFFFFFFFF  # MPI_ANY_SOURCE / MPI_ANY_TAG in IRECV
TAG_LIMIT = 1 << 31  # tags at or above are reserved for the engine's collectives

COLLECTIVE_KINDS = {"barrier": 0, "bcast": 1, "reduce": 2, "allreduce": 3, "alltoall": 4, "allgather": 5}
KIND_NAMES = {v: k for k, v in COLLECTIVE_KINDS.items()}


@dataclass
class PackedProgram:
    """A trace's rank programs in the engine's packed form.

    ``offsets``: ``ranks + 1`` little-endian u64; rank r's ops are op indices
    ``offsets[r] .. offsets[r + 1]``. ``words``: 4 little-endian u64 per op ``[code, a, b, c]``.
    An ISEND's or IRECV's ``c`` holds its tag (low 32 bits) and its communicator's matching
    context (high 32 bits): each communicator the trace sends on has its own, numbered in the order
    the trace first uses them, so that messages match only on their own communicator (MPI's
    context ids; a dup of MPI_COMM_WORLD has one of its own).
    A COLLECTIVE's ``a`` is its kind (low 32 bits) and, for a broadcast or a reduce, its root's
    rank in the communicator (high 32 bits); its ``c`` is its communicator (low 32 bits: 0 the
    whole job, k the k-th of ``communicators``) and its sequence number among the trace's
    collectives (high 32 bits).
    ``comm_offsets``, ``comm_members``: communicator k's job ranks, in communicator rank order,
    are ``comm_members[comm_offsets[k - 1] : comm_offsets[k]]`` (both empty when every collective
    runs on the whole job).
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
    comm_offsets: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype="<u8"))
    comm_members: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype="<u8"))

    @property
    def ops_per_rank(self) -> np.ndarray:
        return np.diff(self.offsets).astype(np.int64)

    @property
    def total_ops(self) -> int:
        return int(self.offsets[-1])

    @property
    def communicators(self) -> list[tuple[int, ...]]:
        """The listed communicators' members (communicator k is item k - 1; 0 is the whole job)."""
        o = [int(v) for v in self.comm_offsets]
        return [tuple(int(m) for m in self.comm_members[a:b]) for a, b in itertools.pairwise(o)]

    def rank_ops(self, rank: int) -> np.ndarray:
        """Rank ``rank``'s ops as an ``(n, 4)`` array of ``[code, a, b, c]``."""
        a, b = int(self.offsets[rank]), int(self.offsets[rank + 1])
        return self.words[4 * a : 4 * b].reshape(-1, 4)

    def op_tuples(self, rank: int) -> list[tuple[int, int, int, int]]:
        return [(int(r[0]), int(r[1]), int(r[2]), int(r[3])) for r in self.rank_ops(rank)]

    def engine_arrays(self) -> tuple[bytes, ...]:
        """What the engine takes: (offsets, words) and, with communicators, their table."""
        parts = [self.offsets, self.words]
        if len(self.comm_offsets):
            parts += [self.comm_offsets, self.comm_members]
        return tuple(np.ascontiguousarray(p, dtype="<u8").tobytes() for p in parts)

    def summary(self) -> dict[str, Any]:
        """Counts over all ranks: messages and bytes sent, collectives by kind, compute time."""
        ops = self.words.reshape(-1, 4)
        codes = ops[:, 0]
        sends = ops[codes == Code.ISEND]
        colls = ops[codes == Code.COLLECTIVE]
        return {
            "ranks": self.ranks,
            "iterations": self.iterations,
            "ops": len(ops),
            "messages": len(sends),
            "message_bytes": int(sends[:, 2].sum()) if len(sends) else 0,
            "receives": int((codes == Code.IRECV).sum()),
            "collectives": {KIND_NAMES[int(k)]: int(n)
                            for k, n in zip(*np.unique(colls[:, 1] & 0xFFFFFFFF, return_counts=True), strict=True)}
            if len(colls)
            else {},
            "communicators": 1 + len(self.communicators),
            "compute_ps": int(ops[codes == Code.COMPUTE][:, 1].sum()),
        }

    @property
    def warnings(self) -> list[str]:
        out = [f"{name} skipped ({n} call{'s' if n != 1 else ''})" for name, n in sorted(self.skipped.items())]
        out += [f"{name} approximated ({n} call{'s' if n != 1 else ''})" for name, n in sorted(self.approximated.items())]
        return out


class Request:
    """A request as issued; its number is assigned at the end, once dropped requests are known."""

    __slots__ = ("dropped", "number", "op")

    def __init__(self) -> None:
        self.number = -1
        self.dropped = False
        self.op: list[Any] | None = None


class RankProgram:
    """One rank's ops while reading; requests are objects until `finish` numbers them.

    A peer may be left as a placeholder object until the reader knows the communicator's
    members (DUMPI), and so may a collective's communicator (``collectives[i][0]``)."""

    def __init__(self, ps_per_tick: Fraction):
        self.ops: list[list[Any]] = []
        self.ps_per_tick = ps_per_tick
        self.pending_ticks = 0  # compute not yet emitted (merged across skipped calls)
        self.finalized = False  # MPI_Finalize entered: no gap after it is compute
        # [communicator, kind, bytes estimate, where] per collective call, in call order.
        self.collectives: list[list[Any]] = []

    def gap(self, ticks: int) -> None:
        if ticks > 0 and not self.finalized:
            self.pending_ticks += ticks

    def init_returned(self) -> None:
        """MPI_Init (or MPI_Init_thread) returned: compute counts from here. Gaps before it
        (around MPI_Initialized, say) are not compute. A trace without MPI_Init counts from the
        return of its first MPI call."""
        self.pending_ticks = 0

    def finalize(self) -> None:
        """MPI_Finalize entered: the gaps since the last op are the rank's trailing compute, and
        nothing after this is compute."""
        self._flush()
        self.finalized = True

    def _flush(self) -> None:
        if self.pending_ticks:
            ps = round(self.pending_ticks * self.ps_per_tick)
            self.pending_ticks = 0
            if ps > 0:
                self.ops.append([Code.COMPUTE, ps, 0, 0])

    def isend(self, peer: Any, nbytes: int, tag: int, comm: Any, mode: int = SendMode.STANDARD) -> Request:
        """`comm`: what names the communicator (a :class:`Communicator`, or a placeholder the
        reader resolves); messages match only receives on the same one. `mode`: a
        :class:`SendMode`."""
        self._flush()
        req = Request()
        req.op = [Code.ISEND, peer, nbytes, tag, req, comm, mode]
        self.ops.append(req.op)
        return req

    def irecv(self, peer: Any, tag: int | None, comm: Any) -> Request:
        """`peer is None`: not known yet (OTF2 fills it in, and tag and comm, when the receive
        completes)."""
        self._flush()
        req = Request()
        req.op = [Code.IRECV, peer, 0, tag, req, comm]
        self.ops.append(req.op)
        return req

    def null_request(self) -> Request:
        """A request that carries no traffic (MPI_PROC_NULL): waits on it vanish."""
        req = Request()
        req.dropped = True
        return req

    def wait(self, req: Request) -> None:
        if req.dropped:
            return
        self._flush()
        self.ops.append([Code.WAIT, req, 0, 0])

    def collective(self, comm: Any, kind: int, nbytes: int, where: str, root: int = 0) -> None:
        """`root`: a broadcast's or reduce's root, as a rank of `comm` (0 for the others)."""
        self._flush()
        self.ops.append([Code.COLLECTIVE, kind, len(self.collectives), 0])
        self.collectives.append([comm, kind, max(0, int(nbytes)), where, int(root)])

    def iteration_end(self) -> None:
        self._flush()
        self.ops.append([Code.ITERATION_END, 0, 0, 0])

    def finish(
        self, coll_ops: list[tuple[int, int] | None], context_of: Callable[[Any], int]
    ) -> list[tuple[int, int, int, int]]:
        """Numbers the requests that survive, resolves waits; ``coll_ops[i]`` is collective i's
        (bytes, c word), or None when it carries no traffic (a one-rank communicator);
        ``context_of`` gives a send's or receive's communicator its matching context."""
        # Compute after the last op (up to MPI_Finalize, or to the last MPI call of a trace
        # without it) is the rank's trailing compute: the job is not done before it is.
        self._flush()
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
                a = op[1] | op[6] << 32 if code == Code.ISEND else op[1]
                out.append((code, a, op[2], op[3] | context_of(op[5]) << 32))
            elif code == Code.WAIT:
                req = op[1]
                if req.dropped or req.number < 0:
                    continue
                out.append((Code.WAIT, req.number, 0, 0))
            elif code == Code.COLLECTIVE:
                resolved = coll_ops[op[2]]
                if resolved is not None:
                    root = self.collectives[op[2]][4]
                    out.append((Code.COLLECTIVE, op[1] | root << 32, resolved[0], resolved[1]))
            else:
                out.append((code, op[1], op[2], op[3]))
        return out


def ranges(xs: list[int]) -> str:
    """``[0, 1, 2, 5]`` -> ``"0-2, 5"``."""
    out, i = [], 0
    while i < len(xs):
        j = i
        while j + 1 < len(xs) and xs[j + 1] == xs[j] + 1:
            j += 1
        out.append(str(xs[i]) if i == j else f"{xs[i]}-{xs[j]}")
        i = j + 1
    return ", ".join(out)
