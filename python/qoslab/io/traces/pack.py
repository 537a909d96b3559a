"""Cross-rank checks and packing: every rank's program into one :class:`PackedProgram`.

Collectives are matched per communicator: the k-th collective a member calls on a communicator
is the k-th collective of every other member on it (MPI's rule), so they must agree on the kind;
the size is the largest any member reports. Each such collective gets a sequence number, the same
on every member, that tags its messages in the engine. Numbers follow an order in which every
rank calls its collectives in its own order; when none exists the ranks call collectives on
overlapping communicators in orders that can deadlock, which MPI forbids.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Callable
from typing import NoReturn

import numpy as np

from qoslab.io.traces.communicators import Communicator
from qoslab.io.traces.program import KIND_NAMES, Code, PackedProgram, RankProgram
from qoslab.workload_base import MAX_MESSAGE_BYTES

Fail = Callable[[str], NoReturn]


class CommTable:
    """The communicators the packed program lists: equal member lists share an entry, and the
    whole job (ranks 0..n-1 in order) is communicator 0, never listed."""

    def __init__(self, ranks: int):
        self.world = tuple(range(ranks))
        self.index: dict[tuple[int, ...], int] = {}

    def of(self, members: tuple[int, ...]) -> int:
        if members == self.world:
            return 0
        return self.index.setdefault(members, len(self.index) + 1)

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        if not self.index:
            return np.zeros(0, dtype="<u8"), np.zeros(0, dtype="<u8")
        lists = list(self.index)  # insertion order: entry k - 1 is communicator k
        offsets = np.zeros(len(lists) + 1, dtype="<u8")
        offsets[1:] = np.cumsum([len(m) for m in lists], dtype=np.uint64)
        members = np.array([r for m in lists for r in m], dtype="<u8")
        return offsets, members


def _match_collectives(ranks: list[RankProgram], fail: Fail) -> tuple[list[list[tuple[int, int] | None]], CommTable]:
    """Per rank, per collective: (bytes, c word) or None (no traffic); and the communicators."""
    n = len(ranks)
    calls: dict[Communicator, dict[int, list[int]]] = {}
    for r, rk in enumerate(ranks):
        for i, entry in enumerate(rk.collectives):
            comm = entry[0]
            if not isinstance(comm, Communicator):
                raise TypeError(f"rank {r}: collective {i} has no resolved communicator ({comm!r})")
            calls.setdefault(comm, {}).setdefault(r, []).append(i)

    out: list[list[tuple[int, int] | None]] = [[None] * len(rk.collectives) for rk in ranks]
    table = CommTable(n)
    # One node per collective with traffic, (communicator, k): its size, c word (before the
    # sequence number), members with their call index, and its key among ready collectives.
    node_bytes: list[int] = []
    node_comm: list[int] = []
    node_members: list[list[tuple[int, int]]] = []
    node_key: list[tuple[int, int, int]] = []
    node_of: list[dict[int, int]] = [{} for _ in range(n)]  # rank -> {collective index: node}
    for order, (comm, by_rank) in enumerate(calls.items()):
        members = comm.members
        outsiders = sorted(set(by_rank) - set(members))
        if outsiders:
            r = outsiders[0]
            where = ranks[r].collectives[by_rank[r][0]][3]
            fail(f"rank {r} calls a collective on {comm}, which it is not a member of ({where})")
        if len(members) == 1:
            continue  # a one-rank communicator: no traffic, nothing to match
        counts = {m: len(by_rank.get(m, [])) for m in members}
        most = max(counts.values())
        if min(counts.values()) != most:
            a = next(m for m in members if counts[m] == most)
            b = next(m for m in members if counts[m] != most)
            first_extra = ranks[a].collectives[by_rank[a][counts[b]]][3]
            fail(
                f"rank {b} calls {counts[b]} collective{'s' if counts[b] != 1 else ''} on {comm} but rank {a} "
                f"calls {most} (its collective #{counts[b]} there is {first_extra}): every member of a "
                "communicator calls the same collectives on it"
            )
        cword = table.of(members)
        for k in range(most):
            entries = [(m, by_rank[m][k]) for m in members]
            first_rank, first_i = entries[0]
            first = ranks[first_rank].collectives[first_i]
            for m, i in entries[1:]:
                e = ranks[m].collectives[i]
                if e[1] != first[1]:
                    fail(
                        f"collective #{k} on {comm} is {KIND_NAMES[first[1]]} on rank {first_rank} ({first[3]}) "
                        f"but {KIND_NAMES[e[1]]} on rank {m} ({e[3]}): the ranks do not call the same "
                        "collectives in the same order"
                    )
                if e[4] != first[4]:
                    fail(
                        f"collective #{k} on {comm}, a {KIND_NAMES[first[1]]}, has root {first[4]} on rank "
                        f"{first_rank} ({first[3]}) but root {e[4]} on rank {m} ({e[3]}): MPI needs every member "
                        "to name the same root"
                    )
            if not 0 <= first[4] < len(members):
                fail(f"collective #{k} on {comm}, a {KIND_NAMES[first[1]]}, has root {first[4]}, not a rank of "
                     f"its {len(members)} ({first[3]})")
            node = len(node_bytes)
            node_bytes.append(max(ranks[m].collectives[i][2] for m, i in entries))
            node_comm.append(cword)
            node_members.append(entries)
            # Ties between ready collectives go to the earlier k, then the earlier communicator,
            # so a trace whose collectives all run on the whole job numbers them 0, 1, 2, ...
            node_key.append((k, order, node))
            for m, i in entries:
                node_of[m][i] = node

    # Number the collectives: one is ready once it is the next of each of its members.
    sequences = [sorted(node_of[r]) for r in range(n)]  # per rank: its collectives with traffic
    heads = [0] * n
    waiting = [0] * len(node_bytes)
    ready: list[tuple[int, int, int]] = []

    def arrive(rank: int) -> None:
        if heads[rank] < len(sequences[rank]):
            node = node_of[rank][sequences[rank][heads[rank]]]
            waiting[node] += 1
            if waiting[node] == len(node_members[node]):
                heapq.heappush(ready, node_key[node])

    for r in range(n):
        arrive(r)
    seq = 0
    while ready:
        node = heapq.heappop(ready)[2]
        for m, i in node_members[node]:
            out[m][i] = (node_bytes[node], node_comm[node] | seq << 32)
            heads[m] += 1
            arrive(m)
        seq += 1
    if seq < len(node_bytes):
        # Stuck: some rank's next collective waits for a member whose next one is another.
        r = next(r for r in range(n) if heads[r] < len(sequences[r]))
        node = node_of[r][sequences[r][heads[r]]]
        m = next(m for m, _ in node_members[node] if node_of[m][sequences[m][heads[m]]] != node)
        mine = ranks[r].collectives[sequences[r][heads[r]]]
        theirs = ranks[m].collectives[sequences[m][heads[m]]]
        fail(
            f"rank {r} calls {KIND_NAMES[mine[1]]} on {mine[0]} ({mine[3]}) while rank {m}, a member of it, "
            f"first calls {KIND_NAMES[theirs[1]]} on {theirs[0]} ({theirs[3]}): the ranks call collectives on "
            "overlapping communicators in orders that can deadlock, which MPI forbids"
        )
    return out, table



# The longest compute gap a program may hold: the longest run the engine simulates (run.duration_us
# at most 2^55 ps, about 10 hours); beyond it a trace's timestamps are not a run's.
MAX_COMPUTE_PS = 2**55


def _check_sizes(programs: list[list[tuple[int, int, int, int]]], fail: Fail) -> None:
    """Message sizes and compute gaps the engine can take, as built-in workloads are bounded: a
    trace's byte count of 2^40 had the engine allocate its packets until the machine ran out."""
    ranks = len(programs)
    for r, program in enumerate(programs):
        for code, a, b, _ in program:
            if code in (Code.ISEND, Code.PUT, Code.GET) and b >= MAX_MESSAGE_BYTES:
                fail(f"rank {r}: a message of {b} bytes, beyond the {MAX_MESSAGE_BYTES} (2^39) the engine takes")
            # A collective can put a block of every rank into one message, as for built-in jobs.
            if code == Code.COLLECTIVE and b * ranks >= MAX_MESSAGE_BYTES:
                fail(f"rank {r}: a {KIND_NAMES[a & 0xFFFFFFFF]} of {b} bytes x {ranks} ranks, beyond the "
                     f"{MAX_MESSAGE_BYTES} (2^39) bytes the engine takes in one message")
            if code == Code.COMPUTE and a >= MAX_COMPUTE_PS:
                fail(f"rank {r}: a compute gap of {a / 1e12:.4g} s between MPI calls, beyond the longest run "
                     f"qoslab simulates ({MAX_COMPUTE_PS / 1e12:.4g} s): are the trace's timestamps right?")


def assemble(
    ranks: list[RankProgram],
    fmt: str,
    path: str,
    skipped: Counter[str],
    approximated: Counter[str],
    fail: Fail,
) -> PackedProgram:
    """Cross-rank checks (collectives, iteration markers), then the packed arrays."""
    n = len(ranks)

    def fail_here(message: str) -> NoReturn:
        fail(f"{path}: {message}")

    coll_ops, table = _match_collectives(ranks, fail_here)
    # Matching contexts, one per communicator (compared by identity: a dup has its own).
    contexts: dict[object, int] = {}

    def context_of(comm: object) -> int:
        return contexts.setdefault(comm, len(contexts))

    programs = [rk.finish(ops, context_of) for rk, ops in zip(ranks, coll_ops, strict=True)]
    markers = [sum(1 for op in p if op[0] == Code.ITERATION_END) for p in programs]
    if len(set(markers)) > 1:
        r = next(i for i in range(n) if markers[i] != markers[0])
        fail_here(
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
            for p, t in zip(programs, trailing, strict=True):
                if not t:
                    p.append((Code.ITERATION_END, 0, 0, 0))
    _check_sizes(programs, fail_here)
    offsets = np.zeros(n + 1, dtype="<u8")
    offsets[1:] = np.cumsum([len(p) for p in programs], dtype=np.uint64)
    total = int(offsets[-1])
    words = np.zeros(4 * total, dtype="<u8")
    if total:
        words[:] = np.array([v for p in programs for op in p for v in op], dtype=np.uint64)
    comm_offsets, comm_members = table.arrays()
    return PackedProgram(
        ranks=n,
        offsets=offsets,
        words=words,
        format=fmt,
        path=path,
        iterations=iterations,
        skipped=dict(sorted(skipped.items())),
        approximated=dict(sorted(approximated.items())),
        comm_offsets=comm_offsets,
        comm_members=comm_members,
    )
