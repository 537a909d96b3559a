"""Nothing silently wrong: sizes refused before anything is allocated, empty or foreign input
refused by name, defaults named as defaults (issue 16, "Bad input")."""

from __future__ import annotations

from pathlib import Path

import pytest
import qoslab
from qoslab import resources
from qoslab.cli import app
from qoslab.errors import ScenarioError
from qoslab.io.opensm import OpenSmConfError, read_opensm_conf
from qoslab.io.traces.read import read_trace
from typer.testing import CliRunner


@pytest.mark.parametrize("topology, key", [
    ({"kind": "xgft", "m": [1_000_000_000], "w": [1]}, "topology.m"),
    ({"kind": "xgft", "m": [64, 64, 64], "w": [1, 64, 64]}, "topology.m"),
    ({"kind": "single-switch", "hosts": 10**9}, "topology.hosts"),
    ({"kind": "dragonfly-plus", "groups": 200, "leaves_per_group": 16, "spines_per_group": 16,
      "hosts_per_leaf": 16, "global_links_per_pair": 16, "switch_radix": 256}, "topology.groups"),
])
def test_a_fabric_larger_than_one_subnet_is_refused_before_it_is_built(topology, key):
    with pytest.raises(ScenarioError, match="49,151 unicast LIDs") as error:
        qoslab.Scenario(topology=topology)
    assert error.value.problems[0][0] == key


def test_switch_count_is_the_xgft_closed_form():
    # XGFT(3;16,16,4;1,4,4): 64 leaves, 16 middle and 16 top switches.
    assert qoslab.Scenario(topology={"kind": "xgft", "m": [16, 16, 4], "w": [1, 4, 4]}).topology.switch_count() == 96


def test_a_range_far_beyond_the_fabric_is_named_not_expanded():
    with pytest.raises(ScenarioError, match=r"traffic\[0\]\.hosts: host 16 does not exist"):
        qoslab.Scenario(topology={"kind": "xgft", "m": [4, 4], "w": [1, 2]},
                        traffic=[{"hosts": "0-999999999999", "load": 0.1}])


def test_a_run_that_cannot_fit_in_memory_is_refused_naming_its_size(monkeypatch):
    monkeypatch.setattr("qoslab.scenario.available_memory_bytes", lambda: 4 * 2**30)
    job = {"nodes": 300, "ranks_per_node": 64, "workload": {"kind": "all-to-all", "bytes": 64, "iterations": 1}}
    with pytest.raises(ScenarioError, match=r"jobs: this run would need about .* GiB \(19,200 ranks, "
                                            r"368,620,800 all-to-all messages posted at once, 19,200 packets of the "
                                            r"jobs' messages\), but this machine "
                                            r"has 4.0 GiB available"):
        qoslab.Scenario(topology={"kind": "xgft", "m": [18, 17], "w": [1, 18]}, jobs=[job])
    # The same ranks without an all-to-all fit.
    qoslab.Scenario(topology={"kind": "xgft", "m": [18, 17], "w": [1, 18]},
                    jobs=[{**job, "workload": {"kind": "random-pairs", "iterations": 1}}])


def test_the_packets_of_large_messages_count_in_the_memory_check(monkeypatch):
    # A message is cut into packets when sent: four ranks flooding eight messages of 2^39 - 1
    # bytes passed the check and the engine then aborted on an allocation (signal 6, no output).
    monkeypatch.setattr("qoslab.scenario.available_memory_bytes", lambda: 8 * 2**30)
    job = {"name": "f", "nodes": 4, "workload": {"kind": "flood-pairs", "bytes": 2**39 - 1, "messages": 8,
                                                   "iterations": 1}}
    with pytest.raises(ScenarioError, match=r"jobs: this run would need about .* \(4 ranks, 4,294,967,296 packets "
                                            r"of the jobs' messages\)"):
        qoslab.Scenario(topology={"kind": "single-switch", "hosts": 4}, jobs=[job])
    job["workload"]["bytes"] = 2**20  # 256 packets a message: fits
    qoslab.Scenario(topology={"kind": "single-switch", "hosts": 4}, jobs=[job])


def test_a_trace_s_messages_are_bounded_as_built_in_workloads_are(tmp_path):
    # A DUMPI count of 2^40 ints grew the engine to 23.5 GB before the kernel killed it.
    for rank, (call, peer, status) in enumerate((("MPI_Send", "dest=1", ""),
                                                 ("MPI_Recv", "source=0", "MPI_Status status=<IGNORED>\n"))):
        (tmp_path / f"t-{rank:04d}.txt").write_text(
            "MPI_Init entering at walltime 1.0, cputime 0.0 seconds in thread 0.\n"
            "MPI_Init returning at walltime 1.0, cputime 0.0 seconds in thread 0.\n"
            f"{call} entering at walltime 1.000001, cputime 0.0 seconds in thread 0.\nint count=1099511627776\n"
            f"MPI_Datatype datatype=9 (MPI_INT)\nint {peer}\nint tag=1\nMPI_Comm comm=2 (MPI_COMM_WORLD)\n{status}"
            f"{call} returning at walltime 1.000002, cputime 0.0 seconds in thread 0.\n"
            "MPI_Finalize entering at walltime 1.00001, cputime 0.0 seconds in thread 0.\n"
            "MPI_Finalize returning at walltime 1.00001, cputime 0.0 seconds in thread 0.\n")
    with pytest.raises(ScenarioError, match=r"rank 0: a message of 4398046511104 bytes, beyond the 549755813888"):
        read_trace(tmp_path / "t-0000.txt")


def test_the_memory_estimate_bounds_a_measured_peak():
    # Measured: a 6,160-rank all-to-all of 64 B on 306 hosts peaked at 1.0 GB (resources.py).
    ranks = 6160
    assert resources.estimated_bytes(306 + 35, ranks, ranks * (ranks - 1)) > 1.0e9


def test_an_empty_scenario_is_an_error_not_an_empty_run(tmp_path):
    path = tmp_path / "empty.toml"
    path.write_text("")
    result = CliRunner().invoke(app, ["run", str(path), "--out", str(tmp_path / "out")])
    assert result.exit_code == 2
    assert "nothing to simulate" in result.output and "Traceback" not in result.output
    assert not (tmp_path / "out").exists()


def test_a_default_in_an_error_is_called_the_default(tmp_path):
    path = tmp_path / "short.toml"
    path.write_text('[run]\nduration_us = 20\n[[traffic]]\nload = 0.1\n')
    result = CliRunner().invoke(app, ["run", str(path)])
    assert result.exit_code == 2
    assert "got 50 (the default for open-loop traffic; set run.warmup_us)" in result.output


def test_a_binary_file_is_not_read_as_opensm_conf(tmp_path):
    path = tmp_path / "opensm.conf"
    path.write_bytes(b"qos TRUE\n" + bytes(range(256)) * 4)
    with pytest.raises(OpenSmConfError, match=r"opensm.conf:2: binary data \(byte 9\)"):
        read_opensm_conf(path)
    result = CliRunner().invoke(app, ["import", "opensm", str(path)])
    assert result.exit_code == 2 and "binary data" in result.output


def test_a_text_file_with_no_opensm_option_is_refused_and_unknown_keys_are_flagged(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("hello world\nthis is not opensm\n")
    with pytest.raises(OpenSmConfError, match=r"notes.txt:1: no OpenSM option found \(line 1 starts with 'hello'\)"):
        read_opensm_conf(path)
    path.write_text("qos TRUE\nqos_swe_vlarb_lo 0:64\n")
    read = read_opensm_conf(path)
    assert any("notes.txt:2: 'qos_swe_vlarb_lo': not an OpenSM option" in w for w in read.warnings)


TINY = {"topology": {"kind": "single-switch", "hosts": 2}, "run": {"duration_us": 1.0, "warmup_us": 0.0}}
PINGPONG = {"name": "p", "nodes": 1, "ranks_per_node": 2, "workload": {"kind": "ping-pong"}}


@pytest.mark.parametrize("keys, key, words", [
    # A byte shorter than the engine's picosecond: a gap of 0 ps once hung the run for good.
    ({"fabric": {"link_gbps": 17000.0}, "traffic": [{"load": 0.5}]}, "fabric.link_gbps", "0.001 to 8000 Gb/s"),
    # A byte time beyond the clock's range: results came back as if the link were infinitely fast.
    ({"fabric": {"link_gbps": 1e-300}}, "fabric.link_gbps", "0.001 to 8000 Gb/s"),
    ({"mpi": {"shm_gbps": 1e-300}, "jobs": [PINGPONG]}, "mpi.shm_gbps", "0.001 to 8000 Gb/s"),
    ({"mpi": {"shm_latency_ns": 1e30}, "jobs": [PINGPONG]}, "mpi.shm_latency_ns", "one second"),
    ({"fabric": {"link_latency_ns": 1.9e16}}, "fabric.link_latency_ns", "one second"),
    ({"fabric": {"switch_latency_ns": 2e9}}, "fabric.switch_latency_ns", "one second"),
    ({"run": {"duration_us": 1e11, "warmup_us": 0.0}}, "run.duration_us", "2^55 ps"),
    # 2^44 + 4096 bytes: its packet count once wrapped in 32 bits (one packet a message).
    ({"traffic": [{"load": "saturate", "message_bytes": 2**44 + 4096}]}, "traffic[0]", "packets queued"),
    ({"traffic": [{"load": "saturate", "saturate_depth": 2**32 - 1}]}, "traffic[0]", "packets"),
])
def test_values_beyond_the_engines_ranges_are_refused_naming_the_key(keys, key, words):
    with pytest.raises(ScenarioError) as error:
        qoslab.Scenario(**{**TINY, **keys})
    assert error.value.problems[0][0].startswith(key) and words in str(error.value), error.value


def test_the_engine_refuses_more_queued_packets_than_it_numbers_where_memory_is_not_checked(monkeypatch):
    monkeypatch.setattr("qoslab.scenario.available_memory_bytes", lambda: None)
    with pytest.raises(ScenarioError, match=r"traffic\[0\]\.message_bytes: .* 17179869188 packets could wait"):
        qoslab.Scenario(**TINY, traffic=[{"load": "saturate", "message_bytes": 2**44 + 4096}])


def test_offered_load_is_exact_at_rates_whose_byte_time_is_not_whole_picoseconds():
    # 12x XDR, 2400 Gb/s: 3.33 ps a byte. Rounded to 3 ps it offered 11% more than asked. A
    # buffer deep enough that credits do not bound the rate (32 KiB over a 240 ns loop would).
    for gbps in (2400.0, 8000.0):
        summary = qoslab.simulate(qoslab.Scenario(
            topology={"kind": "single-switch", "hosts": 2}, fabric={"link_gbps": gbps, "vl_buffer_bytes": 1 << 20},
            traffic=[{"hosts": [0], "destinations": [1], "load": 0.5, "arrival": "periodic"}],
            run={"duration_us": 20.0, "warmup_us": 2.0})).summary
        assert summary["by_traffic"][0]["offered_load"] == pytest.approx(0.5, rel=0.01), gbps


def test_per_pair_sl2vl_on_a_wide_switch_allocates_only_the_pairs_given():
    # 40,000 ports: a table for every pair would be 25.6 GB; the run stays far below a 3 GB limit.
    import subprocess
    import sys
    code = (
        "import resource, qoslab\n"
        "resource.setrlimit(resource.RLIMIT_AS, (3 * 2**30, 3 * 2**30))\n"
        "s = qoslab.Scenario(topology={'kind': 'single-switch', 'hosts': 40000},\n"
        "    qos={'sl2vl_pairs': [{'switch': 0, 'in_port': 0, 'out_port': 1, 'sl2vl': [1, 0] * 8}]},\n"
        "    fabric={'data_vls': 2},\n"
        "    traffic=[{'hosts': [0], 'destinations': [1], 'load': 0.1}], run={'duration_us': 1.0, 'warmup_us': 0.0})\n"
        "print(qoslab.simulate(s).summary['conservation']['ok'])\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "True", done.stderr[-2000:]


def test_an_mpi_message_too_large_to_number_its_packets_is_refused():
    with pytest.raises(ScenarioError, match=r"jobs\[0\]\.workload\.bytes: expected less than 549755813888"):
        qoslab.Scenario(topology={"kind": "xgft", "m": [4, 4], "w": [1, 2]},
                        jobs=[{"name": "a", "nodes": 2, "workload": {"kind": "ping-pong", "bytes": 2**44}}])


def test_files_that_are_not_scenarios_are_refused_not_read_whole(tmp_path):
    deep = tmp_path / "deep.toml"
    deep.write_text("x = " + "[" * 600 + "1" + "]" * 600 + "\n")
    long = tmp_path / "long.toml"  # beyond Python's 4300-digit integers: a traceback before
    long.write_text("seed = " + "9" * 5000 + "\n")
    for path, words in ((deep, "nested too deeply"), (Path("/dev/zero"), "larger than 64 MiB"),
                        (long, "a number of more than 4300 digits")):
        result = CliRunner().invoke(app, ["check", str(path)])
        assert result.exit_code == 2 and words in result.stderr and "Traceback" not in result.output, result.output
    fine = tmp_path / "fine.toml"
    fine.write_text('[topology]\nkind = "single-switch"\nhosts = 4\n')
    result = CliRunner().invoke(app, ["check", str(fine), "--set", "run.duration_us=" + "9" * 5000])
    assert result.exit_code == 2 and "run.duration_us: expected a number" in result.stderr, result.output


def test_bad_command_line_values_are_refused_before_any_work(tmp_path):
    result = CliRunner().invoke(app, ["validate", "--write", str(tmp_path)])
    assert result.exit_code == 2 and "is a directory" in result.stderr
    result = CliRunner().invoke(app, ["validate", "--write", str(tmp_path / "no" / "v.md")])
    assert result.exit_code == 2 and "does not exist" in result.stderr
    dump = tmp_path / "d.txt"
    dump.write_text("")
    for interval in ("nan", "inf", "0"):
        result = CliRunner().invoke(app, ["compare-counters", str(tmp_path), str(dump), str(dump), "--interval", interval])
        assert result.exit_code == 2 and "--interval" in result.stderr, result.output


@pytest.mark.parametrize("seeds, words", [("[]", "at least 1"), ("[1, 1]", "seed 1 is listed twice")])
def test_study_seeds_must_be_distinct_and_given(tmp_path, seeds, words):
    (tmp_path / "study.toml").write_text(f'seeds = {seeds}\n[scenario]\n[scenario.topology]\nkind = "single-switch"\n'
                                         'hosts = 4\n[[scenario.jobs]]\nname = "a"\nnodes = 2\n'
                                         'workload = {kind = "ping-pong"}\n[[policies]]\nkind = "default"\n')
    result = CliRunner().invoke(app, ["study", str(tmp_path / "study.toml"), "--plan", "--out", str(tmp_path / "o")])
    assert result.exit_code == 2 and "seeds" in result.stderr and words in result.stderr, result.output


def test_the_memory_check_counts_the_process_address_space_limit():
    # 16,384 ranks posting an all-to-all at once need about 8 GB: fine on this machine, refused
    # under `ulimit -v` 6 GB (the check read only MemAvailable; the run then aborted in the engine).
    import subprocess
    import sys
    code = (
        "import resource, qoslab\n"
        "from qoslab.errors import ScenarioError\n"
        "resource.setrlimit(resource.RLIMIT_AS, (6 * 2**30, 6 * 2**30))\n"
        "try:\n"
        "    qoslab.Scenario(topology={'kind': 'single-switch', 'hosts': 8}, jobs=[{'name': 'a', 'nodes': 4,\n"
        "        'ranks_per_node': 4096, 'workload': {'kind': 'all-to-all', 'bytes': 256}}])\n"
        "    print('accepted')\n"
        "except ScenarioError as error:\n"
        "    print(error)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert "this run would need about" in done.stdout and "available" in done.stdout, done.stdout + done.stderr[-2000:]


def test_a_memory_cgroup_limit_is_read_in_both_versions(tmp_path):
    (tmp_path / "memory.max").write_text("1073741824\n")
    (tmp_path / "memory.current").write_text("73741824\n")
    assert resources._room(tmp_path, "memory.max", "memory.current") == 1_000_000_000
    (tmp_path / "memory.max").write_text("max\n")
    assert resources._room(tmp_path, "memory.max", "memory.current") is None
    (tmp_path / "memory.limit_in_bytes").write_text("9223372036854771712\n")
    assert resources._room(tmp_path, "memory.limit_in_bytes", "memory.current") is None


def test_a_traffic_table_with_no_sender_is_refused_naming_the_key():
    # Only the incast target listed: the run had no events and said nothing.
    with pytest.raises(ScenarioError, match=r"traffic\[0\]\.hosts: no host sends"):
        qoslab.simulate(qoslab.Scenario(topology={"kind": "single-switch", "hosts": 4},
                                        traffic=[{"pattern": "incast", "hosts": [0], "destinations": [0], "load": 0.5}]))


@pytest.mark.parametrize("keys, key, words", [
    ({"qos": {"sl2vl_pairs": [{"switch": 10**20, "in_port": 0, "out_port": 1, "sl2vl": [0] * 16}]}},
     "qos.sl2vl_pairs[0].switch", "less than 4294967296"),
])
def test_nonsense_that_ran_silently_is_refused_naming_the_key(keys, key, words):
    with pytest.raises(ScenarioError) as error:
        qoslab.Scenario(topology={"kind": "single-switch", "hosts": 4}, **keys)
    assert error.value.problems[0][0] == key and words in str(error.value), error.value


def test_a_policy_whose_weights_are_all_zero_is_refused(tmp_path):
    (tmp_path / "study.toml").write_text('[scenario]\n[scenario.topology]\nkind = "single-switch"\nhosts = 4\n'
                                         '[[scenario.jobs]]\nname = "a"\nnodes = 2\nworkload = {kind = "ping-pong"}\n'
                                         '[[policies]]\nkind = "per-job"\nassignment = "all"\nweights = [0, 0]\n')
    result = CliRunner().invoke(app, ["study", str(tmp_path / "study.toml"), "--plan", "--out", str(tmp_path / "o")])
    assert result.exit_code == 2 and "policies[0].weights" in result.stderr and "every weight is 0" in result.stderr


def test_study_options_on_a_scenario_export_are_refused(tmp_path):
    toml = tmp_path / "s.toml"
    toml.write_text('[topology]\nkind = "single-switch"\nhosts = 4\n')
    for option in (["--policy", "bogus"], ["--repetition", "7"]):
        result = CliRunner().invoke(app, ["export", "opensm", str(toml), *option, "--out", str(tmp_path / "d")])
        assert result.exit_code == 2 and "scenario file" in result.stderr, result.output


def test_the_tightest_memory_cgroup_above_the_process_counts(tmp_path):
    # Slurm (cgroup v2): the limit is on the job's group; the task's own group reads "max".
    proc = tmp_path / "cgroup"
    proc.write_text("0::/slurm/job_1/step_0/task_0\n")
    root = tmp_path / "sys"
    job, task = root / "slurm" / "job_1", root / "slurm" / "job_1" / "step_0" / "task_0"
    task.mkdir(parents=True)
    (job / "memory.max").write_text(str(2**30))
    (job / "memory.current").write_text(str(900 * 2**20))
    (task / "memory.max").write_text("max\n")
    (task / "memory.current").write_text("1000\n")
    assert resources._cgroup_room(proc, root) == 124 * 2**20
    proc.write_text("4:memory:/slurm/uid_0/job_1\n")  # v1: limit_in_bytes on the job's group
    v1 = root / "memory" / "slurm" / "uid_0" / "job_1"
    v1.mkdir(parents=True)
    (v1 / "memory.limit_in_bytes").write_text(str(2**31))
    (v1 / "memory.usage_in_bytes").write_text(str(2**30))
    assert resources._cgroup_room(proc, root) == 2**30


def test_a_collective_whose_gathered_message_is_too_large_is_refused():
    # Bruck's alltoall sends up to every rank's block in one message: 2^38 bytes x 8 ranks wrapped.
    with pytest.raises(ScenarioError, match=r"jobs\[0\]\.workload\.bytes: 274877906943 bytes x 8 ranks"):
        qoslab.Scenario(topology={"kind": "single-switch", "hosts": 8},
                        jobs=[{"name": "a", "nodes": 8, "collectives": {"alltoall": "bruck"},
                               "workload": {"kind": "collective-loop", "collective": "alltoall", "bytes": 2**38 - 1}}])


def test_input_files_that_cannot_be_read_whole_are_refused_by_name(tmp_path, monkeypatch):
    # /dev/zero as a topology, a routing dump or a perfquery dump was read until memory ran out.
    from qoslab.counters import CounterDumpError, read_dump
    from qoslab.io import files
    from qoslab.io.ibnetdiscover import FabricFileError, read_fabric
    from qoslab.io.ibroute import RoutingFileError, read_dumps

    for reader, error in ((read_fabric, FabricFileError), (read_dumps, RoutingFileError), (read_dump, CounterDumpError)):
        with pytest.raises(error, match="/dev/zero: expected a regular file, got a device"):
            reader("/dev/zero")
    monkeypatch.setattr(files, "MAX_INPUT_BYTES", 1000)
    big = tmp_path / "big.topo"
    big.write_text("#" * 2000)
    with pytest.raises(FabricFileError, match="big.topo: larger than"):
        read_fabric(big)


def test_reading_a_large_dump_names_its_hosts_once(tmp_path, monkeypatch):
    # Each host's name was worked out from every CA's description again: 24 s for 4096 hosts.
    from qoslab.io import fabric

    path = tmp_path / "f.topo"
    result = CliRunner().invoke(app, ["export", "fabric", str(_write(tmp_path, "x.toml", XGFT_256)),
                                      "--format", "ibnetdiscover", "--out", str(path)])
    assert result.exit_code == 0, result.output
    calls = []
    real = fabric._unique_names
    monkeypatch.setattr(fabric, "_unique_names", lambda *a, **k: calls.append(1) or real(*a, **k))
    scenario = qoslab.Scenario(topology={"kind": "ibnetdiscover", "path": str(path)})
    assert scenario.host_count() == 256 and len(calls) <= 2, len(calls)


XGFT_256 = '[topology]\nkind = "xgft"\nm = [16, 16]\nw = [1, 16]\n'


def _write(folder: Path, name: str, text: str) -> Path:
    (folder / name).write_text(text)
    return folder / name


def test_a_dumpi_parameter_given_twice_is_refused_by_line(tmp_path):
    # `int dest=1` then `int dest=0`: the last one was used silently (here a deadlock).
    for rank, (call, peer) in enumerate((("MPI_Send", "int dest=1\nint dest=0\n"), ("MPI_Recv", "int source=0\n"))):
        status = "MPI_Status status=<IGNORED>\n" if call == "MPI_Recv" else ""
        (tmp_path / f"t-{rank:04d}.txt").write_text(
            "MPI_Init entering at walltime 1.0, cputime 0.0 seconds in thread 0.\n"
            "MPI_Init returning at walltime 1.0, cputime 0.0 seconds in thread 0.\n"
            f"{call} entering at walltime 1.000001, cputime 0.0 seconds in thread 0.\nint count=1\n"
            f"MPI_Datatype datatype=9 (MPI_INT)\n{peer}int tag=1\nMPI_Comm comm=2 (MPI_COMM_WORLD)\n{status}"
            f"{call} returning at walltime 1.000002, cputime 0.0 seconds in thread 0.\n"
            "MPI_Finalize entering at walltime 1.00001, cputime 0.0 seconds in thread 0.\n"
            "MPI_Finalize returning at walltime 1.00001, cputime 0.0 seconds in thread 0.\n")
    with pytest.raises(ScenarioError, match=r"t-0000.txt, line 7: dest given twice in the MPI_Send record that starts "
                                            r"at line 3 \(first at line 6\)"):
        read_trace(tmp_path / "t-0000.txt")


def test_workers_are_fewer_when_their_runs_would_not_fit_in_memory_together():
    from qoslab.sweep.executors import workers_in_memory

    gib = 1 << 30
    assert workers_in_memory(4, 2 * gib, 9 * gib) == (4, None)  # 8 GiB of 9: all four
    fit, warning = workers_in_memory(4, 2 * gib, 5 * gib)  # two runs of 2 GiB fit in 5
    assert fit == 2 and warning is not None and "running 2 at a time" in warning and "5.0 GiB" in warning
    assert workers_in_memory(4, 6 * gib, 5 * gib)[0] == 1  # never none: the run itself was checked
    assert workers_in_memory(4, 2 * gib, None) == (4, None)  # memory unknown: as asked


def test_a_study_runs_fewer_workers_than_asked_when_their_runs_would_exhaust_memory(tmp_path, monkeypatch):
    # Each run passed the scenario's memory check alone; --workers 2 held two at once regardless.
    study = tmp_path / "s.toml"
    study.write_text('[scenario.topology]\nkind = "single-switch"\nhosts = 4\n[[scenario.jobs]]\nname = "a"\n'
                     'nodes = 2\nworkload = { kind = "ping-pong", iterations = 1 }\n[[policies]]\nkind = "default"\n')
    run_bytes = qoslab.load_study(study).base().estimated_memory_bytes()
    monkeypatch.setattr(resources, "available_memory_bytes", lambda: run_bytes * 3 // 2)  # one run fits, not two
    result = CliRunner().invoke(app, ["study", str(study), "--out", str(tmp_path / "o"), "--workers", "2"])
    assert result.exit_code == 0, result.output
    assert "running 1 at a time" in " ".join(result.stderr.split()) and "1 workers" in result.output
