"""The engine writes a run's tables as Parquet (crates/qoslab-py/src/parquet.rs) from the same
column description that pyarrow builds them from in memory (qoslab.tables): each file must read
back, through pyarrow, as exactly that table (names, types, nullability, values), for every kind
of column, every dtype the engine hands over, every table a run writes, empty tables and tables of
several row groups. A table the writer cannot write is refused, naming the column, and a file it
could not finish is not left behind."""

import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from qoslab.scenario import Scenario
from qoslab.simulate import simulate
from qoslab.tables import NO_BECN, EngineTable

GOLDEN = Path(__file__).parent / "golden"


def column(name, kind, values, dtype, extra=None):
    return (name, kind, dtype, np.asarray(values, dtype=dtype).tobytes(), extra)


def assert_reads_back(table: EngineTable, path: Path):
    table.write(path)
    written, expected = pq.read_table(path), table.to_arrow()
    assert written.schema.equals(expected.schema), (written.schema, expected.schema)
    assert written.equals(expected)
    return written


def every_kind(rows: int, seed: int = 1) -> EngineTable:
    rng = np.random.default_rng(seed)
    names = ["leaf 0", "", "spine ü", "h" * 300]
    becn = rng.integers(0, 2**63, rows, dtype=np.uint64)
    becn[::3] = NO_BECN
    level = rng.integers(-5, 5, rows).astype(np.int32)
    return EngineTable((
        column("u1", "numbers", rng.integers(0, 256, rows), "<u1"),
        column("u2", "numbers", rng.integers(0, 2**16, rows), "<u2"),
        column("u4", "numbers", rng.integers(0, 2**32, rows), "<u4"),
        column("u8", "numbers", np.r_[2**64 - 1, rng.integers(0, 2**63, max(rows - 1, 0), dtype=np.uint64)][:rows], "<u8"),
        column("i4", "numbers", level, "<i4"),
        column("i8", "numbers", rng.integers(-2**62, 2**62, rows), "<i8"),
        column("f8", "numbers", np.r_[np.inf, -0.0, rng.normal(size=rows)][:rows], "<f8"),
        column("name", "names", rng.integers(0, len(names), rows), "<u2", names),
        column("flag", "bool", rng.integers(0, 3, rows), "<u1"),
        column("becn_ps", "masked", becn, "<u8", NO_BECN),
        column("level", "masked", level, "<i4", -1),
    ))


def test_every_kind_and_dtype_reads_back_as_its_table(tmp_path):
    written = assert_reads_back(every_kind(1000), tmp_path / "t.parquet")
    assert [str(t) for t in written.schema.types] == ["uint8", "uint16", "uint32", "uint64", "int32", "int64",
                                                      "double", "string", "bool", "uint64", "int32"]
    assert written.column("becn_ps").null_count == 334 and written.column("name").null_count == 0
    assert written.column("u8")[0].as_py() == 2**64 - 1


def test_an_empty_table_keeps_its_columns(tmp_path):
    written = assert_reads_back(every_kind(0), tmp_path / "t.parquet")
    assert written.num_rows == 0 and written.num_columns == 11


def test_a_long_table_is_cut_into_row_groups_as_pyarrow_cuts_them(tmp_path):
    rows = (1 << 20) + 3
    table = EngineTable((column("link", "numbers", np.arange(rows) % 7, "<u4"),
                         column("src", "names", np.arange(rows) % 2, "<u1", ["a", "b"])))
    assert_reads_back(table, tmp_path / "t.parquet")
    assert pq.ParquetFile(tmp_path / "t.parquet").metadata.num_row_groups == 2


RUNS = {
    # Jobs (ranks), interference and port counters.
    "jobs": ("jobs-workloads", ["run.messages=true"]),
    # Congestion control's trace (ccti, cc_marks: booleans and nulls).
    "congestion control": ("congestion-control", ["run.cc_trace=true", "run.messages=true"]),
}


@pytest.mark.parametrize("case", RUNS)
def test_every_table_of_a_run_reads_back_as_the_run_gives_it(tmp_path, case):
    folder, overrides = RUNS[case]
    result = simulate(Scenario.from_toml(GOLDEN / folder / "scenario.toml").with_overrides(overrides))
    result.save(tmp_path)
    written = [name[:-len(".parquet")] for name in result.written() if name.endswith(".parquet")]
    assert {"links", "messages"} <= set(written)
    assert {"ranks"} <= set(written) if case == "jobs" else {"ccti", "cc_marks"} <= set(written)
    for name in written:
        table = pq.read_table(tmp_path / f"{name}.parquet")
        assert table.schema.equals(result.table(name).schema) and table.equals(result.table(name)), name


@pytest.mark.parametrize(("columns", "message"), [
    ([("a", "strings", "<u1", b"\0", None)], "unknown kind"),
    ([("a", "numbers", "<f4", b"\0\0\0\0", None)], "dtype"),
    ([("a", "numbers", "<u4", b"\0\0\0", None)], "whole number"),
    ([("a", "numbers", "<u1", b"\0\0", None), ("b", "numbers", "<u1", b"\0", None)], "column b has 1 rows"),
    ([("a", "names", "<u1", b"\0\2", ["x", "y"])], "row 1 names entry 2 of 2"),
    ([("a", "bool", "<f8", b"\0" * 8, None)], "integer"),
    ([("a", "names", "<i4", b"\xff" * 4, ["x"])], "row 0 names entry -1 of 1"),
    ([("a", "masked", "<u8", b"\0" * 8, -1)], "null value -1 is not a <u8 value"),
    ([("a", "masked", "<i4", b"\0" * 4, 2**31)], "null value 2147483648 is not a <i4 value"),
    ([("a", "numbers", "<u1", b"\0", None), ("a", "numbers", "<u1", b"\0", None)], "column a is given twice"),
])
def test_columns_the_writer_cannot_write_are_refused_before_any_file(tmp_path, columns, message):
    from qoslab.simulate import write_parquet

    with pytest.raises(ValueError, match=message):
        write_parquet(str(tmp_path / "t.parquet"), columns)
    assert not (tmp_path / "t.parquet").exists()


def test_a_file_that_cannot_be_written_is_the_system_s_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="No such file or directory") as caught:
        every_kind(3).write(tmp_path / "no-such-folder" / "t.parquet")
    assert caught.value.filename == str(tmp_path / "no-such-folder" / "t.parquet")


READ_ONLY = textwrap.dedent("""\
    import os, sys
    from qoslab.tables import EngineTable
    if os.getuid() == 0:  # root may write anything: be nobody
        os.setgid(65534)
        os.setuid(65534)
    # This user could remove the file (the folder is writable): a writer that removes what it
    # could not open would remove it.
    print("removable", os.access(os.path.dirname(sys.argv[1]), os.W_OK | os.X_OK))
    try:
        EngineTable((("v", "numbers", "<u1", b"\\1", None),)).write(sys.argv[1])
    except PermissionError as error:
        print("PermissionError", error.filename)
""")


def test_a_file_the_writer_cannot_open_is_left_as_it_was():
    """The writer removes only a file it created: not one it could not open for writing."""
    # Not under pytest's tmp_path, whose parents only root may enter.
    with tempfile.TemporaryDirectory() as folder:
        os.chmod(folder, 0o777)  # the folder is writable (removing would succeed), the file is not
        path = Path(folder) / "links.parquet"
        path.write_bytes(b"kept")
        path.chmod(0o444)
        done = subprocess.run([sys.executable, "-c", READ_ONLY, str(path)], capture_output=True, text=True, check=False)
        assert done.returncode == 0, done.stderr
        assert done.stdout.split("\n")[:2] == ["removable True", f"PermissionError {path}"], done.stdout
        assert path.read_bytes() == b"kept"


FULL_DISK = textwrap.dedent("""\
    import resource, signal, sys
    import numpy as np
    from qoslab.tables import EngineTable
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # writes past the limit fail (EFBIG) instead
    resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
    values = np.random.default_rng(1).integers(0, 2**63, 100_000, dtype=np.uint64)
    try:
        EngineTable((("v", "numbers", "<u8", values.tobytes(), None),)).write(sys.argv[1])
    except OSError as error:
        print("OSError", error)
""")


def test_the_in_memory_table_refuses_what_the_writer_refuses():
    with pytest.raises(ValueError, match="given twice"):
        EngineTable((column("a", "numbers", [1], "<u1"), column("a", "numbers", [2], "<u1")))
    with pytest.raises(ValueError, match="beyond its 1 names"):
        EngineTable((column("a", "names", [-1], "<i4", ["x"]),)).to_arrow()


def test_a_file_the_writer_could_not_finish_is_removed(tmp_path):
    path = tmp_path / "t.parquet"
    done = subprocess.run([sys.executable, "-c", FULL_DISK, str(path)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("OSError") and str(path) in done.stdout, done.stdout
    assert not path.exists()
