"""A short run stays short: nothing on `qoslab run`'s path imports pandas (about 0.17 s, most of a
short run's wall time) or matplotlib (issue 15, part 4). qoslab.arrow builds the run's tables."""

import subprocess
import sys
import textwrap

SCENARIO = textwrap.dedent("""\
    name = "light"
    [topology]
    kind = "single-switch"
    hosts = 8
    [run]
    duration_us = 20
    interference = true
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
    print(sorted(m for m in ("pandas", "matplotlib") if m in sys.modules))
""")


def test_a_run_imports_neither_pandas_nor_matplotlib(tmp_path):
    scenario = tmp_path / "light.toml"
    scenario.write_text(SCENARIO)
    done = subprocess.run([sys.executable, "-c", CHECK, str(scenario), str(tmp_path / "out")],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]", done.stdout
    assert (tmp_path / "out" / "links.parquet").exists() and (tmp_path / "out" / "ranks.parquet").exists()
    assert (tmp_path / "out" / "interference.parquet").exists()
