"""OTF2 (as Score-P writes it) -> rank programs, through the ``otf2`` package.

Ranks are the locations of the MPI locations group; communicators come from the definitions,
each with its group of members, so peers given relative to a communicator map to job ranks and
collectives run on their own members. Errors name the anchor file, the rank (its location) and
the event's index among that location's events.
"""

from __future__ import annotations

import contextlib
import io
import re
from collections import Counter
from fractions import Fraction
from pathlib import Path
from typing import Any

from qoslab.errors import ScenarioError
from qoslab.extras import require
from qoslab.io.traces.calls import INIT_CALLS, is_local
from qoslab.io.traces.communicators import Communicator
from qoslab.io.traces.pack import Fail, assemble
from qoslab.io.traces.program import (
    COLLECTIVE_KINDS,
    SEND_MODES,
    TAG_LIMIT,
    Code,
    PackedProgram,
    RankProgram,
    Request,
    SendMode,
)


class _Otf2Rank:
    __slots__ = ("blocking", "events", "last_leave", "produced", "rank", "requests", "stack")

    def __init__(self, rank: RankProgram):
        self.rank = rank
        self.stack: list[str] = []
        self.last_leave: int | None = None
        self.produced = False
        self.blocking: list[Request] = []  # blocking sends/receives: waited for when the call returns
        self.requests: dict[int, Request] = {}
        self.events = 0  # this location's events read so far


def _callback_error(printed: io.StringIO) -> str:
    """The exception the otf2 package printed for a reader callback's error, if any: the last line
    naming one (sys.stderr is redirected for the whole process meanwhile, so a progress line drawn
    by another thread may be among what was printed)."""
    errors = [line.strip() for line in printed.getvalue().splitlines() if _EXCEPTION_LINE.match(line.strip())]
    return f"; {errors[-1]}" if errors else ""


_EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Interrupt)\b.*:")


def read_otf2(p: Path, speed: Fraction, fail: Fail) -> PackedProgram:
    otf2 = require("otf2", "reading OTF2 traces")  # here, so that the rest of the package loads without it
    from otf2.enums import CollectiveOp, GroupType, Paradigm  # type: ignore[import-untyped]

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

    # The otf2 package prints a traceback to stderr for an error in one of its reader callbacks
    # (a damaged definitions file), then fails with a generic error: keep the print for the message.
    printed = io.StringIO()
    quiet = contextlib.ExitStack()  # closed where a failure is raised and at the end: closing twice does nothing
    quiet.enter_context(contextlib.redirect_stderr(printed))
    try:
        reader_cm = otf2.reader.open(str(anchor))
        reader = reader_cm.__enter__()
    except Exception as e:  # noqa: BLE001 - the otf2 package raises its own error types on bad archives
        quiet.close()
        fail(f"{anchor}: not a readable OTF2 archive ({e}{_callback_error(printed)})")

    skipped: Counter[str] = Counter()
    approximated: Counter[str] = Counter()
    try:
        defs = reader.definitions
        res = int(defs.clock_properties.timer_resolution)
        if res <= 0:
            fail(f"{anchor}: the trace's timer resolution is {res}")
        ps_per_tick = Fraction(10**12, res) / speed

        # The ranks: the MPI locations group lists the location of rank i at position i.
        world_locations: list[Any] = []
        for g in defs.groups:
            if g.group_type == GroupType.COMM_LOCATIONS and g.paradigm == Paradigm.MPI:
                world_locations = list(g.members)
                break
        if not world_locations:
            fail(f"{anchor}: the trace has no MPI ranks (no MPI locations group); was it recorded from an MPI program?")
        rank_of = {loc: r for r, loc in enumerate(world_locations)}
        nranks = len(world_locations)
        comm_index = {c: i for i, c in enumerate(defs.comms)}
        comm_cache: dict[Any, Communicator | None] = {}

        def comm_of(comm: Any) -> Communicator | None:
            """The communicator of a definition (None: MPI_COMM_SELF or another one-rank one)."""
            if comm in comm_cache:
                return comm_cache[comm]
            label = f"communicator {comm.name!r}" if comm.name else f"communicator #{comm_index.get(comm, '?')} of the definitions"
            g = getattr(comm, "group", None)
            if g is None:
                fail(f"{anchor}: {label} has no group (inter-communicators are not supported)")
            members: Communicator | None = None
            if g.group_type != GroupType.COMM_SELF:
                # The otf2 package gives a communicator group's members as locations.
                ranks = [rank_of.get(loc) for loc in g.members]
                if any(r is None for r in ranks):
                    fail(f"{anchor}: {label} has a member that is not an MPI rank")
                if len(set(ranks)) != len(ranks):
                    fail(f"{anchor}: {label} lists a rank twice")
                members = Communicator(tuple(r for r in ranks if r is not None), label)
            comm_cache[comm] = members
            return members

        states = [_Otf2Rank(RankProgram(ps_per_tick)) for _ in range(nranks)]

        def at(me: int, what: str, ev: Any) -> str:
            loc = world_locations[me]
            return f"{anchor}: rank {me} (location {getattr(loc, 'name', loc)!r}), event #{states[me].events} ({what} at time {ev.time})"

        def member_of(me: int, comm: Any, what: str, ev: Any) -> Communicator | None:
            c = comm_of(comm)
            if c is not None and me not in c.members:
                fail(f"{at(me, what, ev)}: rank {me} is not a member of {c}")
            return c

        def peer_of(me: int, comm: Any, r: int, what: str, ev: Any) -> int:
            c = member_of(me, comm, what, ev)
            if c is None:
                if r != 0:
                    fail(f"{at(me, what, ev)}: peer {r} on MPI_COMM_SELF")
                return me
            if not 0 <= r < len(c.members):
                fail(f"{at(me, what, ev)}: peer {r} is not in {c}, which has {len(c.members)} ranks")
            return c.members[r]

        def context(me: int, comm: Any) -> Communicator | tuple[str, int]:
            """What names a message's communicator for matching (MPI_COMM_SELF: the rank's own)."""
            return comm_of(comm) or ("MPI_COMM_SELF", me)

        def mode_of(st: _Otf2Rank) -> int:
            """The send mode of the MPI call the send event is in (its region: MPI_Ssend, ...)."""
            return SEND_MODES.get(st.stack[0], SendMode.STANDARD) if st.stack else SendMode.STANDARD

        def check_tag(me: int, tag: int, what: str, ev: Any) -> int:
            if not 0 <= tag < TAG_LIMIT:
                fail(f"{at(me, what, ev)}: tag {tag} is out of range (below 2^31)")
            return tag

        for loc, ev in reader.events:
            me = rank_of.get(loc)
            if me is None:
                continue  # a non-MPI location (e.g. an OpenMP thread): its events are not replayed
            st = states[me]
            st.events += 1
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
                    if region.name == "MPI_Finalize":
                        rk.finalize()
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
                    if region.name in INIT_CALLS:
                        rk.init_returned()
                    if not st.produced and not is_local(region.name):
                        skipped[region.name] += 1
            elif kind == "MpiSend":
                peer = peer_of(me, ev.communicator, ev.receiver, "MpiSend", ev)
                st.blocking.append(rk.isend(peer, ev.msg_length, check_tag(me, ev.msg_tag, "MpiSend", ev), context(me, ev.communicator),
                                            mode_of(st)))
                st.produced = True
            elif kind == "MpiIsend":
                peer = peer_of(me, ev.communicator, ev.receiver, "MpiIsend", ev)
                st.requests[ev.request_id] = rk.isend(
                    peer, ev.msg_length, check_tag(me, ev.msg_tag, "MpiIsend", ev), context(me, ev.communicator), mode_of(st)
                )
                st.produced = True
            elif kind == "MpiIsendComplete":
                done = st.requests.pop(ev.request_id, None)
                if done is not None:
                    rk.wait(done)
                st.produced = True
            elif kind == "MpiIrecvRequest":
                st.requests[ev.request_id] = rk.irecv(None, None, None)
                st.produced = True
            elif kind == "MpiIrecv":
                peer = peer_of(me, ev.communicator, ev.sender, "MpiIrecv", ev)
                tag = check_tag(me, ev.msg_tag, "MpiIrecv", ev)
                posted = st.requests.pop(ev.request_id, None)
                if posted is None or posted.op is None or posted.op[0] != Code.IRECV:
                    # No MpiIrecvRequest was recorded: post the receive where it completed.
                    posted = rk.irecv(peer, tag, context(me, ev.communicator))
                    approximated["MPI_Irecv without MpiIrecvRequest"] += 1
                else:
                    posted.op[1], posted.op[3], posted.op[5] = peer, tag, context(me, ev.communicator)
                rk.wait(posted)
                st.produced = True
            elif kind == "MpiRecv":
                peer = peer_of(me, ev.communicator, ev.sender, "MpiRecv", ev)
                st.blocking.append(rk.irecv(peer, check_tag(me, ev.msg_tag, "MpiRecv", ev), context(me, ev.communicator)))
                st.produced = True
            elif kind == "MpiRequestCancelled":
                cancelled = st.requests.pop(ev.request_id, None)
                if cancelled is not None:
                    cancelled.dropped = True
                st.produced = True
            elif kind == "MpiCollectiveEnd":
                where = st.stack[0] if st.stack else str(ev.collective_op)
                mapped = coll_map.get(ev.collective_op)
                if mapped is None:
                    continue  # the call is counted as skipped when it returns (nothing produced)
                name, how = mapped
                comm = member_of(me, ev.communicator, where, ev)
                st.produced = True
                if comm is None:
                    continue  # a collective on MPI_COMM_SELF: no traffic
                if how == "approx":
                    approximated[where] += 1
                n = max(1, len(comm.members))
                sent, recvd = int(ev.size_sent), int(ev.size_received)
                if name == "barrier":
                    nbytes = 0
                elif name == "bcast":
                    nbytes = recvd
                elif ev.collective_op in (CollectiveOp.REDUCE, CollectiveOp.REDUCE_SCATTER, CollectiveOp.REDUCE_SCATTER_BLOCK):
                    nbytes = sent
                elif (ev.collective_op in (CollectiveOp.ALLREDUCE, CollectiveOp.ALLTOALL, CollectiveOp.ALLGATHER)
                      and n > 1 and sent % n and not sent % (n - 1)):
                    # MPI_IN_PLACE: Score-P counts n - 1 blocks then (scorep_mpi_coll_bytes_alltoall,
                    # which allreduce and allgather share), and n blocks always divide by n.
                    nbytes = sent // (n - 1)
                else:  # allreduce, alltoall(v/w), allgather(v): Score-P counts n blocks sent
                    nbytes = -(-sent // n)
                root = int(ev.root) if name in ("bcast", "reduce") else 0  # the root's rank in the communicator
                rk.collective(comm, COLLECTIVE_KINDS[name], nbytes, f"{where}, event #{st.events} at time {ev.time}", root)
            # Other events (MpiCollectiveBegin, MpiRequestTest, RMA, metrics, ...) produce nothing.
        for st in states:
            for req in st.requests.values():
                if req.op is not None and req.op[0] == Code.IRECV and req.op[1] is None:
                    skipped["MPI_Irecv never completed"] += 1
    except ScenarioError:
        raise
    except Exception as e:  # noqa: BLE001 - whatever the otf2 package raises on a damaged archive
        quiet.close()
        fail(f"{anchor}: cannot read the OTF2 events ({type(e).__name__}: {e}{_callback_error(printed)})")
    finally:
        try:
            reader_cm.__exit__(None, None, None)
        except Exception:  # noqa: BLE001, S110 - closing a reader that already failed; the error above is what matters
            pass
        quiet.close()

    return assemble([st.rank for st in states], "otf2", str(anchor), skipped, approximated, fail)
