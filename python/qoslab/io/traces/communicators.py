"""Communicators: who the members are, in which order, so that ranks given relative to a
communicator become job ranks and collectives run on their own members.

OTF2 lists every communicator's members in its definitions. DUMPI records only each rank's own
handles, so the members are rebuilt here from the calls that made them: every rank of a parent
communicator calls its constructors (``MPI_Comm_dup``, ``MPI_Comm_split``, ``MPI_Comm_create``,
``MPI_Cart_create``, ``MPI_Cart_sub``, ``MPI_Graph_create``) together and in the same order
(MPI's rule), so the k-th constructor one member calls on it is the k-th of every other member.
Each rank's view of a communicator is a :class:`CommView`; :func:`rebuild` matches the views
across ranks and gives each one its :class:`Communicator`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from qoslab.io.traces.program import ranges


@dataclass(eq=False)
class Communicator:
    """A communicator as the whole trace knows it: its members (job ranks, in communicator rank
    order) and how errors name it. Compared by identity: two communicators with the same members
    (a dup) keep their own sequence of collectives. ``dims``: a Cartesian topology's dimensions."""

    members: tuple[int, ...]
    name: str
    dims: tuple[int, ...] | None = None

    def __str__(self) -> str:
        return f"{self.name} (ranks {ranges(sorted(self.members))})"


# Constructors whose members are rebuilt; others (inter-communicators, dynamic processes) are
# matched across ranks like them, but what they make cannot be used.
SUPPORTED = {"MPI_Comm_dup", "MPI_Comm_split", "MPI_Comm_create", "MPI_Cart_create", "MPI_Cart_sub", "MPI_Graph_create"}
PREDEFINED = {"MPI_COMM_WORLD", "MPI_COMM_SELF"}


class CommView:
    """A communicator as one rank's trace shows it: the call that made it (or MPI_COMM_WORLD,
    MPI_COMM_SELF), its parent, the call's arguments, where the call is, and the constructors this
    rank later called on it. After :func:`rebuild`, ``comm`` is its communicator (None: the rank
    got MPI_COMM_NULL) and ``rebuilt`` says whether the matching reached it."""

    __slots__ = ("args", "call", "children", "comm", "handle", "is_null", "parent", "rank", "rebuilt", "where")

    def __init__(
        self,
        rank: int,
        call: str,
        where: str,
        parent: CommView | None = None,
        args: tuple[Any, ...] = (),
        handle: int | None = None,
        is_null: bool = False,
    ):
        self.rank = rank
        self.call = call
        self.where = where
        self.parent = parent
        self.args = args
        self.handle = handle
        self.is_null = is_null  # the trace records MPI_COMM_NULL as the new handle
        self.children: list[CommView] = []
        self.comm: Communicator | None = None
        self.rebuilt = False
        if parent is not None:
            parent.children.append(self)

    @property
    def usable(self) -> bool:
        """Whether the members of what it makes can be rebuilt at all."""
        v: CommView | None = self
        while v is not None:
            if v.call not in SUPPORTED and v.call not in PREDEFINED:
                return False
            v = v.parent
        return True

    def origin(self) -> str:
        """The call that made it (or, for one made from an unusable one, that call)."""
        v: CommView | None = self
        while v is not None:
            if v.call not in SUPPORTED and v.call not in PREDEFINED:
                return f"{v.call} ({v.where})"
            v = v.parent
        return self.call if self.call in PREDEFINED else f"{self.call} ({self.where})"

    def __str__(self) -> str:
        if self.call in PREDEFINED:
            return self.call
        return f"communicator {self.handle} made by {self.call} at {self.where}"


class RebuildError(Exception):
    """Bad input found while rebuilding; the message names file, line and communicator."""


class GroupView:
    """An MPI group on one rank: from a communicator (``MPI_Comm_group``) or made from other
    groups (``MPI_Group_incl``, ``excl``, ``union``, ``intersection``, ``difference``)."""

    __slots__ = ("call", "handle", "ranks", "sources", "where")

    def __init__(self, call: str, where: str, sources: tuple[CommView | GroupView, ...] = (), ranks: tuple[int, ...] = (), handle: int | None = None):
        self.call = call
        self.where = where
        self.sources = sources
        self.ranks = ranks
        self.handle = handle

    def __str__(self) -> str:
        return f"group {self.handle} made by {self.call} at {self.where}"

    def members(self) -> tuple[int, ...] | None:
        """Job ranks in group order; None while a communicator it comes from is not rebuilt yet.
        Raises :class:`RebuildError` when it can never be known or a rank is out of range."""
        if self.call == "MPI_GROUP_EMPTY":
            return ()
        if self.call == "MPI_Comm_group":
            view = self.sources[0]
            assert isinstance(view, CommView)
            if not view.usable:
                raise RebuildError(f"{self.where}: MPI_Comm_group of {view}, whose members cannot be rebuilt ({view.origin()} is not supported)")
            if not view.rebuilt:
                return None
            if view.comm is None:
                raise RebuildError(f"{self.where}: MPI_Comm_group of {view}, which is MPI_COMM_NULL on this rank")
            return view.comm.members
        inputs = []
        for g in self.sources:
            assert isinstance(g, GroupView)
            m = g.members()
            if m is None:
                return None
            inputs.append(m)
        if self.call in ("MPI_Group_incl", "MPI_Group_excl"):
            (group,) = inputs
            bad = [r for r in self.ranks if not 0 <= r < len(group)]
            if bad:
                raise RebuildError(
                    f"{self.where}: {self.call}: rank {bad[0]} is not in {self.sources[0]}, which has "
                    f"{len(group)} rank{'s' if len(group) != 1 else ''} (0..{len(group) - 1})"
                )
            if len(set(self.ranks)) != len(self.ranks):
                raise RebuildError(f"{self.where}: {self.call}: a rank is listed twice in {list(self.ranks)}")
            if self.call == "MPI_Group_incl":
                return tuple(group[r] for r in self.ranks)
            gone = set(self.ranks)
            return tuple(m for i, m in enumerate(group) if i not in gone)
        a, b = inputs
        if self.call == "MPI_Group_union":
            return a + tuple(m for m in b if m not in set(a))
        if self.call == "MPI_Group_intersection":
            return tuple(m for m in a if m in set(b))
        if self.call == "MPI_Group_difference":
            return tuple(m for m in a if m not in set(b))
        raise RebuildError(f"{self.where}: {self.call} is not supported: the groups it makes cannot be rebuilt")


# A new communicator: its members and, for a Cartesian one, its dimensions.
Part = tuple[tuple[int, ...], tuple[int, ...] | None]


class _Pending:
    """A rebuilt communicator whose members' constructor calls are matched from index ``k`` on."""

    __slots__ = ("comm", "k", "views")

    def __init__(self, comm: Communicator, views: dict[int, CommView]):
        self.comm = comm
        self.views = views  # member -> its view
        self.k = 0


def rebuild(worlds: list[CommView], selves: list[CommView]) -> None:
    """Matches every rank's constructor calls across ranks, from each rank's MPI_COMM_WORLD and
    MPI_COMM_SELF down, and sets ``comm`` and ``rebuilt`` on each view reached. Raises
    :class:`RebuildError` for a trace whose communicators cannot be rebuilt."""
    n = len(worlds)
    world = Communicator(tuple(range(n)), "MPI_COMM_WORLD")
    todo: list[_Pending] = [_Pending(world, dict(enumerate(worlds)))]
    for r, v in enumerate(selves):
        todo.append(_Pending(Communicator((r,), f"MPI_COMM_SELF of rank {r}"), {r: v}))
    for p in todo:
        for v in p.views.values():
            v.comm, v.rebuilt = p.comm, True
        _check_counts(p)
    # A communicator is matched call by call; an MPI_Comm_create waits until the communicator its
    # group comes from is rebuilt, which another communicator's calls may do first.
    while todo:
        still: list[_Pending] = []
        progressed = False
        first_stuck: RebuildError | None = None
        for p in todo:
            k = p.k
            new, stuck = _advance(p)
            progressed = progressed or bool(new) or p.k > k
            for q in new:
                for v in q.views.values():
                    v.comm, v.rebuilt = q.comm, True
                _check_counts(q)
                if any(v.children for v in q.views.values()):
                    still.append(q)
            if stuck is not None:
                still.append(p)
                first_stuck = first_stuck or stuck
        if not progressed and first_stuck is not None:
            raise first_stuck
        todo = still


def _check_counts(p: _Pending) -> None:
    counts = {m: len(v.children) for m, v in p.views.items()}
    most = max(counts.values())
    if min(counts.values()) == most:
        return
    a = next(m for m in p.comm.members if counts[m] == most)
    b = next(m for m in p.comm.members if counts[m] != most)
    extra = p.views[a].children[counts[b]]
    raise RebuildError(
        f"{extra.where}: {extra.call} on {p.comm}: rank {a} calls {most} communicator constructor"
        f"{'s' if most != 1 else ''} on it but rank {b} calls {counts[b]}: every rank of a communicator "
        "calls them together, in the same order"
    )


def _advance(p: _Pending) -> tuple[list[_Pending], RebuildError | None]:
    """Matches p's constructor calls from p.k on, until done or one waits on a group that is not
    known yet (returned as the error to raise if it never will be)."""
    members = p.comm.members
    made: list[_Pending] = []
    total = len(p.views[members[0]].children)
    while p.k < total:
        calls = [(m, p.views[m].children[p.k]) for m in members]
        first_rank, first = calls[0]
        for m, c in calls[1:]:
            if c.call != first.call:
                raise RebuildError(
                    f"{c.where}: communicator constructor #{p.k} on {p.comm} is {c.call} on rank {m} but "
                    f"{first.call} on rank {first_rank} ({first.where}): every rank of a communicator calls "
                    "them together, in the same order"
                )
        call = first.call
        parts: list[Part] = []  # an unsupported constructor makes nothing usable (errors name it when used)
        if call == "MPI_Comm_create":
            groups: dict[int, tuple[int, ...]] = {}
            for m, c in calls:
                g = c.args[0]
                assert isinstance(g, GroupView)
                try:
                    got = g.members()
                except RebuildError as e:
                    raise RebuildError(f"{e} (the group of MPI_Comm_create on {p.comm} at {c.where})") from None
                if got is None:
                    return made, RebuildError(f"{c.where}: MPI_Comm_create on {p.comm}: the members of {g} cannot be rebuilt")
                groups[m] = got
            parts = _create_parts(p, calls, groups)
        elif call in SUPPORTED:
            parts = _parts(p, call, calls)
        name_of = dict(calls)
        for new_members, dims in parts:
            origin = name_of[new_members[0]]
            comm = Communicator(new_members, f"communicator {origin.handle} made by {call} at {origin.where}", dims)
            made.append(_Pending(comm, {m: name_of[m] for m in new_members}))
        placed = {m for part, _ in parts for m in part}
        for m, c in calls:
            if m not in placed:
                c.rebuilt, c.comm = c.usable, None
            if c.usable and c.is_null != (m not in placed):
                gets = "MPI_COMM_NULL" if c.is_null else f"communicator {c.handle}"
                raise RebuildError(
                    f"{c.where}: {call} on {p.comm}: rank {m} gets {gets} in the trace, but the other ranks' "
                    f"calls {'place it in a new communicator' if c.is_null else 'leave it out of every new one'}"
                )
        p.k += 1
    return made, None


def _parts(p: _Pending, call: str, calls: list[tuple[int, CommView]]) -> list[Part]:
    """The communicators a dup, split or topology constructor makes: (members, dims)."""
    members = p.comm.members
    size = len(members)
    if call == "MPI_Comm_dup":
        return [(members, p.comm.dims)]
    if call == "MPI_Comm_split":
        by_color: dict[int, list[tuple[int, int, int]]] = {}
        for pos, (m, c) in enumerate(calls):
            color, key = c.args
            assert isinstance(color, int) and isinstance(key, int)
            if color >= 0:  # negative: MPI_UNDEFINED (colors are non-negative otherwise)
                by_color.setdefault(color, []).append((key, pos, m))
        return [(tuple(m for _, _, m in sorted(v)), None) for _, v in sorted(by_color.items())]
    if call in ("MPI_Cart_create", "MPI_Graph_create"):
        shapes = {c.args for _, c in calls}
        if len(shapes) > 1:
            raise RebuildError(f"{calls[0][1].where}: {call} on {p.comm}: the ranks give different shapes ({sorted(shapes)})")
        c0 = calls[0][1]
        if call == "MPI_Cart_create":
            dims = tuple(int(d) for d in c0.args)
            nodes = math.prod(dims)
        else:
            dims, nodes = None, int(c0.args[0])
        if not 0 <= nodes <= size:
            raise RebuildError(f"{c0.where}: {call} on {p.comm}: the topology has {nodes} ranks, more than the communicator's {size}")
        # Ranks keep their order (as without reorder); ranks beyond the topology get MPI_COMM_NULL.
        return [(members[:nodes], dims)] if nodes else []
    # MPI_Cart_sub: ranks with the same coordinates in the dropped dimensions share a communicator.
    dims = p.comm.dims
    c0 = calls[0][1]
    if dims is None:
        raise RebuildError(f"{c0.where}: MPI_Cart_sub on {p.comm}, which has no Cartesian topology")
    remains = {c.args for _, c in calls}
    if len(remains) > 1 or len(c0.args) != len(dims):
        raise RebuildError(f"{c0.where}: MPI_Cart_sub on {p.comm}: remain_dims must list each of its {len(dims)} dimensions, the same on every rank")
    keep = [bool(x) for x in c0.args]
    strides = [math.prod(dims[i + 1 :]) for i in range(len(dims))]
    subs: dict[tuple[int, ...], list[int]] = {}
    for pos, m in enumerate(members):
        color = tuple((pos // strides[i]) % dims[i] for i in range(len(dims)) if not keep[i])
        subs.setdefault(color, []).append(m)
    sub_dims = tuple(d for d, k in zip(dims, keep, strict=True) if k)
    return [(tuple(v), sub_dims) for _, v in sorted(subs.items())]


def _create_parts(p: _Pending, calls: list[tuple[int, CommView]], groups: dict[int, tuple[int, ...]]) -> list[Part]:
    """MPI_Comm_create: each rank in its own group joins the communicator of that group's ranks;
    the ranks of one group must all pass it."""
    inside = set(p.comm.members)
    out: list[Part] = []
    seen: set[tuple[int, ...]] = set()
    view_of = dict(calls)
    for m, _ in calls:
        g = groups[m]
        outside = [x for x in g if x not in inside]
        if outside:
            raise RebuildError(f"{view_of[m].where}: MPI_Comm_create on {p.comm}: its group holds rank {outside[0]}, which is not in the communicator")
        if m not in g or g in seen:
            continue
        for x in g:
            if groups[x] != g:
                raise RebuildError(
                    f"{view_of[x].where}: MPI_Comm_create on {p.comm}: rank {x} passes a group of ranks "
                    f"{ranges(sorted(groups[x])) or 'none'} but rank {m} passes one of ranks {ranges(sorted(g))} that holds it"
                )
        seen.add(g)
        out.append((g, None))
    return out
