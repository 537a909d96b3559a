"""Trace readers: OTF2 and DUMPI ASCII -> packed rank programs (python/qoslab/io/traces/), and
their replay: communicators, message patterns, real traces."""

from __future__ import annotations

import os
import shutil
from collections import Counter
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path

import numpy as np
import otf2
import pytest
import qoslab
from otf2.enums import CollectiveOp, GroupType, Paradigm, RegionRole
from qoslab.errors import ScenarioError
from qoslab.io import PackedProgram, read_trace
from qoslab.io.traces import ANY, read_dumpi_rank

COMPUTE, ISEND, IRECV, PUT, GET, WAITALL, WAIT, COLLECTIVE, ITERATION_END = range(9)
BARRIER, BCAST, REDUCE, ALLREDUCE, ALLTOALL, ALLGATHER = range(6)
UNDEFINED_ROOT = 0xFFFFFFFF


def shared_traces() -> Path | None:
    env = os.environ.get("QOSLAB_TRACES")
    candidates = [Path(env)] if env else []
    candidates.append(Path(__file__).resolve().parents[1].parent / "shared" / "traces")
    for c in candidates:
        if c.is_dir():
            return c
    return None


SHARED = shared_traces()
needs_shared = pytest.mark.skipif(
    SHARED is None,
    reason="real traces not found: set QOSLAB_TRACES or put them in ../shared/traces next to the repo",
)


def ops(program: PackedProgram, rank: int) -> list[tuple[int, int, int, int]]:
    return program.op_tuples(rank)


def coll(kind: int, nbytes: int, seq: int, comm: int = 0) -> tuple[int, int, int, int]:
    """A COLLECTIVE op: on communicator `comm` (0: the whole job), the trace's collective `seq`."""
    return (COLLECTIVE, kind, nbytes, comm | seq << 32)


# ---------------------------------------------------------------------------------------------
# Writing OTF2 traces with the otf2 package
# ---------------------------------------------------------------------------------------------


class Otf2Trace:
    """A small MPI trace: `ranks` processes, one MPI_COMM_WORLD, events written per rank."""

    def __init__(self, folder: Path, ranks: int, timer_resolution: int = 10**9):
        self.folder = folder
        self.cm = otf2.writer.open(str(folder), timer_resolution=timer_resolution)
        self.w = self.cm.__enter__()
        d = self.w.definitions
        node = d.system_tree_node("node")
        self.locations = [
            d.location("Master thread", group=d.location_group(f"MPI Rank {r}", system_tree_parent=node)) for r in range(ranks)
        ]
        d.group("", group_type=GroupType.COMM_LOCATIONS, paradigm=Paradigm.MPI, members=self.locations)
        world_group = d.group("", group_type=GroupType.COMM_GROUP, paradigm=Paradigm.MPI, members=list(range(ranks)))
        self.world = d.comm("MPI_COMM_WORLD", group=world_group)
        self.regions: dict[str, object] = {}
        self.writers = [self.w.event_writer_from_location(loc) for loc in self.locations]
        self.main = d.region("main", paradigm=Paradigm.COMPILER)

    def region(self, name: str):
        if name not in self.regions:
            self.regions[name] = self.w.definitions.region(name, region_role=RegionRole.FUNCTION, paradigm=Paradigm.MPI)
        return self.regions[name]

    def call(self, rank: int, name: str, t0: int, t1: int, *events) -> None:
        """An MPI call from t0 to t1; `events` are (method name, time, args...)."""
        ev = self.writers[rank]
        ev.enter(t0, self.region(name))
        for method, t, *args in events:
            getattr(ev, method)(t, *args)
        ev.leave(t1, self.region(name))

    def close(self) -> Path:
        self.cm.__exit__(None, None, None)
        return self.folder / "traces.otf2"


def write_ping_pong(folder: Path) -> Path:
    t = Otf2Trace(folder, 2)
    w = t.world
    # Rank 0: Isend + Irecv + Waitall, 1000 ns of compute before, then a blocking send.
    t.writers[0].enter(0, t.main)  # a non-MPI region: ignored
    t.call(0, "MPI_Init", 0, 10)
    t.call(0, "MPI_Isend", 1010, 1020, ("mpi_isend", 1011, 1, w, 7, 4096, 100))
    t.call(0, "MPI_Irecv", 1030, 1040, ("mpi_irecv_request", 1031, 101))
    t.call(0, "MPI_Waitall", 1050, 1080, ("mpi_isend_complete", 1060, 100), ("mpi_irecv", 1070, 1, w, 8, 4096, 101))
    t.call(0, "MPI_Send", 3080, 3090, ("mpi_send", 3085, 1, w, 9, 100))
    t.call(0, "MPI_Finalize", 3100, 3110)
    t.writers[0].leave(3120, t.main)
    # Rank 1: Irecv first, then Isend, two separate waits, an unsupported MPI_Probe, a blocking recv.
    t.call(1, "MPI_Init", 0, 10)
    t.call(1, "MPI_Irecv", 20, 25, ("mpi_irecv_request", 21, 5))
    t.call(1, "MPI_Isend", 30, 35, ("mpi_isend", 31, 0, w, 8, 4096, 6))
    t.call(1, "MPI_Wait", 40, 1100, ("mpi_irecv", 1090, 0, w, 7, 4096, 5))
    t.call(1, "MPI_Wait", 1100, 1110, ("mpi_isend_complete", 1105, 6))
    t.call(1, "MPI_Probe", 1150, 1160)
    t.call(1, "MPI_Recv", 1200, 3096, ("mpi_recv", 3095, 0, w, 9, 100))
    t.call(1, "MPI_Finalize", 3100, 3110)
    return t.close()


def test_otf2_ping_pong_exact_ops(tmp_path):
    anchor = write_ping_pong(tmp_path / "pp")
    prog = read_trace(anchor, cpu_speedup=2.0)
    assert prog.ranks == 2 and prog.format == "otf2"
    assert prog.offsets.dtype == np.dtype("<u8") and prog.words.dtype == np.dtype("<u8")
    # Nanosecond timer, compute halved by cpu_speedup = 2: 1000 ns -> 500_000 ps.
    assert ops(prog, 0) == [
        (COMPUTE, 500_000, 0, 0),
        (ISEND, 1, 4096, 7),  # request 0
        (COMPUTE, 5_000, 0, 0),
        (IRECV, 1, 0, 8),  # request 1: peer and tag from the completion event
        (COMPUTE, 5_000, 0, 0),
        (WAIT, 0, 0, 0),
        (WAIT, 1, 0, 0),
        (COMPUTE, 1_000_000, 0, 0),
        (ISEND, 1, 100, 9),  # MPI_Send: ISEND + WAIT on its request
        (WAIT, 2, 0, 0),
        (COMPUTE, 5_000, 0, 0),  # trailing compute: 10 ns from MPI_Send's return to MPI_Finalize
    ]
    assert ops(prog, 1) == [
        (COMPUTE, 5_000, 0, 0),
        (IRECV, 0, 0, 7),
        (COMPUTE, 2_500, 0, 0),
        (ISEND, 0, 4096, 8),
        (COMPUTE, 2_500, 0, 0),
        (WAIT, 0, 0, 0),
        (WAIT, 1, 0, 0),
        # 40 ns before MPI_Probe + 40 ns after it (the time inside a skipped call is not compute).
        (COMPUTE, 40_000, 0, 0),
        (IRECV, 0, 0, 9),
        (WAIT, 2, 0, 0),
        (COMPUTE, 2_000, 0, 0),  # 4 ns from MPI_Recv's return to MPI_Finalize
    ]
    assert list(prog.offsets) == [0, 11, 22]
    assert list(prog.ops_per_rank) == [11, 11]
    assert len(prog.words) == 4 * 22
    assert prog.skipped == {"MPI_Probe": 1}
    assert prog.approximated == {}
    assert prog.iterations == 1
    assert any("MPI_Probe" in w for w in prog.warnings)
    s = prog.summary()
    assert s["messages"] == 3 and s["message_bytes"] == 2 * 4096 + 100


def test_otf2_cpu_speedup_scales_compute_only(tmp_path):
    anchor = write_ping_pong(tmp_path / "pp")
    slow = read_trace(anchor)
    fast = read_trace(anchor, cpu_speedup=4.0)
    a, b = slow.words.reshape(-1, 4), fast.words.reshape(-1, 4)
    compute = a[:, 0] == COMPUTE
    assert np.array_equal(a[~compute], b[~compute])
    assert np.array_equal(a[compute][:, 1], 4 * b[compute][:, 1])
    assert ops(slow, 0)[0] == (COMPUTE, 1_000_000, 0, 0)


def test_otf2_send_modes_come_from_the_enclosing_call(tmp_path):
    # MpiSend/MpiIsend events do not say their mode: the MPI call's region does.
    t = Otf2Trace(tmp_path / "modes", 2)
    w = t.world
    t.call(0, "MPI_Init", 0, 10)
    t.call(0, "MPI_Ssend", 20, 30, ("mpi_send", 21, 1, w, 1, 8))
    t.call(0, "MPI_Ibsend", 40, 50, ("mpi_isend", 41, 1, w, 2, 8, 7))
    t.call(0, "MPI_Wait", 60, 70, ("mpi_isend_complete", 65, 7))
    t.call(0, "MPI_Rsend", 80, 90, ("mpi_send", 81, 1, w, 3, 8))
    t.call(1, "MPI_Init", 0, 10)
    for i, tag in enumerate((1, 2, 3)):
        t.call(1, "MPI_Recv", 20 + 20 * i, 30 + 20 * i, ("mpi_recv", 29 + 20 * i, 0, w, tag, 8))
    prog = read_trace(t.close())
    assert [op[:2] for op in ops(prog, 0) if op[0] == ISEND] == [(ISEND, 1 | 1 << 32), (ISEND, 1 | 2 << 32), (ISEND, 1)]


def test_otf2_directory_and_timer_resolution(tmp_path):
    # A microsecond timer: 3 ticks of compute = 3_000_000 ps. The folder is accepted too.
    t = Otf2Trace(tmp_path / "us", 2, timer_resolution=10**6)
    t.call(0, "MPI_Init", 0, 1)
    t.call(0, "MPI_Send", 4, 5, ("mpi_send", 4, 1, t.world, 0, 8))
    t.call(1, "MPI_Init", 0, 1)
    t.call(1, "MPI_Recv", 2, 6, ("mpi_recv", 6, 0, t.world, 0, 8))
    t.close()
    prog = read_trace(tmp_path / "us")
    assert ops(prog, 0) == [(COMPUTE, 3_000_000, 0, 0), (ISEND, 1, 8, 0), (WAIT, 0, 0, 0)]
    assert ops(prog, 1) == [(COMPUTE, 1_000_000, 0, 0), (IRECV, 0, 0, 0), (WAIT, 0, 0, 0)]


def write_collectives(folder: Path, ranks: int = 4) -> Path:
    t = Otf2Trace(folder, ranks)
    w = t.world
    for r in range(ranks):
        now = 0
        t.call(r, "MPI_Init", now, now + 10)
        now += 10
        for _ in range(2):
            now += 100 * (r + 1)  # rank r computes (r + 1) * 100 ns per step
            # Score-P's byte counts: allreduce of N bytes sends and receives P * N.
            t.call(
                r, "MPI_Allreduce", now, now + 50,
                ("mpi_collective_begin", now + 1),
                ("mpi_collective_end", now + 49, CollectiveOp.ALLREDUCE, w, UNDEFINED_ROOT, 4 * 1000, 4 * 1000),
            )
            now += 50
            t.call(
                r, "MPI_Barrier", now, now + 20,
                ("mpi_collective_begin", now + 1),
                ("mpi_collective_end", now + 19, CollectiveOp.BARRIER, w, UNDEFINED_ROOT, 0, 0),
            )
            now += 20
            # Bcast from rank 0: every rank receives N, the root sends P * N.
            t.call(
                r, "MPI_Bcast", now, now + 20,
                ("mpi_collective_begin", now + 1),
                ("mpi_collective_end", now + 19, CollectiveOp.BCAST, w, 0, 4 * 512 if r == 0 else 0, 512),
            )
            now += 20
            # Alltoall of 256-byte blocks: P * 256 sent.
            t.call(
                r, "MPI_Alltoall", now, now + 20,
                ("mpi_collective_begin", now + 1),
                ("mpi_collective_end", now + 19, CollectiveOp.ALLTOALL, w, UNDEFINED_ROOT, 4 * 256, 4 * 256),
            )
            now += 20
            # Reduce of 64 bytes to rank 0: every rank sends N.
            t.call(
                r, "MPI_Reduce", now, now + 20,
                ("mpi_collective_begin", now + 1),
                ("mpi_collective_end", now + 19, CollectiveOp.REDUCE, w, 0, 64, 4 * 64 if r == 0 else 0),
            )
            now += 20
            # Allgather of 32-byte blocks; then a gather (not supported: skipped).
            t.call(
                r, "MPI_Allgather", now, now + 20,
                ("mpi_collective_begin", now + 1),
                ("mpi_collective_end", now + 19, CollectiveOp.ALLGATHER, w, UNDEFINED_ROOT, 4 * 32, 4 * 32),
            )
            now += 20
            t.call(
                r, "MPI_Gather", now, now + 20,
                ("mpi_collective_begin", now + 1),
                ("mpi_collective_end", now + 19, CollectiveOp.GATHER, w, 0, 8, 32 if r == 0 else 0),
            )
            now += 20
            t.call(r, "MPI_Pcontrol", now, now + 1)  # ends the iteration
            now += 1
        t.call(r, "MPI_Finalize", now + 5, now + 10)
    return t.close()


def test_otf2_collectives_and_iterations(tmp_path):
    prog = read_trace(write_collectives(tmp_path / "coll"))
    assert prog.ranks == 4
    # Two marked iterations, and the 5 ns of compute between the last marker and MPI_Finalize:
    # like any op after the last marker, one more iteration.
    assert prog.iterations == 3
    assert prog.skipped == {"MPI_Gather": 8}
    for r in range(4):
        step = (r + 1) * 100_000  # ps

        def iteration(first: int) -> list[tuple[int, int, int, int]]:
            return [
                (COMPUTE, step, 0, 0),  # noqa: B023 - called inside this iteration of the loop
                coll(ALLREDUCE, 1000, first),
                coll(BARRIER, 0, first + 1),
                coll(BCAST, 512, first + 2),
                coll(ALLTOALL, 256, first + 3),
                coll(REDUCE, 64, first + 4),
                coll(ALLGATHER, 32, first + 5),
                (ITERATION_END, 0, 0, 0),
            ]

        # The skipped gather's 20 ns are not compute; the Pcontrol marker follows it directly.
        assert ops(prog, r) == [*iteration(0), *iteration(6), (COMPUTE, 5_000, 0, 0)], r
    assert prog.summary()["collectives"] == {
        "barrier": 8, "bcast": 8, "reduce": 8, "allreduce": 8, "alltoall": 8, "allgather": 8,
    }


def test_otf2_row_communicators_are_replayed_exactly(tmp_path):
    t = Otf2Trace(tmp_path / "sub", 4)
    d = t.w.definitions
    # Two row communicators {0, 1} and {2, 3}: every rank calls one allreduce on its own.
    rows = [d.comm(f"row{i}", group=d.group("", group_type=GroupType.COMM_GROUP, paradigm=Paradigm.MPI, members=[2 * i, 2 * i + 1])) for i in range(2)]
    for r in range(4):
        t.call(r, "MPI_Init", 0, 10)
        t.call(
            r, "MPI_Allreduce", 10, 20,
            ("mpi_collective_begin", 11),
            ("mpi_collective_end", 19, CollectiveOp.ALLREDUCE, rows[r // 2], UNDEFINED_ROOT, 2 * 80, 2 * 80),
        )
        # Point-to-point on the row communicator: rank 1 of row i is world rank 2i + 1.
        if r % 2 == 0:
            t.call(r, "MPI_Send", 30, 40, ("mpi_send", 31, 1, rows[r // 2], 3, 16))
        else:
            t.call(r, "MPI_Recv", 30, 40, ("mpi_recv", 39, 0, rows[r // 2], 3, 16))
    prog = read_trace(t.close())
    assert prog.approximated == {}
    # Each row's allreduce runs on its own communicator: rows are communicators 1 and 2.
    assert prog.communicators == [(0, 1), (2, 3)]
    # The second row's messages match in its own context (1; the first row's is 0).
    assert ops(prog, 2) == [coll(ALLREDUCE, 80, 1, comm=2), (COMPUTE, 10_000, 0, 0), (ISEND, 3, 16, 3 | 1 << 32), (WAIT, 0, 0, 0)]
    assert ops(prog, 3) == [coll(ALLREDUCE, 80, 1, comm=2), (COMPUTE, 10_000, 0, 0), (IRECV, 2, 0, 3 | 1 << 32), (WAIT, 0, 0, 0)]
    assert ops(prog, 0)[0] == coll(ALLREDUCE, 80, 0, comm=1)


def test_otf2_mismatched_collectives_raise(tmp_path):
    t = Otf2Trace(tmp_path / "bad", 2)
    for r in range(2):
        t.call(r, "MPI_Init", 0, 10)
    t.call(0, "MPI_Barrier", 20, 30, ("mpi_collective_end", 29, CollectiveOp.BARRIER, t.world, UNDEFINED_ROOT, 0, 0))
    t.call(1, "MPI_Allreduce", 20, 30, ("mpi_collective_end", 29, CollectiveOp.ALLREDUCE, t.world, UNDEFINED_ROOT, 16, 16))
    anchor = t.close()
    with pytest.raises(ScenarioError) as e:
        read_trace(anchor, key="jobs[0].workload.path")
    assert e.value.problems[0][0] == "jobs[0].workload.path"
    msg = str(e.value)
    assert f"{anchor}: collective #0 on communicator 'MPI_COMM_WORLD' (ranks 0-1) is barrier on rank 0 (MPI_Barrier, event #4" in msg
    assert "but allreduce on rank 1 (MPI_Allreduce, event #4 at time 29)" in msg


# ---------------------------------------------------------------------------------------------
# DUMPI ASCII, written exactly as dumpi2ascii prints it
# ---------------------------------------------------------------------------------------------

HEADER = """version=1.0.0
starttime=Thu Feb  3 16:05:56 2011
hostname=testhost
username=tester
meshdim=0
meshsize=[]
meshcrd=[]
"""

FOOTER_CALLS = ["MPI_Send", "MPI_Recv", "MPI_Isend", "MPI_Irecv", "MPI_Wait", "MPI_Waitall", "MPI_Barrier"]

DATATYPES = [
    (0, "MPI_DATATYPE_ERROR", 0), (1, "MPI_DATATYPE_NULL", 0), (2, "MPI_CHAR", 1), (5, "MPI_BYTE", 1),
    (9, "MPI_INT", 4), (14, "MPI_DOUBLE", 8), (16, "MPI_LONG_LONG_INT", 0), (28, "user-defined-datatype", 24),
]


class Dumpi:
    """One rank's dumpi2ascii text; times in nanoseconds after a base walltime."""

    BASE = 1296777956

    def __init__(self) -> None:
        self.lines: list[str] = [HEADER.rstrip("\n")]

    def wall(self, ns: int) -> str:
        return f"{self.BASE + ns // 10**9}.{ns % 10**9:09d}"

    def rec(self, name: str, t0: int, t1: int, *params: str) -> Dumpi:
        self.lines.append(f"{name} entering at walltime {self.wall(t0)}, cputime 0.007712000 seconds in thread 0.")
        self.lines.extend(params)
        self.lines.append(f"{name} returning at walltime {self.wall(t1)}, cputime 0.007716000 seconds in thread 0.")
        return self

    def text(self) -> str:
        footer = ["Total keyvals: 0", "Performance counters: 0"]
        footer += [f"Datatype {i} ({n}) has size {s}" for i, n, s in DATATYPES]
        footer += [f"{c} called 1 times and ignored 0 times" for c in FOOTER_CALLS]
        return "\n".join(self.lines + footer) + "\n"


WORLD = "MPI_Comm comm=2 (MPI_COMM_WORLD)"


def dumpi_init(d: Dumpi) -> Dumpi:
    return d.rec("MPI_Init", 0, 1000, "int argc=1", 'string argv[1]=["./mpi"]')


def write_dumpi(folder: Path, ranks: list[Dumpi], prefix: str = "app", meta: bool = True) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for r, d in enumerate(ranks):
        (folder / f"{prefix}-{r:04d}.txt").write_text(d.text())
    if meta:
        (folder / f"{prefix}.meta").write_text(f"hostname=testhost\nnumprocs={len(ranks)}\nfileprefix={prefix}\n")
    return folder / f"{prefix}-0000.txt"


def dumpi_pair() -> list[Dumpi]:
    r0 = dumpi_init(Dumpi())
    r0.rec("MPI_Comm_rank", 2000, 2100, WORLD, "int rank=0")
    r0.rec("MPI_Isend", 5000, 5100, "int count=16", "MPI_Datatype datatype=14 (MPI_DOUBLE)", "int dest=1", "int tag=42", WORLD, "MPI_Request request=[7]")
    r0.rec("MPI_Irecv", 5200, 5300, "int count=2", "MPI_Datatype datatype=28 (user-defined-datatype)", "int source=-1 (MPI_ANY_SOURCE)", "int tag=-1 (MPI_ANY_TAG)", WORLD, "MPI_Request request=[8]")
    r0.rec("MPI_Test", 5400, 5410, "MPI_Request request=[8]", "int flag=0", "MPI_Status status=<IGNORED>")
    r0.rec("MPI_Waitall", 5500, 9000, "int count=2", "MPI_Request requests[2]=[7, 8]", "MPI_Status statuses[2]=<IGNORED>")
    r0.rec("MPI_Send", 10000, 10500, "int count=3", "MPI_Datatype datatype=9 (MPI_INT)", "int dest=1", "int tag=5", WORLD)
    r0.rec("MPI_Send", 10600, 10700, "int count=3", "MPI_Datatype datatype=9 (MPI_INT)", "int dest=-2", "int tag=5", WORLD)  # MPI_PROC_NULL
    r0.rec("MPI_Gather", 11000, 11100, "int sendcount=1", "MPI_Datatype sendtype=9 (MPI_INT)", "int recvcount=1", "MPI_Datatype recvtype=9 (MPI_INT)", "int root=0", WORLD)
    r0.rec("MPI_Pcontrol", 12000, 12001, "int level=1")
    r0.rec("MPI_Allreduce", 13000, 13100, "int count=10", "MPI_Datatype datatype=14 (MPI_DOUBLE)", "MPI_Op op=3 (MPI_SUM)", WORLD)
    r0.rec("MPI_Bcast", 13200, 13300, "int count=100", "MPI_Datatype datatype=5 (MPI_BYTE)", "int root=0", WORLD)
    r0.rec("MPI_Sendrecv", 14000, 14500, "int sendcount=4", "MPI_Datatype sendtype=9 (MPI_INT)", "int dest=1", "int sendtag=11",
           "int recvcount=4", "MPI_Datatype recvtype=9 (MPI_INT)", "int source=1", "int recvtag=12", WORLD, "MPI_Status status=<IGNORED>")
    r0.rec("MPI_Pcontrol", 15000, 15001, "int level=1")
    r0.rec("MPI_Finalize", 20000, 21000)

    r1 = dumpi_init(Dumpi())
    r1.rec("MPI_Irecv", 3000, 3100, "int count=16", "MPI_Datatype datatype=14 (MPI_DOUBLE)", "int source=0", "int tag=42", WORLD, "MPI_Request request=[3]")
    r1.rec("MPI_Isend", 3200, 3300, "int count=2", "MPI_Datatype datatype=28 (user-defined-datatype)", "int dest=0", "int tag=9", WORLD, "MPI_Request request=[4]")
    r1.rec("MPI_Waitany", 3400, 4000, "int count=2", "MPI_Request requests[2]=[3, 4]", "int index=1", "MPI_Status status=<IGNORED>")
    r1.rec("MPI_Wait", 4000, 8000, "MPI_Request request=[3]", "MPI_Status status=[{bytes=128, cancelled=0, source=0, tag=42, error=0}]")
    r1.rec("MPI_Recv", 9000, 10600, "int count=3", "MPI_Datatype datatype=9 (MPI_INT)", "int source=0", "int tag=5", WORLD, "MPI_Status status=<IGNORED>")
    r1.rec("MPI_Pcontrol", 12000, 12001, "int level=1")
    r1.rec("MPI_Allreduce", 12501, 13100, "int count=10", "MPI_Datatype datatype=14 (MPI_DOUBLE)", "MPI_Op op=3 (MPI_SUM)", WORLD)
    r1.rec("MPI_Bcast", 13200, 13300, "int count=100", "MPI_Datatype datatype=5 (MPI_BYTE)", "int root=0", WORLD)
    r1.rec("MPI_Sendrecv", 14000, 14500, "int sendcount=4", "MPI_Datatype sendtype=9 (MPI_INT)", "int dest=0", "int sendtag=12",
           "int recvcount=4", "MPI_Datatype recvtype=9 (MPI_INT)", "int source=0", "int recvtag=11", WORLD, "MPI_Status status=<IGNORED>")
    r1.rec("MPI_Pcontrol", 15000, 15001, "int level=1")
    r1.rec("MPI_Finalize", 20000, 21000)
    return [r0, r1]


def test_dumpi_exact_ops(tmp_path):
    first = write_dumpi(tmp_path / "d", dumpi_pair())
    prog = read_trace(first, cpu_speedup=0.5)  # a slower CPU: compute doubles
    assert prog.format == "dumpi" and prog.ranks == 2
    # Two marked iterations and the trailing compute after the last marker (one more).
    assert prog.iterations == 3
    assert ops(prog, 0) == [
        # 1000 ns before MPI_Comm_rank + 2900 after it (ns -> ps, x2 for cpu_speedup 0.5)
        (COMPUTE, 7_800_000, 0, 0),
        (ISEND, 1, 128, 42),  # 16 doubles; request 0 (dumpi handle 7)
        (COMPUTE, 200_000, 0, 0),
        (IRECV, ANY, 0, ANY),  # request 1 (handle 8)
        # MPI_Test with flag=0: no op, and its 10 ns are not compute
        (COMPUTE, 380_000, 0, 0),
        (WAIT, 0, 0, 0),
        (WAIT, 1, 0, 0),
        (COMPUTE, 2_000_000, 0, 0),
        (ISEND, 1, 12, 5),  # MPI_Send
        (WAIT, 2, 0, 0),
        # The send to MPI_PROC_NULL and the skipped MPI_Gather leave no op; their time is not compute.
        (COMPUTE, 2_600_000, 0, 0),
        (ITERATION_END, 0, 0, 0),
        (COMPUTE, 1_998_000, 0, 0),
        coll(ALLREDUCE, 80, 0),
        (COMPUTE, 200_000, 0, 0),
        coll(BCAST, 100, 1),
        (COMPUTE, 1_400_000, 0, 0),
        (IRECV, 1, 0, 12),  # MPI_Sendrecv: receive and send posted, then both waited for
        (ISEND, 1, 16, 11),
        (WAIT, 3, 0, 0),
        (WAIT, 4, 0, 0),
        (COMPUTE, 1_000_000, 0, 0),
        (ITERATION_END, 0, 0, 0),
        (COMPUTE, 9_998_000, 0, 0),  # trailing compute: 4999 ns from the last marker to MPI_Finalize
    ]
    assert ops(prog, 1) == [
        (COMPUTE, 4_000_000, 0, 0),
        (IRECV, 0, 0, 42),
        (COMPUTE, 200_000, 0, 0),
        (ISEND, 0, 48, 9),  # 2 x the 24-byte user type from the file's size table
        (COMPUTE, 200_000, 0, 0),
        (WAIT, 1, 0, 0),  # MPI_Waitany: index 1 completed
        (WAIT, 0, 0, 0),
        (COMPUTE, 2_000_000, 0, 0),
        (IRECV, 0, 0, 5),
        (WAIT, 2, 0, 0),
        (COMPUTE, 2_800_000, 0, 0),
        (ITERATION_END, 0, 0, 0),
        (COMPUTE, 1_000_000, 0, 0),
        coll(ALLREDUCE, 80, 0),
        (COMPUTE, 200_000, 0, 0),
        coll(BCAST, 100, 1),
        (COMPUTE, 1_400_000, 0, 0),
        (IRECV, 0, 0, 11),
        (ISEND, 0, 16, 12),
        (WAIT, 3, 0, 0),
        (WAIT, 4, 0, 0),
        (COMPUTE, 1_000_000, 0, 0),
        (ITERATION_END, 0, 0, 0),
        (COMPUTE, 9_998_000, 0, 0),  # trailing compute: 4999 ns from the last marker to MPI_Finalize
    ]
    assert prog.skipped == {"MPI_Gather": 1}


def test_dumpi_path_forms(tmp_path):
    first = write_dumpi(tmp_path / "d", dumpi_pair())
    reference = read_trace(first)
    for path in (tmp_path / "d", tmp_path / "d" / "app", tmp_path / "d" / "app.meta", tmp_path / "d" / "app-0001.txt"):
        prog = read_trace(path)
        assert np.array_equal(prog.words, reference.words) and np.array_equal(prog.offsets, reference.offsets), path
    # Relative to a base folder, with the format given.
    prog = read_trace("d/app-0000.txt", format="dumpi", base_dir=tmp_path)
    assert np.array_equal(prog.words, reference.words)


def test_dumpi_collectives_take_the_largest_report_and_alltoallv_is_approximated(tmp_path):
    ranks = []
    for r in range(2):
        d = dumpi_init(Dumpi())
        d.rec("MPI_Alltoall", 2000, 2100, "int sendcount=8", "MPI_Datatype sendtype=14 (MPI_DOUBLE)", "int recvcount=8", "MPI_Datatype recvtype=14 (MPI_DOUBLE)", WORLD)
        d.rec("MPI_Allgather", 2100, 2200, "int sendcount=3", "MPI_Datatype sendtype=9 (MPI_INT)", "int recvcount=3", "MPI_Datatype recvtype=9 (MPI_INT)", WORLD)
        counts = "[10, 30]" if r == 0 else "[20, 20]"
        d.rec("MPI_Alltoallv", 2200, 2300, f"int sendcounts[2]={counts}", "int senddispls[2]=[0, 10]", "MPI_Datatype sendtype=5 (MPI_BYTE)",
              "int recvcounts[2]=[10, 20]", "int recvdispls[2]=[0, 10]", "MPI_Datatype recvtype=5 (MPI_BYTE)", WORLD)
        d.rec("MPI_Reduce", 2300, 2400, "int count=7", "MPI_Datatype datatype=9 (MPI_INT)", "MPI_Op op=3 (MPI_SUM)", "int root=0", WORLD)
        d.rec("MPI_Barrier", 2400, 2500, WORLD)
        ranks.append(d)
    prog = read_trace(write_dumpi(tmp_path / "c", ranks))
    for r in range(2):
        assert ops(prog, r) == [
            (COMPUTE, 1_000_000, 0, 0),
            coll(ALLTOALL, 64, 0),
            coll(ALLGATHER, 12, 1),
            coll(ALLTOALL, 20, 2),  # mean block: 40 bytes over 2 blocks
            coll(REDUCE, 28, 3),
            coll(BARRIER, 0, 4),
        ]
    assert prog.approximated == {"MPI_Alltoallv": 2}
    assert prog.iterations == 1


def test_dumpi_missing_rank_files_are_named(tmp_path):
    pair = dumpi_pair()
    write_dumpi(tmp_path / "m", pair + [dumpi_init(Dumpi()), dumpi_init(Dumpi())])
    (tmp_path / "m" / "app-0002.txt").unlink()
    with pytest.raises(ScenarioError) as e:
        read_trace(tmp_path / "m" / "app-0000.txt", key="jobs[1].workload.path")
    msg = str(e.value)
    assert e.value.problems[0][0] == "jobs[1].workload.path"
    assert "app-0002.txt" in msg and "ranks 2" in msg and "app-0003" not in msg


@pytest.mark.parametrize(
    "bad_line, expect",
    [
        ("int dest=one", "parameter 'dest' is not an integer"),
        ("this is not a parameter", "malformed parameter line in the MPI_Send record"),
        ("MPI_Datatype datatype=99 (user-defined-datatype)", "size of datatype 99"),
        ("int tag=2147483648", "tag 2147483648 is out of range"),
        ("int dest=5", "rank 5 is not a rank of the job"),
    ],
)
def test_dumpi_malformed_record_names_file_and_line(tmp_path, bad_line, expect):
    pair = dumpi_pair()
    good = {"int dest": "int dest=1", "MPI_Datatype": "MPI_Datatype datatype=9 (MPI_INT)", "int tag": "int tag=5"}
    params = ["int count=3", good["MPI_Datatype"], good["int dest"], good["int tag"], WORLD]
    for i, p in enumerate(params):
        if p.split("=")[0] == bad_line.split("=")[0]:
            params[i] = bad_line
            break
    else:
        params.insert(2, bad_line)
    d = dumpi_init(Dumpi()).rec("MPI_Send", 2000, 2100, *params)
    first = write_dumpi(tmp_path / "bad", [d, pair[1]])
    text = first.read_text().splitlines()
    line = next(i for i, l in enumerate(text, start=1) if l == bad_line)
    with pytest.raises(ScenarioError) as e:
        read_trace(first)
    msg = str(e.value)
    assert f"{first}, line {line}" in msg, msg
    assert expect in msg


def test_dumpi_truncated_and_garbage_files(tmp_path):
    pair = dumpi_pair()
    first = write_dumpi(tmp_path / "t", pair)
    lines = first.read_text().splitlines()
    cut = next(i for i, l in enumerate(lines) if l.startswith("MPI_Isend entering"))
    first.write_text("\n".join(lines[: cut + 3]) + "\n")
    with pytest.raises(ScenarioError, match=rf"app-0000.txt, line {cut + 1}: MPI_Isend record is cut off"):
        read_trace(first)
    first.write_text("\x00\x01binary stuff\n")
    with pytest.raises(ScenarioError, match="app-0000.txt"):
        read_trace(first)
    first.write_bytes(bytes(range(256)))
    with pytest.raises(ScenarioError, match="not a text file"):
        read_trace(first)


# ---------------------------------------------------------------------------------------------
# Communicators: DUMPI's rebuilt from the calls that made them, OTF2's from its definitions;
# replayed in a simulation, the messages must be the trace's
# ---------------------------------------------------------------------------------------------


class Rank:
    """One rank's dumpi2ascii text, its calls 100 ns apart after MPI_Init (``compute=False``: one
    right after the other, from MPI_Init's return, so that the trace holds no compute)."""

    def __init__(self, compute: bool = True) -> None:
        self.d = dumpi_init(Dumpi())
        self.t, self.step = (2000, 100) if compute else (1000, 50)

    def call(self, name: str, *params: str) -> Rank:
        self.d.rec(name, self.t, self.t + 50, *params)
        self.t += self.step
        return self


def comm(handle: int, name: str = "comm") -> str:
    if handle == 1:
        return f"MPI_Comm {name}=1 (MPI_COMM_NULL)"
    return f"MPI_Comm {name}={handle} (user-defined-comm)"


def group(handle: int, name: str = "group") -> str:
    return f"MPI_Group {name}={handle} (user-defined-group)"


def send(dest: int, count: int, tag: int, comm_param: str) -> tuple[str, ...]:
    return ("MPI_Send", f"int count={count}", "MPI_Datatype datatype=5 (MPI_BYTE)", f"int dest={dest}", f"int tag={tag}", comm_param)


def recv(source: int, tag: int, comm_param: str) -> tuple[str, ...]:
    return ("MPI_Recv", "int count=4096", "MPI_Datatype datatype=5 (MPI_BYTE)", f"int source={source}", f"int tag={tag}",
            comm_param, "MPI_Status status=<IGNORED>")


def allreduce(doubles: int, comm_param: str) -> tuple[str, ...]:
    return ("MPI_Allreduce", f"int count={doubles}", "MPI_Datatype datatype=14 (MPI_DOUBLE)", "MPI_Op op=3 (MPI_SUM)", comm_param)


def split(color: int, key: int, newcomm: int, oldcomm: str = "MPI_Comm oldcomm=2 (MPI_COMM_WORLD)") -> tuple[str, ...]:
    return ("MPI_Comm_split", oldcomm, f"int color={color}", f"int key={key}", comm(newcomm, "newcomm"))


def write_ranks(folder: Path, ranks: list[Rank]) -> Path:
    return write_dumpi(folder, [r.d for r in ranks])


def line_of(path: Path, text: str, nth: int = 1) -> int:
    """The line number of the nth line of `path` that is `text` (or starts with it)."""
    hits = [i for i, line in enumerate(path.read_text().splitlines(), start=1) if line == text or line.startswith(text)]
    return hits[nth - 1]


def replay(path: Path, ranks: int) -> list[tuple[int, int, int]]:
    """Runs the trace as a job on hosts 0..ranks-1 (one rank each, so rank = host) and returns its
    messages as sorted (source rank, destination rank, bytes)."""
    from qoslab import Scenario, simulate

    s = Scenario(
        topology={"kind": "single-switch", "hosts": ranks},
        jobs=[{"name": "t", "nodes": ranks, "placement": "hosts", "hosts": f"0-{ranks - 1}",
               "workload": {"kind": "trace", "path": str(path)}}],
        run={"messages": True},
    )
    result = simulate(s)
    assert result.summary["jobs"]["t"]["completed"] is True
    m = result.messages.to_pandas()
    return sorted(zip(m["src"].tolist(), m["dst"].tolist(), m["bytes"].tolist(), strict=True))


def payload(messages: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    return [m for m in messages if m[2] > 0]


def dumpi_split_pairs(free: bool = True) -> list[Rank]:
    """4 ranks split into pairs by parity, ordered by descending world rank (key = -rank): {2, 0}
    and {3, 1}. Each rank's handle for its pair differs (4 for even ranks, 5 for odd). On its pair,
    each rank checks its rank, allreduces (24 doubles on the even pair, 40 on the odd one), and
    pair rank 0 sends to pair rank 1 (1000 bytes, 2000 on the odd pair); then a world barrier."""
    out = []
    for r in range(4):
        h = 4 + r % 2
        me = 1 if r < 2 else 0
        rk = Rank().call(*split(r % 2, -r, h))
        rk.call("MPI_Comm_rank", comm(h), f"int rank={me}").call("MPI_Comm_size", comm(h), "int size=2")
        rk.call(*allreduce(24 if r % 2 == 0 else 40, comm(h)))
        if me == 0:
            rk.call(*send(1, 1000 if r % 2 == 0 else 2000, 7, comm(h)))
        else:
            rk.call(*recv(0, 7, comm(h)))
        rk.call("MPI_Barrier", WORLD)
        if free:
            rk.call("MPI_Comm_free", comm(h))
        out.append(rk)
    return out


def without_compute(prog: PackedProgram, rank: int) -> list[tuple[int, int, int, int]]:
    return [op for op in ops(prog, rank) if op[0] != COMPUTE]


def test_dumpi_split_pairs_collectives_and_sends(tmp_path):
    first = write_ranks(tmp_path / "split", dumpi_split_pairs())
    prog = read_trace(first)
    assert prog.skipped == {} and prog.approximated == {}
    assert prog.communicators == [(2, 0), (3, 1)]  # in pair rank order
    # Sequence numbers: the two pairs' allreduces (0, 1), then the barrier (2).
    # Point-to-point: each pair's sends and receives in its own matching context (0 and 1).
    assert without_compute(prog, 0) == [coll(ALLREDUCE, 192, 0, comm=1), (IRECV, 2, 0, 7), (WAIT, 0, 0, 0), coll(BARRIER, 0, 2)]
    assert without_compute(prog, 2) == [coll(ALLREDUCE, 192, 0, comm=1), (ISEND, 0, 1000, 7), (WAIT, 0, 0, 0), coll(BARRIER, 0, 2)]
    assert without_compute(prog, 1) == [coll(ALLREDUCE, 320, 1, comm=2), (IRECV, 3, 0, 7 | 1 << 32), (WAIT, 0, 0, 0), coll(BARRIER, 0, 2)]
    assert without_compute(prog, 3) == [coll(ALLREDUCE, 320, 1, comm=2), (ISEND, 1, 2000, 7 | 1 << 32), (WAIT, 0, 0, 0), coll(BARRIER, 0, 2)]
    messages = replay(first, 4)
    # The trace's sends, and each pair's allreduce (2 ranks: one exchange) inside the pair only.
    assert payload(messages) == sorted([(2, 0, 1000), (3, 1, 2000), (0, 2, 192), (2, 0, 192), (1, 3, 320), (3, 1, 320)])
    # The barrier: empty messages, on the whole job.
    assert {(s, d) for s, d, b in messages if b == 0} >= {(0, 1), (1, 2), (2, 3), (3, 0)}


def runtime_ns(path: Path, ranks: int) -> float:
    """The trace's runtime on a single switch (one rank per host), failing on a deadlock."""
    from qoslab import Scenario, simulate

    s = Scenario(topology={"kind": "single-switch", "hosts": ranks},
                 jobs=[{"name": "t", "nodes": ranks, "workload": {"kind": "trace", "path": str(path)}}])
    job = simulate(s).summary["jobs"]["t"]
    assert job["completed"] is True
    return job["runtime_us"] * 1000


def one_packet_ns(nbytes: int) -> float:
    """One single-packet message across the default single switch: (bytes + 26 header) x 0.08 ns
    per byte at 100 Gb/s, plus 2 x 20 ns of link and 100 ns of switch."""
    return (nbytes + 26) * 0.08 + 140


def wildcard(rec: tuple[str, ...]) -> tuple[str, ...]:
    return tuple("int source=-1 (MPI_ANY_SOURCE)" if p.startswith("int source=") else
                 "int tag=-1 (MPI_ANY_TAG)" if p.startswith("int tag=") else p for p in rec)


def test_a_wildcard_receive_never_takes_a_collectives_message(tmp_path):
    # Rank 0 leaves an Irecv(ANY_SOURCE, ANY_TAG) posted across a barrier; rank 1 sends to it after
    # the barrier. MPI: the barrier's messages are not the receive's (another context), so the
    # barrier's empty message then the 8-byte send: 142.08 + 142.72 ns.
    irecv = wildcard(("MPI_Irecv", "int count=8", "MPI_Datatype datatype=5 (MPI_BYTE)", "int source=1", "int tag=5",
                      WORLD, "MPI_Request request=[1]"))
    r0 = Rank(compute=False).call(*irecv).call("MPI_Barrier", WORLD)
    r0.call("MPI_Wait", "MPI_Request request=[1]", "MPI_Status status=<IGNORED>")
    r1 = Rank(compute=False).call("MPI_Barrier", WORLD).call(*send(0, 8, 5, WORLD))
    path = write_ranks(tmp_path / "anytag", [r0, r1])
    assert runtime_ns(path, 2) == pytest.approx(one_packet_ns(0) + one_packet_ns(8), abs=0.01)


def test_messages_match_only_on_their_own_communicator(tmp_path):
    # Both ranks dup MPI_COMM_WORLD (handle 4). Rank 0: Irecv(1, ANY_TAG) on the dup, Recv(1, tag 0)
    # on the world, then waits for the first. Rank 1: Send(tag 0) on the world, then Send(tag 7) on
    # the dup. Each receive takes its own communicator's message: the second 8-byte message lands
    # one serialization (34 x 0.08 ns) after the first; matching across communicators deadlocked.
    dup = ("MPI_Comm_dup", "MPI_Comm oldcomm=2 (MPI_COMM_WORLD)", comm(4, "newcomm"))
    irecv = ("MPI_Irecv", "int count=8", "MPI_Datatype datatype=5 (MPI_BYTE)", "int source=1", "int tag=-1 (MPI_ANY_TAG)",
             comm(4), "MPI_Request request=[1]")
    r0 = Rank(compute=False).call(*dup).call(*irecv).call(*recv(1, 0, WORLD))
    r0.call("MPI_Wait", "MPI_Request request=[1]", "MPI_Status status=<IGNORED>")
    r1 = Rank(compute=False).call(*dup).call(*send(0, 8, 0, WORLD)).call(*send(0, 8, 7, comm(4)))
    path = write_ranks(tmp_path / "ctx", [r0, r1])
    prog = read_trace(path)
    # Contexts in the order the trace first uses them: the dup's (0), then the world's (1).
    assert [op for op in without_compute(prog, 0) if op[0] == IRECV] == [(IRECV, 1, 0, ANY), (IRECV, 1, 0, 0 | 1 << 32)]
    assert [op for op in without_compute(prog, 1) if op[0] == ISEND] == [(ISEND, 0, 8, 0 | 1 << 32), (ISEND, 0, 8, 7)]
    assert runtime_ns(path, 2) == pytest.approx(one_packet_ns(8) + 34 * 0.08, abs=0.01)


def rendezvous_ns(nbytes: int, control: int = 64) -> float:
    """One rendezvous across the default single switch, its receive posted: RTS and CTS of
    `control` bytes, then the data in 4096-byte packets (the default MTU; 26 bytes of header each)."""
    return 2 * one_packet_ns(control) + (nbytes + 26 * -(-nbytes // 4096)) * 0.08 + 140


def test_a_synchronous_send_completes_once_its_receive_is_posted(tmp_path):
    # Rank 0 Ssends 8 bytes at once; rank 1 computes 50 us, then receives. The data waits at rank
    # 1; the match sends an acknowledgement (64 bytes) back, and the Ssend completes on its arrival.
    r0 = dumpi_init(Dumpi()).rec(*("MPI_Ssend", 1000, 1050), *send(1, 8, 0, WORLD)[1:])
    r1 = dumpi_init(Dumpi()).rec(*("MPI_Recv", 51000, 51050), *recv(0, 0, WORLD)[1:])
    path = write_dumpi(tmp_path / "ssend", [r0, r1])
    assert [op for op in ops(read_trace(path), 0) if op[0] == ISEND] == [(ISEND, 1 | 1 << 32, 8, 0)]
    assert runtime_ns(path, 2) == pytest.approx(50_000 + one_packet_ns(64), abs=0.01)


def test_buffered_sends_to_each_other_complete_without_their_receives(tmp_path):
    # Each of 2 ranks Bsends 1 MiB (rendezvous) to the other, then receives: legal MPI, as a
    # buffered send completes locally. Both rendezvous then run at once, one per link direction.
    mib = 1 << 20
    ranks = []
    for r in range(2):
        rk = Rank(compute=False).call("MPI_Buffer_attach", "int size=2000000")
        rk.call("MPI_Bsend", *send(1 - r, mib, 0, WORLD)[1:]).call(*recv(1 - r, 0, WORLD))
        ranks.append(rk)
    path = write_ranks(tmp_path / "bsend", ranks)
    assert [op[:3] for op in ops(read_trace(path), 0) if op[0] == ISEND] == [(ISEND, 1 | 2 << 32, mib)]
    assert runtime_ns(path, 2) == pytest.approx(rendezvous_ns(mib), abs=0.01)


def test_dumpi_split_undefined_color_and_nested_split(tmp_path):
    # Rank 3 passes MPI_UNDEFINED and gets MPI_COMM_NULL; ranks 0-2 then split their communicator
    # again, rank 1 alone and {0, 2}, and send on the inner one.
    ranks = []
    for r in range(4):
        rk = Rank().call(*split(-32766 if r == 3 else 0, 0, 1 if r == 3 else 4))
        if r < 3:
            rk.call(*split(r % 2, 0, 5, "MPI_Comm oldcomm=4 (user-defined-comm)"))
            rk.call("MPI_Bcast", "int count=3", "MPI_Datatype datatype=5 (MPI_BYTE)", "int root=0", comm(4))
        if r == 0:
            rk.call(*send(1, 30, 1, comm(5)))
        if r == 2:
            rk.call(*recv(0, 1, comm(5)))
        ranks.append(rk)
    first = write_ranks(tmp_path / "undef", ranks)
    prog = read_trace(first)
    assert prog.communicators == [(0, 1, 2)]
    assert without_compute(prog, 3) == []
    assert without_compute(prog, 0) == [coll(BCAST, 3, 0, comm=1), (ISEND, 2, 30, 1), (WAIT, 0, 0, 0)]
    assert without_compute(prog, 1) == [coll(BCAST, 3, 0, comm=1)]  # alone in its inner communicator
    assert without_compute(prog, 2) == [coll(BCAST, 3, 0, comm=1), (IRECV, 0, 0, 1), (WAIT, 0, 0, 0)]
    assert (0, 2, 30) in replay(first, 4)


def dumpi_comm_create() -> list[Rank]:
    """4 ranks. MPI_Group_incl of world ranks [3, 1] and MPI_Comm_create: ranks 3 and 1 get
    communicator 4 (rank 3 is its rank 0), ranks 0 and 2 MPI_COMM_NULL; rank 3 sends 500 bytes to
    its rank 1, and both bcast 64 doubles on a dup of it. MPI_Group_excl of [0, 3] and a second
    MPI_Comm_create: ranks 1 and 2 get communicator 6; rank 1 sends 300 bytes to its rank 1."""
    out = []
    for r in range(4):
        rk = Rank().call("MPI_Comm_group", WORLD, group(3))
        rk.call("MPI_Group_incl", group(3), "int count=2", "int ranks[2]=[3, 1]", group(4, "newgroup"))
        rk.call("MPI_Comm_create", "MPI_Comm oldcomm=2 (MPI_COMM_WORLD)", group(4), comm(4 if r in (1, 3) else 1, "newcomm"))
        rk.call("MPI_Group_excl", group(3), "int count=2", "int ranks[2]=[0, 3]", group(5, "newgroup"))
        rk.call("MPI_Comm_create", "MPI_Comm oldcomm=2 (MPI_COMM_WORLD)", group(5), comm(6 if r in (1, 2) else 1, "newcomm"))
        rk.call("MPI_Group_free", group(4)).call("MPI_Group_free", group(5))
        if r in (1, 3):
            rk.call("MPI_Comm_dup", comm(4, "oldcomm"), comm(5, "newcomm"))
            rk.call(*(send(1, 500, 3, comm(4)) if r == 3 else recv(0, 3, comm(4))))
            rk.call("MPI_Bcast", "int count=64", "MPI_Datatype datatype=14 (MPI_DOUBLE)", "int root=0", comm(5))
        if r == 1:
            rk.call(*send(1, 300, 4, comm(6)))
        if r == 2:
            rk.call(*recv(0, 4, comm(6)))
        out.append(rk)
    return out


def test_dumpi_comm_create_group_incl_and_excl_with_sends(tmp_path):
    first = write_ranks(tmp_path / "create", dumpi_comm_create())
    prog = read_trace(first)
    assert prog.skipped == {}
    assert prog.communicators == [(3, 1)]  # the dup shares the list; {1, 2} carries no collective
    assert without_compute(prog, 3) == [(ISEND, 1, 500, 3), (WAIT, 0, 0, 0), coll(BCAST, 512, 0, comm=1)]
    # The sends on {1, 2} match in that communicator's context (1; {3, 1}'s is 0).
    assert without_compute(prog, 1) == [(IRECV, 3, 0, 3), (WAIT, 0, 0, 0), coll(BCAST, 512, 0, comm=1), (ISEND, 2, 300, 4 | 1 << 32), (WAIT, 1, 0, 0)]
    assert without_compute(prog, 2) == [(IRECV, 1, 0, 4 | 1 << 32), (WAIT, 0, 0, 0)]
    assert without_compute(prog, 0) == []
    # The bcast's root is rank 0 of the communicator: world rank 3.
    assert replay(first, 4) == sorted([(3, 1, 500), (3, 1, 512), (1, 2, 300)])


def test_dumpi_cartesian_rows_and_columns(tmp_path):
    # A 2 x 3 grid; MPI_Cart_sub keeps rows {0, 1, 2}, {3, 4, 5} (allreduce) and columns
    # {r, r + 3} (rank 0 of each column sends to its rank 1).
    ranks = []
    for r in range(6):
        rk = Rank().call("MPI_Cart_create", "MPI_Comm oldcomm=2 (MPI_COMM_WORLD)", "int ndim=2", "int dims[2]=[2, 3]",
                         "int periods[2]=[0, 0]", "int reorder=0", comm(4, "newcomm"))
        rk.call("MPI_Cart_sub", "int ndim=2", comm(4, "oldcomm"), "int remain_dims[2]=[0, 1]", comm(5, "newcomm"))
        rk.call("MPI_Cart_sub", "int ndim=2", comm(4, "oldcomm"), "int remain_dims[2]=[1, 0]", comm(6, "newcomm"))
        rk.call(*allreduce(2, comm(5)))
        rk.call(*(send(1, 100, 0, comm(6)) if r < 3 else recv(0, 0, comm(6))))
        ranks.append(rk)
    prog = read_trace(write_ranks(tmp_path / "cart", ranks))
    assert prog.communicators == [(0, 1, 2), (3, 4, 5)]
    for r in range(3):
        # Column r's messages match in its own context, r.
        assert without_compute(prog, r) == [coll(ALLREDUCE, 16, 0, comm=1), (ISEND, r + 3, 100, r << 32), (WAIT, 0, 0, 0)]
        assert without_compute(prog, r + 3) == [coll(ALLREDUCE, 16, 1, comm=2), (IRECV, r, 0, r << 32), (WAIT, 0, 0, 0)]


def _bad_split_count(ranks: list[Rank]) -> tuple[int, str, int, str]:
    ranks[1].call(*split(0, 0, 7))
    return 1, "MPI_Comm_split entering", 2, (
        "MPI_Comm_split on MPI_COMM_WORLD (ranks 0-3): rank 1 calls 2 communicator constructors on it but rank 0 calls 1")


def _bad_before_creation(ranks: list[Rank]) -> tuple[int, str, int, str]:
    # Rank 2 sends on its pair handle before the split that makes it.
    ranks[2].d.lines.insert(5, "\n".join([  # right after MPI_Init
        "MPI_Send entering at walltime 1296777956.000001500, cputime 0.007712000 seconds in thread 0.",
        *send(1, 8, 0, comm(4))[1:],
        "MPI_Send returning at walltime 1296777956.000001600, cputime 0.007716000 seconds in thread 0.",
    ]))
    return 2, comm(4), 1, "MPI_Send: communicator 4 is unknown here: no call before this line made it"


def _bad_unknown_handle(ranks: list[Rank]) -> tuple[int, str, int, str]:
    ranks[3].call(*allreduce(1, comm(9)))
    return 3, comm(9), 1, "MPI_Allreduce: communicator 9 is unknown here"


def _bad_group_incl(ranks: list[Rank]) -> tuple[int, str, int, str]:
    for rk in ranks:
        rk.call("MPI_Comm_group", WORLD, group(3))
        rk.call("MPI_Group_incl", group(3), "int count=2", "int ranks[2]=[0, 7]", group(4, "newgroup"))
        rk.call("MPI_Comm_create", "MPI_Comm oldcomm=2 (MPI_COMM_WORLD)", group(4), comm(1, "newcomm"))
    return 0, "MPI_Group_incl entering", 1, (
        "MPI_Group_incl: rank 7 is not in group 3 made by MPI_Comm_group at ... which has 4 ranks (0..3) "
        "(the group of MPI_Comm_create on MPI_COMM_WORLD (ranks 0-3) at")


def _bad_constructor_kind(ranks: list[Rank]) -> tuple[int, str, int, str]:
    for r, rk in enumerate(ranks):
        rk.call(*(("MPI_Comm_dup", "MPI_Comm oldcomm=2 (MPI_COMM_WORLD)", comm(8, "newcomm")) if r == 2 else split(0, 0, 8)))
    return 2, "MPI_Comm_dup entering", 1, "communicator constructor #1 on MPI_COMM_WORLD (ranks 0-3) is MPI_Comm_dup on rank 2 but MPI_Comm_split on rank 0"


def _bad_peer(ranks: list[Rank]) -> tuple[int, str, int, str]:
    ranks[2].call(*send(2, 8, 0, comm(4)))
    return 2, "int dest=2", 1, "MPI_Send: rank 2 is not in communicator 4 made by MPI_Comm_split at"


def _bad_collective_count(ranks: list[Rank]) -> tuple[int, str, int, str]:
    ranks[3].call(*allreduce(1, comm(5)))
    return 3, "MPI_Allreduce entering", 2, "rank 1 calls 1 collective on communicator 5 made by MPI_Comm_split at"


def _bad_comm_rank(ranks: list[Rank]) -> tuple[int, str, int, str]:
    ranks[0].call("MPI_Comm_rank", comm(4), "int rank=0")
    return 0, "MPI_Comm_rank entering", 2, "returns 0, but the MPI_Comm_split calls of its ranks make it world ranks [2, 0]"


def _bad_null(ranks: list[Rank]) -> tuple[int, str, int, str]:
    for r, rk in enumerate(ranks):
        rk.call(*split(0, 0, 1 if r == 1 else 8))
    return 1, "MPI_Comm_split entering", 2, "rank 1 gets MPI_COMM_NULL in the trace, but the other ranks' calls place it in a new communicator"


def _bad_create_outside(ranks: list[Rank]) -> tuple[int, str, int, str]:
    # The even pair creates a communicator from a group holding world rank 1, which is not in it.
    for r, rk in enumerate(ranks):
        rk.call("MPI_Comm_group", WORLD, group(3))
        rk.call("MPI_Group_incl", group(3), "int count=1", "int ranks[1]=[1]", group(4, "newgroup"))
        if r % 2 == 0:
            rk.call("MPI_Comm_create", comm(4, "oldcomm"), group(4), comm(1, "newcomm"))
    return 2, "MPI_Comm_create entering", 1, "its group holds rank 1, which is not in the communicator"


@pytest.mark.parametrize(
    "spoil",
    [_bad_split_count, _bad_before_creation, _bad_unknown_handle, _bad_group_incl, _bad_constructor_kind, _bad_peer,
     _bad_collective_count, _bad_comm_rank, _bad_null, _bad_create_outside],
)
def test_dumpi_communicators_that_cannot_be_rebuilt_name_file_line_and_communicator(tmp_path, spoil):
    ranks = dumpi_split_pairs(free=False)
    rank, text, nth, expected = spoil(ranks)
    first = write_ranks(tmp_path / "bad", ranks)
    path = first.parent / f"app-{rank:04d}.txt"
    with pytest.raises(ScenarioError) as e:
        read_trace(first, key="jobs[0].workload.path")
    msg = str(e.value)
    assert e.value.problems[0][0] == "jobs[0].workload.path"
    # "a ... b": a, then b later in the message
    at = 0
    for part in expected.split(" ... "):
        assert part in msg[at:], msg
        at = msg.index(part, at) + len(part)
    assert f"{path}, line {line_of(path, text, nth)}" in msg, msg
    assert "\n" not in msg


def otf2_pairs(folder: Path, extra: Callable[[Otf2Trace, list], None] | None = None) -> Path:
    """The OTF2 twin of dumpi_split_pairs: pair communicators {2, 0} and {3, 1} (Score-P lists a
    split's members in communicator rank order), a one-rank communicator (Score-P's COMM_SELF
    group), allreduces of 192 and 320 bytes, a send of 1000 (2000) bytes from pair rank 0 to pair
    rank 1, a world barrier."""
    t = Otf2Trace(folder, 4)
    d = t.w.definitions
    pairs = [d.comm("", group=d.group("", group_type=GroupType.COMM_GROUP, paradigm=Paradigm.MPI, members=m), parent=t.world)
             for m in ([2, 0], [3, 1])]
    selfish = d.comm("", group=d.group("", group_type=GroupType.COMM_SELF, paradigm=Paradigm.MPI, members=[]))
    for r in range(4):
        c = pairs[r % 2]
        me = 1 if r < 2 else 0
        size = 192 if r % 2 == 0 else 320
        t.call(r, "MPI_Init", 0, 10)
        t.call(r, "MPI_Comm_split", 10, 20)
        t.call(r, "MPI_Allreduce", 30, 40, ("mpi_collective_begin", 31),
               ("mpi_collective_end", 39, CollectiveOp.ALLREDUCE, c, UNDEFINED_ROOT, 2 * size, 2 * size))
        t.call(r, "MPI_Bcast", 50, 60, ("mpi_collective_begin", 51),
               ("mpi_collective_end", 59, CollectiveOp.BCAST, selfish, 0, 0, 8))
        if me == 0:
            t.call(r, "MPI_Send", 70, 80, ("mpi_send", 71, 1, c, 7, 1000 if r % 2 == 0 else 2000))
        else:
            t.call(r, "MPI_Recv", 70, 80, ("mpi_recv", 79, 0, c, 7, 1000 if r % 2 == 0 else 2000))
    if extra is not None:
        extra(t, pairs)  # events from time 100 to 190
    for r in range(4):
        t.call(r, "MPI_Barrier", 200, 210, ("mpi_collective_end", 209, CollectiveOp.BARRIER, t.world, UNDEFINED_ROOT, 0, 0))
    return t.close()


def test_otf2_split_pairs_collectives_and_sends(tmp_path):
    anchor = otf2_pairs(tmp_path / "pairs")
    prog = read_trace(anchor)
    assert prog.skipped == {} and prog.approximated == {}
    assert prog.communicators == [(2, 0), (3, 1)]
    assert without_compute(prog, 0) == [coll(ALLREDUCE, 192, 0, comm=1), (IRECV, 2, 0, 7), (WAIT, 0, 0, 0), coll(BARRIER, 0, 2)]
    assert without_compute(prog, 3) == [coll(ALLREDUCE, 320, 1, comm=2), (ISEND, 1, 2000, 7 | 1 << 32), (WAIT, 0, 0, 0), coll(BARRIER, 0, 2)]
    messages = replay(anchor, 4)
    assert payload(messages) == sorted([(2, 0, 1000), (3, 1, 2000), (0, 2, 192), (2, 0, 192), (1, 3, 320), (3, 1, 320)])


def test_otf2_created_communicator_with_a_subset_of_ranks(tmp_path):
    # A communicator of world ranks [3, 1] (MPI_Comm_create from MPI_Group_incl): only they use it.
    t = Otf2Trace(tmp_path / "create", 4)
    d = t.w.definitions
    c = d.comm("", group=d.group("", group_type=GroupType.COMM_GROUP, paradigm=Paradigm.MPI, members=[3, 1]), parent=t.world)
    for r in range(4):
        t.call(r, "MPI_Init", 0, 10)
        t.call(r, "MPI_Comm_create", 10, 20)
    t.call(3, "MPI_Send", 30, 40, ("mpi_send", 31, 1, c, 3, 500))
    t.call(1, "MPI_Recv", 30, 40, ("mpi_recv", 39, 0, c, 3, 500))
    for r in (3, 1):
        t.call(r, "MPI_Bcast", 50, 60, ("mpi_collective_end", 59, CollectiveOp.BCAST, c, 0, 512 if r == 3 else 0, 512))
    anchor = t.close()
    prog = read_trace(anchor)
    assert prog.communicators == [(3, 1)]
    assert without_compute(prog, 3) == [(ISEND, 1, 500, 3), (WAIT, 0, 0, 0), coll(BCAST, 512, 0, comm=1)]
    assert without_compute(prog, 1) == [(IRECV, 3, 0, 3), (WAIT, 0, 0, 0), coll(BCAST, 512, 0, comm=1)]
    assert without_compute(prog, 0) == without_compute(prog, 2) == []
    assert replay(anchor, 4) == [(3, 1, 500), (3, 1, 512)]


def _otf2_not_a_member(t: Otf2Trace, pairs: list) -> tuple[int, str]:
    # Rank 1 (odd pair) records an allreduce on the even pair's communicator.
    t.call(1, "MPI_Allreduce", 100, 110, ("mpi_collective_end", 109, CollectiveOp.ALLREDUCE, pairs[0], UNDEFINED_ROOT, 8, 8))
    return 1, "rank 1 is not a member of communicator #1 of the definitions (ranks 0, 2)"


def _otf2_bad_peer(t: Otf2Trace, pairs: list) -> tuple[int, str]:
    t.call(2, "MPI_Send", 100, 110, ("mpi_send", 101, 2, pairs[0], 0, 8))
    return 2, "peer 2 is not in communicator #1 of the definitions (ranks 0, 2), which has 2 ranks"


def _otf2_collective_count(t: Otf2Trace, pairs: list) -> tuple[int, str]:
    t.call(3, "MPI_Allreduce", 100, 110, ("mpi_collective_end", 109, CollectiveOp.ALLREDUCE, pairs[1], UNDEFINED_ROOT, 8, 8))
    return -1, "rank 1 calls 1 collective on communicator #2 of the definitions (ranks 1, 3) but rank 3 calls 2"


def _otf2_opposite_orders(t: Otf2Trace, pairs: list) -> tuple[int, str]:
    # A dup of the even pair: rank 0 calls a barrier on the dup then on the pair, rank 2 the reverse.
    d = t.w.definitions
    dup = d.comm("", group=d.group("", group_type=GroupType.COMM_GROUP, paradigm=Paradigm.MPI, members=[2, 0]), parent=pairs[0])
    for r, order in ((0, (dup, pairs[0])), (2, (pairs[0], dup))):
        for i, c in enumerate(order):
            t.call(r, "MPI_Barrier", 100 + 20 * i, 110 + 20 * i, ("mpi_collective_end", 109 + 20 * i, CollectiveOp.BARRIER, c, UNDEFINED_ROOT, 0, 0))
    return -1, "the ranks call collectives on overlapping communicators in orders that can deadlock"


@pytest.mark.parametrize("spoil", [_otf2_not_a_member, _otf2_bad_peer, _otf2_collective_count, _otf2_opposite_orders])
def test_otf2_bad_communicator_use_names_file_location_event_and_communicator(tmp_path, spoil):
    found: list[tuple[int, str]] = []
    anchor = otf2_pairs(tmp_path / "bad", lambda t, pairs: found.append(spoil(t, pairs)))
    rank, expected = found[0]
    with pytest.raises(ScenarioError) as e:
        read_trace(anchor, key="jobs[0].workload.path")
    msg = str(e.value)
    assert msg.startswith(f"jobs[0].workload.path: {anchor}: "), msg
    assert expected in msg, msg
    if rank >= 0:  # an event's error names the rank, its location and the event's index
        assert f"rank {rank} (location 'Master thread'), event #" in msg, msg
    else:  # matching across ranks names each call's event
        assert ", event #" in msg, msg


def test_cli_names_a_communicator_that_cannot_be_rebuilt_without_traceback(tmp_path):
    from qoslab.cli import app
    from typer.testing import CliRunner

    ranks = dumpi_split_pairs()
    _bad_group_incl(ranks)
    first = write_ranks(tmp_path / "trace", ranks)
    scenario = tmp_path / "s.toml"
    scenario.write_text(
        '[topology]\nkind = "single-switch"\nhosts = 4\n[[jobs]]\nname = "t"\nnodes = 4\n'
        'workload = { kind = "trace", path = "trace/app-0000.txt" }\n'
    )
    result = CliRunner().invoke(app, ["run", str(scenario), "--out", str(tmp_path / "out")])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    line = line_of(first, "MPI_Group_incl entering")
    assert f"{scenario}: jobs[0].workload.path: {first}, line {line}: MPI_Group_incl: rank 7 is not in group 3" in result.stderr


# ---------------------------------------------------------------------------------------------
# Bad input in general
# ---------------------------------------------------------------------------------------------


def test_missing_files(tmp_path):
    with pytest.raises(ScenarioError, match="no such file") as e:
        read_trace(tmp_path / "nothing" / "traces.otf2", key="jobs[0].workload.path")
    assert e.value.problems[0][0] == "jobs[0].workload.path"
    with pytest.raises(ScenarioError, match="no such file"):
        read_trace(tmp_path / "nothing-0000.txt")
    with pytest.raises(ScenarioError, match="no such file or folder"):
        read_trace(tmp_path / "nothing")


def test_unknown_format(tmp_path):
    f = tmp_path / "trace.json"
    f.write_text("{}")
    with pytest.raises(ScenarioError, match="cannot tell the trace format"):
        read_trace(f)
    with pytest.raises(ScenarioError) as e:
        read_trace(f, format="vampir", key="jobs[2].workload.path")
    assert e.value.problems == [("jobs[2].workload.format", 'expected "otf2" or "dumpi", got \'vampir\'')]
    with pytest.raises(ScenarioError, match="binary DUMPI"):
        read_trace(tmp_path / "x-0000.bin")
    with pytest.raises(ScenarioError) as e:
        read_trace(f, cpu_speedup=0, key="jobs[0].workload.path")
    assert e.value.problems[0][0] == "jobs[0].workload.cpu_speedup"


def test_wrong_format_given(tmp_path):
    first = write_dumpi(tmp_path / "d", dumpi_pair())
    with pytest.raises(ScenarioError, match="not a readable OTF2 archive"):
        read_trace(first, format="otf2")
    anchor = write_ping_pong(tmp_path / "pp")
    with pytest.raises(ScenarioError):
        read_trace(anchor, format="dumpi")


def test_rank_count_checked(tmp_path):
    anchor = write_ping_pong(tmp_path / "pp")
    with pytest.raises(ScenarioError, match="the trace has 2 ranks but the job has 4"):
        read_trace(anchor, ranks=4)


def test_error_has_no_traceback_noise(tmp_path):
    # A user error is a ScenarioError (a ValueError), rendered on one line per problem.
    with pytest.raises(ValueError) as e:
        read_trace(tmp_path / "missing.otf2", source="scenario.toml", key="jobs[0].workload.path")
    assert str(e.value).startswith("scenario.toml: jobs[0].workload.path: ")


# ---------------------------------------------------------------------------------------------
# Real traces (shared/traces): recorded by Score-P and sst-dumpi
# ---------------------------------------------------------------------------------------------


@needs_shared
def test_real_otf2_ping_pong():
    prog = read_trace(SHARED / "ping-pong-otf2" / "traces.otf2")
    assert prog.ranks == 2 and prog.skipped == {} and prog.approximated == {}
    sizes = [16384 << k for k in range(8)]  # 16 KiB .. 2 MiB
    expect0, expect1 = [], []
    n = 0
    for size in sizes:
        expect0 += [(ISEND, 1, size, 10), (WAIT, n, 0, 0), (IRECV, 1, 0, 20), (WAIT, n + 1, 0, 0)]
        expect1 += [(IRECV, 0, 0, 10), (WAIT, n, 0, 0), (ISEND, 0, size, 20), (WAIT, n + 1, 0, 0)]
        n += 2
    assert [op for op in ops(prog, 0) if op[0] != COMPUTE] == expect0
    assert [op for op in ops(prog, 1) if op[0] != COMPUTE] == expect1
    # Rank 0's first compute: the gaps between MPI_Init, MPI_Comm_size, MPI_Comm_rank and the
    # first MPI_Send, 46996 ticks of a 2095197216 Hz timer.
    assert ops(prog, 0)[0] == (COMPUTE, round(46996 * 10**12 / 2095197216), 0, 0)
    s = prog.summary()
    assert s["messages"] == 16 and s["message_bytes"] == 2 * sum(sizes)


@needs_shared
def test_real_dumpi_rank0():
    folder = SHARED / "dumpi-4rank"
    # Only rank 0 is in dumpi2ascii form: a job needs all four and the error says which are missing.
    with pytest.raises(ScenarioError) as e:
        read_trace(folder / "testtrace-0000.txt", key="jobs[0].workload.path")
    msg = str(e.value)
    assert "4 ranks" in msg and "testtrace-0001.txt, testtrace-0002.txt, testtrace-0003.txt" in msg
    # Rank 0 on its own: Barrier, Isend to 1, Recv from 3, Wait, Allreduce of one MPI_INT.
    rank_ops, skipped = read_dumpi_rank(folder / "testtrace-0000.txt", rank=0, ranks=4)
    assert skipped == {}
    assert rank_ops == [
        (COMPUTE, 37_000_000, 0, 0),  # 24 + 6 + 7 us between MPI_Init, Comm_rank, Comm_size, Barrier
        coll(BARRIER, 0, 0),
        (COMPUTE, 15_000_000, 0, 0),
        (ISEND, 1, 4, 1337),
        (COMPUTE, 10_000_000, 0, 0),
        (IRECV, 3, 0, 1337),
        (WAIT, 1, 0, 0),
        (COMPUTE, 8_000_000, 0, 0),
        (WAIT, 0, 0, 0),
        (COMPUTE, 15_000_000, 0, 0),
        coll(ALLREDUCE, 4, 1),
        (COMPUTE, 7_000_000, 0, 0),  # trailing compute: 7 us from the allreduce's return to MPI_Finalize
    ]


@needs_shared
def test_real_dumpi_full_job_when_converted(tmp_path):
    # With the other ranks' text files present (here: rank 0's records re-targeted), the folder reads.
    folder = SHARED / "dumpi-4rank"
    shutil.copy(folder / "testtrace.meta", tmp_path / "testtrace.meta")
    text = (folder / "testtrace-0000.txt").read_text()
    for r in range(4):
        t = text.replace("int dest=1", f"int dest={(r + 1) % 4}").replace("int source=3", f"int source={(r + 3) % 4}")
        (tmp_path / f"testtrace-{r:04d}.txt").write_text(t)
    prog = read_trace(tmp_path)
    assert prog.ranks == 4
    assert prog.summary()["messages"] == 4
    assert prog.summary()["collectives"] == {"barrier": 4, "allreduce": 4}
    for r in range(4):
        sends = [op for op in ops(prog, r) if op[0] == ISEND]
        assert sends == [(ISEND, (r + 1) % 4, 4, 1337)]


# ---------------------------------------------------------------------------------------------
# Real traces with communicators (shared/real-data/traces): expectations computed from the
# traces themselves, with a plain text scan (DUMPI) or the otf2 package (OTF2)
# ---------------------------------------------------------------------------------------------


def real_traces() -> Path | None:
    env = os.environ.get("QOSLAB_REAL_TRACES")
    candidates = [Path(env)] if env else []
    candidates.append(Path(__file__).resolve().parents[1].parent / "shared" / "real-data" / "traces")
    for c in candidates:
        if c.is_dir():
            return c
    return None


REAL = real_traces()
needs_real = pytest.mark.skipif(
    REAL is None,
    reason="real traces not found: set QOSLAB_REAL_TRACES or put them in ../shared/real-data/traces next to the repo",
)


def dumpi_records(path: Path) -> list[tuple[str, dict[str, str]]]:
    """(call, {parameter: value}) per record of a dumpi2ascii file, by a plain scan of the text."""
    out: list[tuple[str, dict[str, str]]] = []
    params: dict[str, str] | None = None
    for line in path.read_text().splitlines():
        if " entering at walltime " in line:
            params = {}
            out.append((line.split()[0], params))
        elif " returning at walltime " in line:
            params = None
        elif params is not None and "=" in line:
            name, value = line.split("=", 1)
            params[name.split()[-1].split("[")[0]] = value.split(" (")[0]
    return out


@needs_real
def test_real_dumpi_point_to_point_on_a_comm_create_communicator():
    """sstmacro-testbgp-7: 7 ranks (Blue Gene/P). Sends and receives run on a communicator made
    by MPI_Comm_create from MPI_Group_incl of MPI_COMM_WORLD's group; alltoalls on it too."""
    folder = REAL / "sstmacro-testbgp-7"
    meta = dict(line.split("=", 1) for line in (folder / "testbgp.meta").read_text().splitlines() if "=" in line)
    n = int(meta["numprocs"])
    prog = read_trace(folder)
    assert prog.ranks == n == 7
    assert prog.skipped == {} and prog.approximated == {}
    collectives: Counter[str] = Counter()
    expected_bytes = []
    for r in range(n):
        records = dumpi_records(folder / f"testbgp-{r:04d}.txt")
        incl = [p for name, p in records if name == "MPI_Group_incl"]
        assert len(incl) == 1
        world_of = [int(x) for x in incl[0]["ranks"].strip("[]").split(",")]  # comm rank -> world rank
        comm = next(p["newcomm"] for name, p in records if name == "MPI_Comm_create")
        sends = [(ISEND, world_of[int(p["dest"])], 8 * int(p["count"]), int(p["tag"]))
                 for name, p in records if name == "MPI_Isend" and p["comm"] == comm and p["datatype"] == "14"]
        receives = [(IRECV, world_of[int(p["source"])], 0, int(p["tag"]))
                    for name, p in records if name == "MPI_Irecv" and p["comm"] == comm]
        assert len(sends) == sum(1 for name, _ in records if name == "MPI_Isend") > 0
        rank_ops = ops(prog, r)
        assert [op for op in rank_ops if op[0] == ISEND] == sends
        assert [op for op in rank_ops if op[0] == IRECV] == receives
        alltoalls = [8 * int(p["sendcount"]) for name, p in records if name == "MPI_Alltoall"]
        collectives["alltoall"] += len(alltoalls)
        collectives["barrier"] += sum(1 for name, _ in records if name == "MPI_Barrier")
        # Each alltoall sends one block to each other rank; barriers send nothing.
        expected_bytes.append(sum(s[2] for s in sends) + sum(b * (n - 1) for b in alltoalls))
    assert prog.summary()["collectives"] == dict(collectives)
    assert prog.communicators == []  # the created communicator holds every rank, in order
    messages = replay(folder, n)
    sent = [sum(b for s, _, b in messages if s == r) for r in range(n)]
    assert sent == expected_bytes


@needs_real
def test_real_otf2_split_pairs_and_one_rank_communicators():
    """sstmacro-otf2-10: 10 ranks; point-to-point and collectives on MPI_COMM_WORLD, on
    MPI_Comm_split pairs and on one-rank communicators."""
    anchor = REAL / "sstmacro-otf2-10" / "traces.otf2"
    prog = read_trace(anchor)
    with otf2.reader.open(str(anchor)) as trace:
        defs = trace.definitions
        world = next(list(g.members) for g in defs.groups if g.group_type == GroupType.COMM_LOCATIONS)
        rank_of = {loc: r for r, loc in enumerate(world)}
        sends: list[list[tuple[int, int, int, int]]] = [[] for _ in world]
        colls: Counter[int] = Counter()
        lists: set[tuple[int, ...]] = set()
        regions: Counter[str] = Counter()
        for loc, ev in trace.events:
            r = rank_of[loc]
            kind = type(ev).__name__
            if kind == "Enter":
                regions[ev.region.name] += 1
            elif kind in ("MpiIsend", "MpiSend"):
                members = [rank_of[m] for m in ev.communicator.group.members] or [r]  # COMM_SELF: the rank
                sends[r].append((ISEND, members[ev.receiver], ev.msg_length, ev.msg_tag))
            elif kind == "MpiCollectiveEnd" and ev.communicator.group.group_type != GroupType.COMM_SELF:
                if ev.collective_op in (CollectiveOp.GATHER, CollectiveOp.SCATTER):
                    continue
                colls[r] += 1
                members = tuple(rank_of[m] for m in ev.communicator.group.members)
                if members != tuple(range(len(world))):
                    lists.add(members)
    assert prog.ranks == len(world) == 10
    for r in range(prog.ranks):
        assert [(*op[:3], op[3] & 0xFFFFFFFF) for op in ops(prog, r) if op[0] == ISEND] == sends[r], r
        assert sum(1 for op in ops(prog, r) if op[0] == COLLECTIVE) == colls[r], r
    assert sorted(prog.communicators) == sorted(lists) == [(0, 6), (1, 7), (2, 8), (3, 9)]
    # Gathers, scatters and non-blocking collectives are not replayed, and are counted.
    assert prog.skipped == {name: regions[name] for name in ("MPI_Gather", "MPI_Iallgather", "MPI_Iallreduce", "MPI_Ialltoall", "MPI_Scatter")}
    messages = replay(anchor, prog.ranks)
    # Between ranks, the fabric carries every send whose destination is another rank.
    between = [s for r in range(prog.ranks) for s in sends[r] if s[1] != r]
    assert len(payload(messages)) >= len([s for s in between if s[2] > 0])


def test_a_meta_file_claiming_a_billion_ranks_is_refused_without_listing_them(tmp_path):
    anchor = write_dumpi(tmp_path / "t", dumpi_pair())
    (tmp_path / "t" / "app.meta").write_text("hostname=testhost\nnumprocs=999999999\nfileprefix=app\n")
    with pytest.raises(ScenarioError, match=r"999999999 ranks but the dumpi2ascii files of 999999997 are missing "
                                            r"\(ranks 2-10001, \.\.\.: app-0002\.txt"):
        read_trace(anchor, key="jobs[0].workload.path")


def test_dumpi_request_free_forgets_the_request(tmp_path):
    # A freed send's handle, reused by a call qoslab skips, completes nothing when waited on:
    # the rank does not wait for the freed send (MPI_Request_free was once misspelled, so the
    # wait fell on the send).
    r0 = dumpi_init(Dumpi())
    r0.rec("MPI_Isend", 2000, 2100, "int count=1024", "MPI_Datatype datatype=5 (MPI_BYTE)", "int dest=1", "int tag=1", WORLD,
           "MPI_Request request=[7]")
    r0.rec("MPI_Request_free", 2200, 2300, "MPI_Request request=[7]")
    r0.rec("MPI_Ibarrier", 2400, 2500, WORLD, "MPI_Request request=[7]")
    r0.rec("MPI_Wait", 2600, 2700, "MPI_Request request=[7]", "MPI_Status status=<IGNORED>")
    r0.rec("MPI_Finalize", 3000, 4000)
    r1 = dumpi_init(Dumpi())
    r1.rec("MPI_Recv", 2000, 2900, "int count=1024", "MPI_Datatype datatype=5 (MPI_BYTE)", "int source=0", "int tag=1", WORLD,
           "MPI_Status status=<IGNORED>")
    r1.rec("MPI_Finalize", 3000, 4000)
    program = read_trace(write_dumpi(tmp_path / "d", [r0, r1]))
    assert [op for op in ops(program, 0) if op[0] in (ISEND, WAIT, WAITALL)] == [(ISEND, 1, 1024, 1)]


def test_calls_a_trace_reader_skipped_are_warned_by_run_check_and_study(tmp_path):
    # dumpi_pair has one MPI_Gather, which qoslab skips: the replay is not the traced program,
    # so every command that reads the trace says so, naming the job's key.
    import json

    from qoslab.cli import app
    from qoslab.study.model import Study
    from typer.testing import CliRunner

    write_dumpi(tmp_path / "trace", dumpi_pair())
    scenario = tmp_path / "s.toml"
    scenario.write_text('[topology]\nkind = "single-switch"\nhosts = 2\n[[jobs]]\nname = "t"\nnodes = 2\n'
                        'workload = { kind = "trace", path = "trace/app-0000.txt" }\n')
    warning = "job 't': MPI_Gather skipped (1 call) in its trace (see docs/traces.md)"
    result = CliRunner().invoke(app, ["run", str(scenario), "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert f"warning: {warning}" in result.stderr
    assert json.loads((tmp_path / "out" / "summary.json").read_text())["warnings"] == [warning]
    checked = CliRunner().invoke(app, ["check", str(scenario)])
    assert checked.exit_code == 0 and f"warning: {warning}" in checked.stderr
    as_json = CliRunner().invoke(app, ["check", str(scenario), "--json"])
    assert warning in json.loads(as_json.stdout)["warnings"]
    # A study is told by its runs (the driver does not read the traces), once however many ran.
    from qoslab.sweep.executors import LocalExecutor

    study = Study.from_dict({"scenario": "s.toml", "policies": [{"kind": "default"}], "repetitions": 2},
                            str(tmp_path / "study.toml"))
    outcome = study.run(tmp_path / "study", executor=LocalExecutor(1))
    assert outcome.notes == [f"runs: {warning}"]
    assert f"runs: {warning}" in json.loads((tmp_path / "study" / "study.json").read_text())["warnings"]
    # A sweep is told once, over all its points.
    swept = Study.from_dict({"scenario": "s.toml", "policies": [{"kind": "default"}],
                             "sweep": [{"key": "fabric.link_gbps", "values": [100, 200]}]}, str(tmp_path / "study.toml"))
    assert swept.run(tmp_path / "sweep", executor=LocalExecutor(1)).notes == [f"runs: {warning}"]


def test_a_later_message_that_arrives_first_still_matches_second(tmp_path):
    # MPI's non-overtaking rule: rank 0 sends 16000 B, then 8 B, to rank 1 on the same host; the
    # 8 B copy arrives first. Rank 1's first any-tag receive must still match the 16000 B, so its
    # reply, sent once that receive completes, leaves after the large copy has arrived
    # (shm_latency 300 ns + 16000 B at 160 Gb/s = 1100 ns), not after the small one (300.4 ns).
    import qoslab

    any_tag = "int tag=-1 (MPI_ANY_TAG)"
    r0 = dumpi_init(Dumpi())
    r0.rec("MPI_Isend", 2000, 2000, "int count=16000", "MPI_Datatype datatype=5 (MPI_BYTE)", "int dest=1", "int tag=1", WORLD,
           "MPI_Request request=[1]")
    r0.rec("MPI_Isend", 2000, 2000, "int count=8", "MPI_Datatype datatype=5 (MPI_BYTE)", "int dest=1", "int tag=2", WORLD,
           "MPI_Request request=[2]")
    r0.rec("MPI_Waitall", 2000, 2000, "int count=2", "MPI_Request requests[2]=[1, 2]", "MPI_Status statuses[2]=<IGNORED>")
    r0.rec("MPI_Recv", 2000, 2000, "int count=8", "MPI_Datatype datatype=5 (MPI_BYTE)", "int source=1", "int tag=9", WORLD,
           "MPI_Status status=<IGNORED>")
    r0.rec("MPI_Finalize", 2000, 2000)
    r1 = dumpi_init(Dumpi())
    for handle in (3, 4):
        r1.rec("MPI_Irecv", 2000, 2000, "int count=16000", "MPI_Datatype datatype=5 (MPI_BYTE)", "int source=0", any_tag,
               WORLD, f"MPI_Request request=[{handle}]")
    r1.rec("MPI_Wait", 2000, 2000, "MPI_Request request=[3]", "MPI_Status status=<IGNORED>")
    r1.rec("MPI_Send", 2000, 2000, "int count=8", "MPI_Datatype datatype=5 (MPI_BYTE)", "int dest=0", "int tag=9", WORLD)
    r1.rec("MPI_Wait", 2000, 2000, "MPI_Request request=[4]", "MPI_Status status=<IGNORED>")
    r1.rec("MPI_Finalize", 2000, 2000)
    write_dumpi(tmp_path / "t", [r0, r1])
    scenario = qoslab.Scenario(topology={"kind": "single-switch", "hosts": 2}, mpi={"eager_threshold_bytes": 65536},
                               jobs=[{"name": "t", "nodes": 1, "ranks_per_node": 2,
                                      "workload": {"kind": "trace", "path": str(tmp_path / "t" / "app-0000.txt")}}])
    ranks = {row["rank"]: row["time_ns"] for row in qoslab.simulate(scenario).ranks.to_pylist()}
    # Both start after the trace's 1000 ns of compute. Rank 1 replies once the large copy is in
    # (1100 ns), and rank 0 ends when the reply is (300.4 ns later); matched in arrival order,
    # rank 0 ended at 1000 + 300.4 + 300.4 ns.
    assert ranks == {0: pytest.approx(1000 + 1100 + 300.4), 1: pytest.approx(1000 + 1100)}


def bcast_ranks(roots: list[int]) -> list[Dumpi]:
    ranks = []
    for root in roots:
        d = dumpi_init(Dumpi())
        d.rec("MPI_Bcast", 2000, 3000, "int count=1000", "MPI_Datatype datatype=5 (MPI_BYTE)", f"int root={root}", WORLD)
        d.rec("MPI_Finalize", 4000, 5000)
        ranks.append(d)
    return ranks


def test_a_broadcast_runs_from_its_root(tmp_path):
    # MPI_Bcast from rank 2 of 4: the binomial tree hangs from rank 2 (it had been replayed from
    # rank 0, which put the hot spot on the wrong node): rank 2 sends first, to rank 0 (2 + 2),
    # then to rank 3 (2 + 1), and rank 0 forwards to rank 1 (0 + 1).
    import qoslab

    first = write_dumpi(tmp_path / "t", bcast_ranks([2, 2, 2, 2]))
    program = read_trace(first)
    assert [op for op in ops(program, 3) if op[0] == COLLECTIVE] == [(COLLECTIVE, 1 | 2 << 32, 1000, 0)]
    scenario = qoslab.Scenario(topology={"kind": "single-switch", "hosts": 4}, run={"messages": True},
                               jobs=[{"name": "t", "nodes": 4, "workload": {"kind": "trace", "path": str(first)}}])
    messages = sorted(qoslab.simulate(scenario).messages.to_pylist(), key=lambda m: (m["created_ns"], m["dst"]))
    assert [(m["src"], m["dst"]) for m in messages] == [(2, 0), (2, 3), (0, 1)]


def test_members_naming_different_roots_are_refused(tmp_path):
    first = write_dumpi(tmp_path / "t", bcast_ranks([2, 2, 1, 2]))
    with pytest.raises(ScenarioError, match=r"a bcast, has root 2 on rank 0 .* but root 1 on rank 2 .*: MPI needs every "
                                            r"member to name the same root"):
        read_trace(first)
    first = write_dumpi(tmp_path / "u", bcast_ranks([4, 4, 4, 4]))
    with pytest.raises(ScenarioError, match=r"has root 4, not a rank of its 4"):
        read_trace(first)


def test_a_run_that_deadlocks_still_warns_what_the_reader_skipped(tmp_path):
    # The skipped MPI_Probe may be why rank 0 waits for ever: the warning comes with the error.
    from qoslab.cli import app
    from typer.testing import CliRunner

    r0 = dumpi_init(Dumpi())
    r0.rec("MPI_Probe", 2000, 2100, "int source=1", "int tag=5", WORLD, "MPI_Status status=<IGNORED>")
    r0.rec("MPI_Recv", 2200, 2300, "int count=8", "MPI_Datatype datatype=5 (MPI_BYTE)", "int source=1", "int tag=5", WORLD,
           "MPI_Status status=<IGNORED>")
    r0.rec("MPI_Finalize", 3000, 4000)
    r1 = dumpi_init(Dumpi())
    r1.rec("MPI_Finalize", 3000, 4000)
    write_dumpi(tmp_path / "trace", [r0, r1])
    scenario = tmp_path / "s.toml"
    scenario.write_text('[topology]\nkind = "single-switch"\nhosts = 2\n[[jobs]]\nname = "t"\nnodes = 2\n'
                        'workload = { kind = "trace", path = "trace/app-0000.txt" }\n')
    result = CliRunner().invoke(app, ["run", str(scenario), "--out", str(tmp_path / "out")])
    assert result.exit_code == 1 and "deadlock" in result.stderr.lower(), result.output
    assert "warning: job 't': MPI_Probe skipped (1 call)" in result.stderr


def test_an_in_place_allreduce_is_replayed_at_its_own_size(tmp_path):
    # Score-P counts n blocks sent by an allreduce, n - 1 when it is MPI_IN_PLACE: 3 ranks of
    # 100 bytes record 300 without, 200 with. 200 is no multiple of 3, so it can only be in place
    # (it had been replayed at 67 bytes); 300 is read as 3 blocks, as before.
    for sent, expected in ((200, 100), (300, 100)):
        t = Otf2Trace(tmp_path / f"t{sent}", 3)
        for r in range(3):
            t.call(r, "MPI_Allreduce", 20, 30,
                   ("mpi_collective_end", 29, CollectiveOp.ALLREDUCE, t.world, UNDEFINED_ROOT, sent, sent))
        program = read_trace(t.close())
        assert [op[2] for op in ops(program, 0) if op[0] == COLLECTIVE] == [expected], sent


# ---------------------------------------------------------------------------------------------
# Compute: from MPI_Init's return to MPI_Finalize's start, less the time inside MPI calls
# ---------------------------------------------------------------------------------------------


def compute_ps(program: PackedProgram, rank: int) -> int:
    return sum(op[1] for op in ops(program, rank) if op[0] == COMPUTE)


def dumpi_bracketed(finalize: bool = True) -> list[Dumpi]:
    """Two ranks: MPI_Initialized twice before MPI_Init, a send from 0 to 1, then calls that
    carry no traffic (a skipped MPI_Gather, a barrier on MPI_COMM_SELF, a wait on no request)
    with compute between them, MPI_Finalize, and MPI_Finalized after it. Times in ns."""
    ranks = []
    for r in range(2):
        d = Dumpi()
        d.rec("MPI_Initialized", 0, 100, "int flag=0")
        d.rec("MPI_Initialized", 300 + 50 * r, 350 + 50 * r, "int flag=0")
        d.rec("MPI_Init", 1000, 2000, "int argc=1", 'string argv[1]=["./mpi"]')
        d.rec("MPI_Comm_rank", 2500, 2600, WORLD, f"int rank={r}")
        if r == 0:
            d.rec("MPI_Send", 3600, 3700, "int count=4", "MPI_Datatype datatype=9 (MPI_INT)", "int dest=1", "int tag=3", WORLD)
        else:
            d.rec("MPI_Recv", 3600, 4200, "int count=4", "MPI_Datatype datatype=9 (MPI_INT)", "int source=0", "int tag=3", WORLD,
                  "MPI_Status status=<IGNORED>")
        d.rec("MPI_Gather", 5200, 5300, "int sendcount=1", "MPI_Datatype sendtype=9 (MPI_INT)", "int recvcount=1",
              "MPI_Datatype recvtype=9 (MPI_INT)", "int root=0", WORLD)
        d.rec("MPI_Barrier", 5500 + 100 * r, 5510 + 100 * r, "MPI_Comm comm=3 (MPI_COMM_SELF)")
        d.rec("MPI_Wait", 5810 + 100 * r, 5900 + 100 * r, "MPI_Request request=[0]", "MPI_Status status=<IGNORED>")
        if finalize:
            d.rec("MPI_Finalize", 7900 + 1000 * r, 8000 + 1000 * r)
            d.rec("MPI_Finalized", 12000, 12010, "int flag=1")  # after MPI_Finalize: not compute
        ranks.append(d)
    return ranks


def test_dumpi_compute_runs_from_mpi_init_to_mpi_finalize(tmp_path):
    prog = read_trace(write_dumpi(tmp_path / "t", dumpi_bracketed()))
    assert prog.skipped == {"MPI_Gather": 2}
    # (MPI_Finalize's start - MPI_Init's return) - the time inside the calls between: the 850 ns
    # between the MPI_Initialized calls and MPI_Init are not compute.
    assert compute_ps(prog, 0) == 1000 * ((7900 - 2000) - (100 + 100 + 100 + 10 + 90)) == 5_500_000
    assert compute_ps(prog, 1) == 1000 * ((8900 - 2000) - (100 + 600 + 100 + 10 + 90)) == 6_000_000
    # The compute after the last traffic (around the calls that carry none) ends the program.
    assert ops(prog, 0) == [(COMPUTE, 1_500_000, 0, 0), (ISEND, 1, 16, 3), (WAIT, 0, 0, 0), (COMPUTE, 4_000_000, 0, 0)]
    assert ops(prog, 1) == [(COMPUTE, 1_500_000, 0, 0), (IRECV, 0, 0, 3), (WAIT, 0, 0, 0), (COMPUTE, 4_500_000, 0, 0)]
    # One rank's file on its own reads the same.
    assert read_dumpi_rank(tmp_path / "t" / "app-0001.txt", rank=1, ranks=2)[0] == ops(prog, 1)


def test_a_trace_without_mpi_finalize_computes_up_to_its_last_mpi_call(tmp_path):
    prog = read_trace(write_dumpi(tmp_path / "t", dumpi_bracketed(finalize=False)))
    # Up to the last call's start (MPI_Wait): what came after it is unknown.
    assert compute_ps(prog, 0) == 1000 * ((5810 - 2000) - (100 + 100 + 100 + 10)) == 3_500_000
    assert ops(prog, 0)[-1] == (COMPUTE, 2_000_000, 0, 0)


def otf2_bracketed(folder: Path) -> Path:
    """The OTF2 twin of dumpi_bracketed: MPI_Initialized before MPI_Init (as Score-P records it),
    a send, then a broadcast on a one-rank communicator (no traffic), a skipped MPI_Iallreduce, an
    MPI_Wait and an MPI_Comm_free with compute between them, MPI_Finalize and MPI_Finalized."""
    t = Otf2Trace(folder, 2)
    d = t.w.definitions
    selfish = d.comm("", group=d.group("", group_type=GroupType.COMM_SELF, paradigm=Paradigm.MPI, members=[]))
    for r in range(2):
        t.writers[r].enter(0, t.main)  # a non-MPI region around everything: ignored
        t.call(r, "MPI_Initialized", 10, 20)
        t.call(r, "MPI_Initialized", 300 + 50 * r, 350 + 50 * r)
        t.call(r, "MPI_Init", 1000, 2000)
        if r == 0:
            t.call(r, "MPI_Send", 3000, 3100, ("mpi_send", 3050, 1, t.world, 3, 16))
        else:
            t.call(r, "MPI_Recv", 3000, 3500, ("mpi_recv", 3400, 0, t.world, 3, 16))
        t.call(r, "MPI_Bcast", 4000, 4100, ("mpi_collective_begin", 4001),
               ("mpi_collective_end", 4099, CollectiveOp.BCAST, selfish, 0, 0, 8))
        t.call(r, "MPI_Iallreduce", 4600, 4650)
        t.call(r, "MPI_Wait", 5650, 5700)
        t.call(r, "MPI_Comm_free", 6000 + 100 * r, 6020 + 100 * r)
        t.call(r, "MPI_Finalize", 8020 + 1000 * r, 8500 + 1000 * r)
        t.call(r, "MPI_Finalized", 12000, 12010)  # after MPI_Finalize: not compute
        t.writers[r].leave(12100, t.main)
    return t.close()


def test_otf2_compute_runs_from_mpi_init_to_mpi_finalize(tmp_path):
    prog = read_trace(otf2_bracketed(tmp_path / "t"))
    assert prog.skipped == {"MPI_Iallreduce": 2}
    # Nanosecond timer. The gaps around the MPI_Initialized calls before MPI_Init are not compute.
    assert compute_ps(prog, 0) == 1000 * ((8020 - 2000) - (100 + 100 + 50 + 50 + 20)) == 5_700_000
    assert compute_ps(prog, 1) == 1000 * ((9020 - 2000) - (500 + 100 + 50 + 50 + 20)) == 6_300_000
    assert ops(prog, 0) == [(COMPUTE, 1_000_000, 0, 0), (ISEND, 1, 16, 3), (WAIT, 0, 0, 0), (COMPUTE, 4_700_000, 0, 0)]
    assert ops(prog, 1) == [(COMPUTE, 1_000_000, 0, 0), (IRECV, 0, 0, 3), (WAIT, 0, 0, 0), (COMPUTE, 5_300_000, 0, 0)]


def traced_calls(path: Path) -> tuple[Fraction, list[list[tuple[str, int, int]]]]:
    """Per rank, its outermost MPI calls as (name, start, end) in the trace's ticks, and the ps in
    a tick: from the otf2 package (OTF2) or a plain scan of the dumpi2ascii text (DUMPI)."""
    if path.suffix == ".otf2":
        with otf2.reader.open(str(path)) as trace:
            defs = trace.definitions
            world = next(list(g.members) for g in defs.groups
                         if g.group_type == GroupType.COMM_LOCATIONS and g.paradigm == Paradigm.MPI)
            calls: dict[object, list[tuple[str, int, int]]] = {loc: [] for loc in world}
            depth: Counter[object] = Counter()
            start: dict[object, tuple[str, int]] = {}
            for loc, ev in trace.events:
                kind = type(ev).__name__
                if kind not in ("Enter", "Leave") or ev.region.paradigm != Paradigm.MPI or loc not in calls:
                    continue
                if kind == "Enter":
                    if not depth[loc]:
                        start[loc] = (ev.region.name, ev.time)
                    depth[loc] += 1
                else:
                    depth[loc] -= 1
                    if not depth[loc]:
                        calls[loc].append((*start[loc], ev.time))
            return Fraction(10**12, int(defs.clock_properties.timer_resolution)), [calls[loc] for loc in world]
    out = []
    for f in sorted(path.glob("*-[0-9][0-9][0-9][0-9].txt")):
        rank: list[tuple[str, int, int]] = []
        begun = 0
        for line in f.read_text().splitlines():
            words = line.split()
            if len(words) > 4 and words[1] in ("entering", "returning") and words[2:4] == ["at", "walltime"]:
                s, ns = words[4].rstrip(",").split(".")
                t = int(s) * 10**9 + int(ns)
                if words[1] == "entering":
                    begun = t
                else:
                    rank.append((words[0], begun, t))
        out.append(rank)
    return Fraction(1000), out


@needs_real
@pytest.mark.parametrize("trace", ["casita-10-mpi-tags/traces.otf2", "casita-4-ls-barr/traces.otf2",
                                   "sstmacro-otf2-10/traces.otf2", "sstmacro-testbgp-7"])
def test_real_traces_compute_from_mpi_init_to_mpi_finalize(trace):
    """Each rank's compute is the time from MPI_Init's return to MPI_Finalize's start less the time
    inside the MPI calls between, from the trace's own timestamps. casita-10-mpi-tags and
    sstmacro-otf2-10 call MPI_Initialized before MPI_Init (27-316 and 55-67 us before it returns,
    not compute); sstmacro-otf2-10 ends with some 119 calls that carry no traffic, with 68-133 us
    of compute between them; sstmacro-testbgp-7 computes 0.26-0.65 ms before MPI_Finalize."""
    path = REAL / trace
    prog = read_trace(path)
    ps_per_tick, calls = traced_calls(path)
    assert prog.ranks == len(calls)
    for r, rank in enumerate(calls):
        names = [c[0] for c in rank]
        init, fin = names.index("MPI_Init"), names.index("MPI_Finalize")
        inside = sum(end - start for _, start, end in rank[init + 1 : fin])
        expected = (rank[fin][1] - rank[init][2] - inside) * ps_per_tick
        # Each COMPUTE op is rounded to the picosecond on its own.
        n = sum(1 for op in ops(prog, r) if op[0] == COMPUTE)
        assert abs(compute_ps(prog, r) - expected) <= Fraction(n, 2), (r, compute_ps(prog, r), float(expected))


@needs_real
def test_binary_dumpi_is_named_as_such_with_or_without_the_format(tmp_path):
    # With format = "dumpi" a .bin rank file had been taken for a prefix: "testbgp-0000.bin-NNNN.txt:
    # no dumpi2ascii files found for this prefix".
    binary = REAL / "sstmacro-testbgp-7" / "testbgp-0000.bin"
    for fmt in (None, "dumpi"):
        with pytest.raises(ScenarioError) as e:
            read_trace(binary, format=fmt, key="jobs[0].workload.path")
        assert e.value.problems == [("jobs[0].workload.path", f"{binary}: binary DUMPI files cannot be read; "
                                     "convert each rank's .bin with dumpi2ascii to .txt")]
    # A folder or a prefix holding only the .bin files says the same of them.
    for f in sorted((REAL / "sstmacro-testbgp-7").glob("*.bin")):
        (tmp_path / f.name).write_bytes(f.read_bytes())
    for path in (tmp_path, tmp_path / "testbgp"):
        for fmt in (None, "dumpi"):
            with pytest.raises(ScenarioError, match=r"testbgp-0000\.bin: binary DUMPI files cannot be read; convert"):
                read_trace(path, format=fmt)


@needs_shared
def test_a_damaged_otf2_definitions_file_is_one_error_not_a_printed_traceback(tmp_path, capsys):
    # The otf2 package printed its callback's traceback to stderr before qoslab's own error.
    copy = tmp_path / "pp"
    shutil.copytree(SHARED / "ping-pong-otf2", copy)
    with open(copy / "traces.def", "r+b") as f:
        f.truncate(100)
    with pytest.raises(ScenarioError, match=r"not a readable OTF2 archive \(.*Duplicate definition"):
        read_trace(copy / "traces.otf2")
    assert capsys.readouterr().err == ""


def test_a_trace_scenario_runs_after_the_process_changes_directory(tmp_path, monkeypatch):
    # Relative trace paths were read from the scenario's folder as the working directory saw it
    # at run time: after os.chdir, "trace-dumpi/trace/ring-0000.txt: no such file".
    repo = Path(__file__).resolve().parent / "golden"
    monkeypatch.chdir(repo)
    scenario = qoslab.Scenario.from_toml("trace-dumpi/scenario.toml")
    monkeypatch.chdir(tmp_path)
    assert qoslab.simulate(scenario).summary["status"] == "completed"
    assert qoslab.simulate(scenario.with_overrides(["seed=2"])).summary["status"] == "completed"
