"""DUMPI ASCII (the text ``dumpi2ascii`` prints, one file per rank) -> rank programs.

Each rank's file is read on its own; its communicators are the handles it used, so sends,
receives and collectives on them name views of communicators (:class:`CommView`) until every
rank is read. :func:`~qoslab.io.traces.communicators.rebuild` then gives each view its members,
and peers become job ranks. Errors name the file and the line.
"""

from __future__ import annotations

import itertools
import os
import re
from collections import Counter
from fractions import Fraction
from pathlib import Path
from typing import NoReturn

from qoslab.errors import ScenarioError
from qoslab.io.traces.calls import INIT_CALLS, is_local
from qoslab.io.traces.communicators import (
    Communicator,
    CommView,
    GroupView,
    RebuildError,
    rebuild,
)
from qoslab.io.traces.pack import Fail, assemble
from qoslab.io.traces.program import (
    ANY,
    COLLECTIVE_KINDS,
    SEND_MODES,
    TAG_LIMIT,
    Code,
    PackedProgram,
    RankProgram,
    Request,
    SendMode,
    ranges,
)

DUMPI_FILE = re.compile(r"^(?P<prefix>.+)-(?P<rank>\d+)\.txt$")
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





def glob_escape(s: str) -> str:
    return re.sub(r"([*?\[])", r"[\1]", s)


_BINARY = "binary DUMPI files cannot be read; convert each rank's .bin with dumpi2ascii to .txt"


def _binary_hint(folder: Path, prefix: str = "") -> str:
    """Where binary DUMPI rank files lie instead of dumpi2ascii text, what to do ('' if none)."""
    found = sorted(folder.glob(f"{glob_escape(prefix)}*.bin")) if folder.is_dir() else []
    return f"; {folder / found[0].name}: {_BINARY}" if found else ""


def _dumpi_files(p: Path, fail: Fail) -> tuple[str, dict[int, Path], int | None, Path]:
    """(prefix, {rank: file}, rank count from the .meta file or None, what to name in errors)."""
    if p.is_dir():
        found: dict[str, dict[int, Path]] = {}
        for f in p.glob("*.txt"):
            m = DUMPI_FILE.match(f.name)
            if m:
                found.setdefault(m["prefix"], {})[int(m["rank"])] = f
        if not found:
            fail(f"{p}: the folder holds no dumpi2ascii files (prefix-NNNN.txt){_binary_hint(p)}")
        if len(found) > 1:
            fail(f"{p}: the folder holds the files of several DUMPI traces ({', '.join(sorted(found))}); give one prefix")
        prefix = next(iter(found))
        prefix_path = p / prefix
    else:
        m = DUMPI_FILE.match(p.name)
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
        elif p.name.lower().endswith(".bin"):
            fail(f"{p}: {_BINARY}")
        else:
            prefix_path = p
    prefix = prefix_path.name
    files: dict[int, Path] = {}
    for f in prefix_path.parent.glob(f"{glob_escape(prefix)}-*.txt"):
        m = DUMPI_FILE.match(f.name)
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
        hint = _binary_hint(prefix_path.parent, f"{prefix}-")
        fail(f"{prefix_path}-NNNN.txt: no dumpi2ascii files found for this prefix{hint}")
    return prefix, files, meta_ranks, prefix_path


_HANDLE = re.compile(r"^\s*(-?\d+)\s*(?:\((?P<n>[^)]*)\))?")
_WORLD = "MPI_COMM_WORLD"
_SELF = "MPI_COMM_SELF"
# DUMPI's own handle numbers (dumpi/common/constants.h), the same in every trace.
_COMM_NULL, _COMM_WORLD, _COMM_SELF = 1, 2, 3
_GROUP_EMPTY = 2


def read_dumpi(p: Path, speed: Fraction, fail: Fail) -> PackedProgram:
    prefix, files, meta_ranks, prefix_path = _dumpi_files(p, fail)
    nranks = meta_ranks if meta_ranks is not None else max(files) + 1
    missing_count = nranks - sum(r < nranks for r in files)
    if missing_count:
        # Listed only when few: a .meta file may claim a billion ranks.
        missing = list(itertools.islice((r for r in range(nranks) if r not in files), 10_000))
        names = ", ".join(f"{prefix}-{r:04d}.txt" for r in missing[:8]) + (", ..." if missing_count > 8 else "")
        listed = ranges(missing) if len(missing) == missing_count else f"{ranges(missing)}, ..."
        fail(
            f"{prefix_path}: the trace has {nranks} ranks but the dumpi2ascii files of "
            f"{missing_count} are missing (ranks {listed}: {names}); convert every rank's "
            ".bin file with dumpi2ascii"
        )
    extra = [r for r in files if r >= nranks]
    if extra:
        fail(f"{prefix_path}: files for ranks {ranges(sorted(extra))} but the .meta file says {nranks} ranks")
    ps_per_ns = Fraction(1000) / speed
    skipped: Counter[str] = Counter()
    approximated: Counter[str] = Counter()
    ranks = [_DumpiRank(r, nranks, files[r], ps_per_ns, skipped, approximated, fail).read() for r in range(nranks)]
    try:
        rebuild([d.world for d in ranks], [d.self_view for d in ranks])
    except RebuildError as e:
        fail(str(e))
    for d in ranks:
        d.resolve(fail)
    return assemble([d.rank for d in ranks], "dumpi", str(prefix_path), skipped, approximated, fail)


def read_dumpi_rank(
    path: str | os.PathLike[str], rank: int, ranks: int, cpu_speedup: float = 1.0
) -> tuple[list[tuple[int, int, int, int]], dict[str, int]]:
    """One rank's dumpi2ascii file on its own: its ops (collective sizes as this rank reports them,
    not reconciled with the other ranks) and the calls it skipped. For looking at a trace whose
    other ranks are not at hand; a job needs :func:`~qoslab.io.traces.read_trace`. Traffic on
    communicators other than MPI_COMM_WORLD and MPI_COMM_SELF needs the other ranks: an error."""
    skipped: Counter[str] = Counter()

    def fail(message: str) -> NoReturn:
        raise ScenarioError([("", message)])

    d = _DumpiRank(rank, ranks, Path(path), Fraction(1000) / Fraction(float(cpu_speedup)), skipped, Counter(), fail).read()
    own = (d.world, d.self_view)
    others = [p.where for p in d.peers] + [c[3] for c in d.rank.collectives if c[0] is not d.world]
    others += [op[5].where for op in d.rank.ops if op[0] in (Code.ISEND, Code.IRECV) and op[5].view not in own]
    if others:
        fail(f"{others[0]}: a communicator other than MPI_COMM_WORLD and MPI_COMM_SELF: its members need the other ranks' files (use read_trace)")

    def context_of(ref: _CommRef) -> int:
        return own.index(ref.view)  # MPI_COMM_WORLD's context is 0, MPI_COMM_SELF's 1

    # Alone, the rank's k-th collective is the job's k-th.
    return d.rank.finish([(c[2], k << 32) for k, c in enumerate(d.rank.collectives)], context_of), dict(sorted(skipped.items()))


class _Record:
    __slots__ = ("line", "name", "params", "start")

    def __init__(self, name: str, line: int, start: int):
        self.name = name
        self.line = line
        self.start = start
        self.params: dict[str, tuple[str, str, int]] = {}  # name -> (type, value, line)




class _DumpiRank:
    """Reads one rank's dumpi2ascii file."""

    def __init__(
        self, rank: int, nranks: int, path: Path, ps_per_ns: Fraction, skipped: Counter[str], approximated: Counter[str], fail: Fail
    ):
        self.me = rank
        self.n = nranks
        self.path = path
        self.rank = RankProgram(ps_per_ns)
        self.skipped = skipped
        self.approximated = approximated
        self._fail = fail
        self.type_sizes: dict[int, int] = {}
        self.requests: dict[int, Request] = {}
        # Communicator and group handles as this rank's file uses them (DUMPI numbers them per
        # rank, and reuses a handle once it is freed).
        self.world = CommView(rank, _WORLD, str(path), handle=_COMM_WORLD)
        self.self_view = CommView(rank, _SELF, str(path), handle=_COMM_SELF)
        self.comms: dict[int, CommView] = {_COMM_WORLD: self.world, _COMM_SELF: self.self_view}
        self.groups: dict[int, GroupView] = {_GROUP_EMPTY: GroupView("MPI_GROUP_EMPTY", str(path), handle=_GROUP_EMPTY)}
        self.peers: list[_Peer] = []  # peers on communicators other than world and self
        self.checks: list[tuple[CommView, str, int, int]] = []  # (view, "rank" or "size", value, line)
        self.last_return: int | None = None

    # -- errors ---------------------------------------------------------------------------------

    def fail(self, line: int, message: str) -> NoReturn:
        self._fail(f"{self.path}, line {line}: {message}")

    # -- reading --------------------------------------------------------------------------------

    def read(self) -> _DumpiRank:
        try:
            text = self.path.read_text(errors="strict")
        except UnicodeDecodeError:
            self._fail(f"{self.path}: not a text file (binary DUMPI? convert it with dumpi2ascii)")
        except OSError as e:
            self._fail(f"{self.path}: cannot read ({e.strerror or e})")
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
                    if pm["name"] in rec.params and rec.name in _HANDLERS:  # which one would MPI have had?
                        self.fail(i, f"{pm['name']} given twice in the {rec.name} record that starts at line "
                                     f"{rec.line} (first at line {rec.params[pm['name']][2]})")
                    rec.params[pm["name"]] = (pm["type"], pm["value"], i)
                elif rec.name in _HANDLERS:
                    self.fail(i, f"malformed parameter line in the {rec.name} record that starts at line {rec.line}: {line[:80]!r}")
                # A line we cannot parse in a call we do not replay (e.g. a 2-D array): ignored.
                continue
            # Outside records: header lines (key=value) before the first record, a summary after.
            if not line.strip():
                continue
            if line.startswith("Total keyvals:") or (" called " in line and " times and ignored " in line):
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
        return self

    def record(self, rec: _Record, end: int, end_line: int) -> None:
        rk = self.rank
        if self.last_return is not None:
            rk.gap(rec.start - self.last_return)
        self.last_return = end
        if rec.name in INIT_CALLS:
            rk.init_returned()
        elif rec.name == "MPI_Finalize":
            rk.finalize()
        handler = _HANDLERS.get(rec.name)
        if handler is not None:
            handler(self, rec)
        elif not is_local(rec.name):
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
        tid = int(m.group(1))
        if tid in self.type_sizes:
            return self.type_sizes[tid]
        tname = m.group("n") or ""
        if tname in _TYPE_SIZES:
            return _TYPE_SIZES[tname]
        self.fail(line, f"{rec.name}: the size of datatype {tid} ({tname or 'unnamed'}) is unknown (the file's datatype size table does not list it)")

    def count_bytes(self, rec: _Record, count: str, dtype: str) -> int:
        c = self.int_param(rec, count)
        if c < 0:
            self.fail(self.param(rec, count)[2], f"{rec.name}: negative count {c}")
        return c * self.type_size(rec, dtype)


    def handle(self, rec: _Record, name: str, what: str) -> tuple[int, str, int]:
        """A handle parameter (``4 (user-defined-comm)``): (number, name in parentheses, line)."""
        _, value, line = self.param(rec, name)
        m = _HANDLE.match(value)
        if not m:
            self.fail(line, f"{rec.name}: parameter {name!r} is not {what}: {value[:60]!r}")
        return int(m.group(1)), m.group("n") or "", line

    def comm_view(self, rec: _Record, name: str = "comm") -> CommView:
        """The communicator a handle names here; unknown handles are errors."""
        cid, cname, line = self.handle(rec, name, "a communicator")
        if cname == _WORLD:
            return self.world
        if cname == _SELF:
            return self.self_view
        if cname == "MPI_COMM_NULL" or cid == _COMM_NULL:
            self.fail(line, f"{rec.name} on MPI_COMM_NULL")
        view = self.comms.get(cid)
        if view is None:
            self.fail(
                line,
                f"{rec.name}: communicator {cid} is unknown here: no call before this line made it "
                "(MPI_Comm_dup, MPI_Comm_split, MPI_Comm_create, MPI_Cart_create, MPI_Cart_sub, MPI_Graph_create), "
                "or MPI_Comm_free released it",
            )
        return view

    def usable_comm(self, rec: _Record, name: str = "comm") -> CommView:
        """A communicator whose members can be rebuilt (traffic on it is replayed)."""
        view = self.comm_view(rec, name)
        if not view.usable:
            self.fail(
                self.param(rec, name)[2],
                f"{rec.name} on {view}, whose members cannot be rebuilt ({view.origin()} is not supported)",
            )
        return view

    def group_view(self, rec: _Record, name: str = "group") -> GroupView:
        gid, gname, line = self.handle(rec, name, "a group")
        if gname == "MPI_GROUP_EMPTY":
            return self.groups[_GROUP_EMPTY]
        group = self.groups.get(gid)
        if group is None or gname == "MPI_GROUP_NULL":
            self.fail(
                line,
                f"{rec.name}: group {gid} is unknown here: no call before this line made it (MPI_Comm_group, "
                "MPI_Group_incl, excl, union, intersection, difference; MPI_Group_range_incl and excl are not "
                "read), or MPI_Group_free released it",
            )
        return group

    def where(self, rec: _Record) -> str:
        return f"{self.path}, line {rec.line}"

    def new_comm(self, rec: _Record, parent: CommView | None, args: tuple[object, ...] = ()) -> None:
        """A constructor's new communicator, bound to its handle unless it is MPI_COMM_NULL."""
        cid, cname, _ = self.handle(rec, "newcomm", "a communicator")
        null = cname == "MPI_COMM_NULL" or cid == _COMM_NULL
        view = CommView(self.me, rec.name, self.where(rec), parent, args, handle=cid, is_null=null)
        if not null:
            self.comms[cid] = view

    def new_group(self, rec: _Record, sources: tuple[CommView | GroupView, ...], ranks: tuple[int, ...] = ()) -> None:
        gid, _, _ = self.handle(rec, "newgroup" if "newgroup" in rec.params else "group", "a group")
        self.groups[gid] = GroupView(rec.name, self.where(rec), sources, ranks, handle=gid)

    def peer(self, rec: _Record, name: str, view: CommView, receive: bool) -> int | _Peer | None:
        """A job rank, ANY (receives only), a rank of another communicator to translate once the
        communicators are rebuilt, or None (MPI_PROC_NULL: no traffic)."""
        _, value, line = self.param(rec, name)
        r = self.int_param(rec, name)
        if receive and (r == -1 or "MPI_ANY_SOURCE" in value):
            return ANY
        if r < 0:
            return None  # MPI_PROC_NULL
        if view is self.self_view:
            if r != 0:
                self.fail(line, f"{rec.name}: rank {r} on MPI_COMM_SELF")
            return self.me
        if view is self.world:
            if r >= self.n:
                self.fail(line, f"{rec.name}: rank {r} is not a rank of the job (0..{self.n - 1})")
            return r
        peer = _Peer(view, r, f"{self.path}, line {line}: {rec.name}")
        self.peers.append(peer)
        return peer

    def tag(self, rec: _Record, name: str, receive: bool) -> int:
        _, value, line = self.param(rec, name)
        t = self.int_param(rec, name)
        if receive and (t == -1 or "MPI_ANY_TAG" in value):
            return ANY
        if not 0 <= t < TAG_LIMIT:
            self.fail(line, f"{rec.name}: tag {t} is out of range (0 to 2^31-1)")
        return t

    # -- ops ------------------------------------------------------------------------------------

    def send(self, rec: _Record, count: str, dtype: str, dest: str, tag: str, mode: int = SendMode.STANDARD) -> Request:
        view = self.usable_comm(rec)
        peer = self.peer(rec, dest, view, receive=False)
        nbytes = self.count_bytes(rec, count, dtype)
        t = self.tag(rec, tag, receive=False)
        if peer is None:
            return self.rank.null_request()
        return self.rank.isend(peer, nbytes, t, _CommRef(view, f"{self.path}, line {rec.line}: {rec.name}"), mode)

    def recv(self, rec: _Record, source: str, tag: str) -> Request:
        view = self.usable_comm(rec)
        peer = self.peer(rec, source, view, receive=True)
        t = self.tag(rec, tag, receive=True)
        if peer is None:
            return self.rank.null_request()
        return self.rank.irecv(peer, t, _CommRef(view, f"{self.path}, line {rec.line}: {rec.name}"))

    def issue(self, rec: _Record, req: Request) -> None:
        handle = self.request_param(rec, "request")
        if handle is not None:
            self.requests[handle] = req

    def complete(self, handle: int | None) -> None:
        if handle is None:
            return
        req = self.requests.pop(handle, None)
        if req is not None:  # unknown handles: MPI_REQUEST_NULL or requests of skipped calls
            self.rank.wait(req)


    def collective(self, rec: _Record, kind: str, nbytes: int, approx: bool = False, root: int = 0) -> None:
        view = self.usable_comm(rec)
        if view is self.self_view:
            return
        if approx:
            self.approximated[rec.name] += 1
        self.rank.collective(view, COLLECTIVE_KINDS[kind], nbytes, f"{rec.name} at {self.path}, line {rec.line}", root)

    # -- after every rank is read ---------------------------------------------------------------

    def resolve(self, fail: Fail) -> None:
        """Communicator-relative peers to job ranks, views to communicators; checks what the file
        says about its communicators (MPI_Comm_rank, MPI_Comm_size) against the rebuilt ones."""
        for peer in self.peers:
            comm = _rebuilt(peer.view, peer.where, fail)
            if not peer.rank < len(comm.members):
                fail(f"{peer.where}: rank {peer.rank} is not in {comm}, which has {len(comm.members)} ranks")
            peer.resolved = comm.members[peer.rank]
        for op in self.rank.ops:
            if isinstance(op[1], _Peer):
                op[1] = op[1].resolved
            if op[0] in (Code.ISEND, Code.IRECV):
                op[5] = _rebuilt(op[5].view, op[5].where, fail)
        for entry in self.rank.collectives:
            view = entry[0]
            if isinstance(view, CommView):
                entry[0] = _rebuilt(view, f"{entry[3]}", fail)
        for view, what, value, line in self.checks:
            if not (view.usable and view.rebuilt and view.comm is not None):
                continue
            members = view.comm.members
            got = members.index(self.me) if what == "rank" else len(members)
            if got != value:
                fail(
                    f"{self.path}, line {line}: MPI_Comm_{what} on {view} returns {value}, but the "
                    f"{view.call} calls of its ranks make it world ranks {list(members)} in that order, "
                    + (f"where this rank ({self.me}) is rank {got}" if what == "rank" else f"{got} ranks")
                    + ": the ranks' files do not describe the same communicator"
                )


class _CommRef:
    """The communicator of a send or receive, resolved once the communicators are rebuilt."""

    __slots__ = ("view", "where")

    def __init__(self, view: CommView, where: str):
        self.view = view
        self.where = where


class _Peer:
    """A rank of a communicator other than world and self, translated once it is rebuilt."""

    __slots__ = ("rank", "resolved", "view", "where")

    def __init__(self, view: CommView, rank: int, where: str):
        self.view = view
        self.rank = rank
        self.where = where
        self.resolved = -1


def _rebuilt(view: CommView, where: str, fail: Fail) -> Communicator:
    if view.comm is None:
        state = "is MPI_COMM_NULL on this rank" if view.rebuilt else "could not be matched with the other ranks' calls"
        fail(f"{where}: {view} {state}")
    return view.comm


def _ns(m: re.Match[str]) -> int:
    frac = m["ns"]
    # dumpi2ascii prints nanoseconds with 9 digits; be lenient with other widths.
    ns = int(frac[:9].ljust(9, "0"))
    return int(m["s"]) * 1_000_000_000 + ns


def _h_send(d: _DumpiRank, rec: _Record) -> None:
    d.rank.wait(d.send(rec, "count", "datatype", "dest", "tag", SEND_MODES.get(rec.name, SendMode.STANDARD)))


def _h_isend(d: _DumpiRank, rec: _Record) -> None:
    d.issue(rec, d.send(rec, "count", "datatype", "dest", "tag", SEND_MODES.get(rec.name, SendMode.STANDARD)))


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
    d.collective(rec, "bcast", d.count_bytes(rec, "count", "datatype"), root=d.int_param(rec, "root"))


def _h_reduce(d: _DumpiRank, rec: _Record) -> None:
    d.collective(rec, "reduce", d.count_bytes(rec, "count", "datatype"), root=d.int_param(rec, "root"))


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


# -- communicators and groups: rebuilt after every rank is read -----------------------------------


def _parent(d: _DumpiRank, rec: _Record) -> CommView:
    return d.comm_view(rec, "oldcomm" if "oldcomm" in rec.params else "comm")


def _h_comm_dup(d: _DumpiRank, rec: _Record) -> None:
    d.new_comm(rec, _parent(d, rec))


def _h_comm_split(d: _DumpiRank, rec: _Record) -> None:
    d.new_comm(rec, _parent(d, rec), (d.int_param(rec, "color"), d.int_param(rec, "key")))


def _h_comm_create(d: _DumpiRank, rec: _Record) -> None:
    d.new_comm(rec, _parent(d, rec), (d.group_view(rec, "group"),))


def _topology_reorder(d: _DumpiRank, rec: _Record) -> None:
    if "reorder" in rec.params and d.int_param(rec, "reorder"):
        d.approximated[f"{rec.name} with reorder (ranks kept in order)"] += 1


def _h_cart_create(d: _DumpiRank, rec: _Record) -> None:
    dims = d.int_list(rec, "dims") or []
    if any(x <= 0 for x in dims):
        d.fail(d.param(rec, "dims")[2], f"{rec.name}: dimensions must be positive, got {dims}")
    _topology_reorder(d, rec)
    d.new_comm(rec, _parent(d, rec), tuple(dims))


def _h_graph_create(d: _DumpiRank, rec: _Record) -> None:
    _topology_reorder(d, rec)
    d.new_comm(rec, _parent(d, rec), (d.int_param(rec, "nodes"),))


def _h_cart_sub(d: _DumpiRank, rec: _Record) -> None:
    d.new_comm(rec, _parent(d, rec), tuple(d.int_list(rec, "remain_dims") or []))


def _h_comm_unsupported(d: _DumpiRank, rec: _Record) -> None:
    """Inter-communicators and dynamic processes: matched with the other ranks' constructors, but
    what they make cannot be used (errors say so)."""
    d.skipped[rec.name] += 1
    if "newcomm" not in rec.params:
        return
    name = next((p for p in ("localcomm", "comm", "oldcomm") if p in rec.params), None)
    parent = None
    if name is not None:
        cid, cname, _ = d.handle(rec, name, "a communicator")
        parent = d.world if cname == _WORLD else d.self_view if cname == _SELF else d.comms.get(cid)
    d.new_comm(rec, parent)


def _h_comm_free(d: _DumpiRank, rec: _Record) -> None:
    if "comm" in rec.params:
        cid, cname, _ = d.handle(rec, "comm", "a communicator")
        if cname not in (_WORLD, _SELF):
            d.comms.pop(cid, None)


def _h_comm_rank_size(d: _DumpiRank, rec: _Record) -> None:
    # Checked against the rebuilt communicator once every rank is read.
    what = "rank" if rec.name == "MPI_Comm_rank" else "size"
    if "comm" not in rec.params or what not in rec.params:
        return
    cid, cname, _ = d.handle(rec, "comm", "a communicator")
    view = d.comms.get(cid)
    if view is not None and cname not in (_WORLD, _SELF) and view.call not in (_WORLD, _SELF):
        d.checks.append((view, what, d.int_param(rec, what), rec.line))


def _h_comm_group(d: _DumpiRank, rec: _Record) -> None:
    d.new_group(rec, (d.comm_view(rec, "comm"),))


def _h_group_incl_excl(d: _DumpiRank, rec: _Record) -> None:
    d.new_group(rec, (d.group_view(rec, "group"),), tuple(d.int_list(rec, "ranks") or []))


def _h_group_set_op(d: _DumpiRank, rec: _Record) -> None:
    d.new_group(rec, (d.group_view(rec, "group1"), d.group_view(rec, "group2")))


def _h_group_free(d: _DumpiRank, rec: _Record) -> None:
    gid, _, _ = d.handle(rec, "group", "a group")
    if gid != _GROUP_EMPTY:
        d.groups.pop(gid, None)


_HANDLERS = {
    **dict.fromkeys(_DUMPI_SENDS, _h_send),
    **dict.fromkeys(_DUMPI_ISENDS, _h_isend),
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
    "MPI_Comm_split": _h_comm_split,
    "MPI_Comm_create": _h_comm_create,
    "MPI_Cart_create": _h_cart_create,
    "MPI_Cart_sub": _h_cart_sub,
    "MPI_Graph_create": _h_graph_create,
    **dict.fromkeys(("MPI_Intercomm_create", "MPI_Intercomm_merge", "MPI_Comm_accept", "MPI_Comm_connect", "MPI_Comm_spawn", "MPI_Comm_spawn_multiple"), _h_comm_unsupported),
    "MPI_Comm_free": _h_comm_free,
    "MPI_Comm_rank": _h_comm_rank_size,
    "MPI_Comm_size": _h_comm_rank_size,
    "MPI_Comm_group": _h_comm_group,
    "MPI_Group_incl": _h_group_incl_excl,
    "MPI_Group_excl": _h_group_incl_excl,
    "MPI_Group_union": _h_group_set_op,
    "MPI_Group_intersection": _h_group_set_op,
    "MPI_Group_difference": _h_group_set_op,
    "MPI_Group_free": _h_group_free,
}
