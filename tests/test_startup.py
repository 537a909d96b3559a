"""A short run stays short (issue 15, part 4): nothing on `qoslab run`'s path imports pandas (about
0.17 s, most of a short run's wall time), matplotlib, pyarrow.compute (about 30 ms) or
pyarrow.parquet with its file systems (pyarrow.fs, ssl: about 15 ms); a run without jobs, port
counters or interference attribution imports neither numpy nor pyarrow (about 0.1 s): the engine
writes its tables (qoslab.tables, tests/test_tables.py); nor, without jobs, the job, workload and
skeleton models (about 30 ms of model building). The tables Python computes are written by
qoslab.arrow, byte for byte as pq.write_table would."""

import shutil
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from qoslab import arrow
from qoslab.scenario import Scenario
from qoslab.simulate import simulate

SCENARIO = textwrap.dedent("""\
    name = "light"
    [topology]
    kind = "single-switch"
    hosts = 8
    [run]
    duration_us = 20
    interference = true
    port_counters = true
    [[traffic]]
    pattern = "uniform"
    load = 0.5
    [[jobs]]
    name = "ring"
    nodes = 4
    workload = { kind = "collective-loop", collective = "allreduce", bytes = 8, iterations = 2 }
""")

CHECK = textwrap.dedent("""\
    import sys
    from qoslab.cli import main
    sys.argv = ["qoslab", "run", sys.argv[1], "--out", sys.argv[2]]
    try:
        main()
    except SystemExit as e:
        assert not e.code, e.code
    print(sorted(m for m in UNWANTED if m in sys.modules))
""")
# What a run does not need; each came back once through an innocent-looking call (pa.array and
# pa.table on lists: pandas; pc.take or Array.take: pyarrow.compute; pq.write_table: pyarrow.fs).
UNWANTED = ("pandas", "matplotlib", "pyarrow.compute", "pyarrow.fs", "pyarrow.parquet")


def test_a_run_imports_nothing_it_does_not_need(tmp_path):
    scenario = tmp_path / "light.toml"
    scenario.write_text(SCENARIO)
    done = subprocess.run([sys.executable, "-c", CHECK.replace("UNWANTED", repr(UNWANTED)), str(scenario),
                           str(tmp_path / "out")],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]", done.stdout
    assert (tmp_path / "out" / "links.parquet").exists() and (tmp_path / "out" / "ranks.parquet").exists()
    assert (tmp_path / "out" / "interference.parquet").exists()
    assert (tmp_path / "out" / "port_counters.parquet").exists()


GOLDEN = Path(__file__).parent / "golden"
OPEN_LOOP = textwrap.dedent("""\
    name = "open loop"
    [topology]
    kind = "xgft"
    m = [4, 4]
    w = [1, 2]
    [run]
    duration_us = 20
    warmup_us = 2
    [[traffic]]
    pattern = "uniform"
    load = 0.5
""")


# The same on a fabric read from an ibnetdiscover dump (qoslab.io, whose trace readers need numpy).
IMPORTED = OPEN_LOOP.replace('kind = "xgft"\nm = [4, 4]\nw = [1, 2]', 'kind = "ibnetdiscover"\npath = "ring.ibnetdiscover"')


@pytest.mark.parametrize("text", [OPEN_LOOP, IMPORTED], ids=["generated", "ibnetdiscover"])
def test_a_run_without_jobs_imports_neither_numpy_nor_pyarrow(tmp_path, text):
    assert text.count("[topology]") == 1 and ("ibnetdiscover" in text) == (text is IMPORTED)
    shutil.copy(GOLDEN / "routing-deadlock" / "ring.ibnetdiscover", tmp_path)
    scenario = tmp_path / "open-loop.toml"
    scenario.write_text(text)
    unwanted = (*UNWANTED, "numpy", "pyarrow", "qoslab.jobs", "qoslab.workloads", "qoslab.skeletons")
    done = subprocess.run([sys.executable, "-c", CHECK.replace("UNWANTED", repr(unwanted)), str(scenario),
                           str(tmp_path / "out")],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]", done.stdout
    assert pq.read_table(tmp_path / "out" / "links.parquet").num_rows > 0


def test_the_tables_python_computes_are_written_as_pq_write_table_writes_them(tmp_path):
    """write_parquet goes around pyarrow.parquet's file-system layer: same bytes."""
    scenario = Scenario.from_dict(tomllib.loads(SCENARIO))
    result = simulate(scenario)
    result.save(tmp_path / "run")
    for name in ("interference", "port_counters"):
        pq.write_table(result.table(name), tmp_path / f"{name}.parquet")
        assert (tmp_path / "run" / f"{name}.parquet").read_bytes() == (tmp_path / f"{name}.parquet").read_bytes(), name


def test_a_pyarrow_whose_writer_differs_gets_pq_write_table(tmp_path, monkeypatch):
    table = pa.table({"node": arrow.strings(["a", "b"]), "bytes": arrow.numbers(np.array([1, 2], dtype=np.uint64))})
    arrow.write_parquet(table, tmp_path / "private.parquet")
    monkeypatch.setitem(arrow.PARQUET_DEFAULTS, "an_argument_it_does_not_take", 1)  # its TypeError
    arrow.write_parquet(table, tmp_path / "public.parquet")
    pq.write_table(table, tmp_path / "pq.parquet")
    assert (tmp_path / "private.parquet").read_bytes() == (tmp_path / "pq.parquet").read_bytes()
    assert (tmp_path / "public.parquet").read_bytes() == (tmp_path / "pq.parquet").read_bytes()


def test_take_strings_is_pc_take():
    names = ["leaf", "", "spine 1", "ünïcödé"]
    for indices in (np.array([], dtype=np.uint32), np.array([3, 0, 1, 1, 2, 3, 0], dtype=np.uint32),
                    np.random.default_rng(1).integers(0, 4, (1 << 20) + 3).astype(np.uint16)):
        taken = arrow.take_strings(names, indices)
        taken.validate(full=True)
        assert taken.equals(pc.take(arrow.strings(names), arrow.numbers(indices)))
    assert arrow.take_strings([], np.array([], dtype=np.int64)).type == pa.string()


def test_inferred_is_pa_array():
    for values in (["a", "bc"], [1, 2**40], [1.5, 2], [0.5], [True, False], [], ["a", None]):
        assert arrow.inferred(values).equals(pa.array(values)), values

