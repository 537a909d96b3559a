"""MPI jobs through the scenario layer: keys, placement, results, errors."""

import json

import pyarrow.parquet as pq
import pytest
import qoslab
from qoslab import Scenario, ScenarioError, simulate
from qoslab.cli import app
from typer.testing import CliRunner

TREE = {"kind": "xgft", "m": [8, 8], "w": [1, 8]}  # 64 hosts, 8 per leaf


def scenario(*jobs, **extra):
    return Scenario(topology=extra.pop("topology", TREE), jobs=list(jobs), **extra)


def job(name, nodes=4, **keys):
    return {"name": name, "nodes": nodes, "workload": keys.pop("workload", {"kind": "ping-pong"}), **keys}


# -- placement ------------------------------------------------------------------------------------


def test_contiguous_jobs_take_consecutive_free_hosts_in_order():
    s = scenario(job("a", 5), job("b", 3))
    assert s.placements() == [[0, 1, 2, 3, 4], [5, 6, 7]]


def test_fragmented_jobs_interleave_k_nodes_per_leaf():
    # F4 with two jobs: each leaf of 8 gets 4 of a and 4 of b.
    s = scenario(job("a", 8, placement="fragmented"), job("b", 8, placement="fragmented"))
    a, b = s.placements()
    assert a == [0, 1, 2, 3, 8, 9, 10, 11]
    assert b == [4, 5, 6, 7, 12, 13, 14, 15]
    # F2: a single job spreads 2 per leaf.
    (c,) = scenario(job("c", 6, placement="fragmented", fragment_nodes=2)).placements()
    assert c == [0, 1, 8, 9, 16, 17]


def test_random_placement_is_seeded_and_exclusive():
    jobs = [job("a", 20, placement="random"), job("b", 20, placement="random"), job("c", 20)]
    first = scenario(*jobs, seed=3).placements()
    assert first == scenario(*jobs, seed=3).placements()
    assert first != scenario(*jobs, seed=4).placements()
    hosts = [h for p in first for h in p]
    assert len(hosts) == len(set(hosts)) == 60
    assert first[2] == list(range(20))  # contiguous jobs are placed before random ones


def test_explicit_hosts_and_sharing():
    s = scenario(job("a", placement="hosts", hosts=[9, 3], nodes=None), job("b", 2, placement="hosts", hosts="3-4",
                                                                            share_hosts=True))
    assert s.placements() == [[9, 3], [3, 4]]


@pytest.mark.parametrize("jobs, key, text", [
    ([job("a", 65)], "jobs[0].nodes", "no 65 consecutive free hosts"),
    ([job("a", 40), job("b", 30, placement="random")], "jobs[1].nodes", "only 24 hosts are free"),
    ([job("a", 60, placement="fragmented", fragment_nodes=4)], "jobs[0].nodes", "fragmented placement ran out"),
    ([job("a", placement="hosts", hosts=[1, 2], nodes=None), job("b", placement="hosts", hosts=[2], nodes=None)],
     "jobs[1].hosts", "host 2 is already used by another job"),
    ([job("a", placement="hosts", hosts=[70], nodes=None)], "jobs[0].hosts", "host 70 does not exist"),
    ([job("a", placement="hosts", nodes=2)], "jobs[0].hosts", "needs the list of hosts"),
    ([job("a", hosts=[1, 2])], "jobs[0].hosts", "only used with placement"),
    ([{"name": "a", "workload": {"kind": "ping-pong"}}], "jobs[0].nodes", "required key is missing"),
    ([job("a"), job("a")], "jobs[1].name", "used twice"),
    ([job("a", workload={"kind": "lulesh"})], "jobs[0].workload.kind", "expected one of"),
    ([job("a", workload={"kind": "all-to-all", "size": 4})], "jobs[0].workload.size", "unknown key"),
    ([job("a", workload={"kind": "all-to-all", "iterations": 0})], "jobs[0].workload.iterations", "greater than"),
    ([job("a", collectives={"allreduce": "tree"})], "jobs[0].collectives.allreduce", "recursive-doubling"),
    ([job("a", sl=16)], "jobs[0].sl", "less than or equal to 15"),
    # The hints list each table's keys, down to the workload and SL policy of the kind given
    # (scenario.py loads the job models only for a scenario with jobs; these come from jobs.TABLES).
    ([job("a", colour="red")], "jobs[0].colour", "unknown key (expected one of: name, nodes, ranks_per_node,"),
    ([job("a", workload={"kind": "all-to-all", "size": 4})], "jobs[0].workload.size",
     "unknown key (expected one of: kind, bytes, iterations,"),
    ([job("a", sl_policy={"kind": "spread", "sls": [1, 2], "x": 1})], "jobs[0].sl_policy.x",
     "unknown key (expected one of: kind, sls, by)"),
])
def test_bad_jobs_name_the_key(jobs, key, text):
    with pytest.raises(ScenarioError) as caught:
        scenario(*jobs)
    message = str(caught.value)
    assert key in message and text in message, message


@pytest.mark.parametrize("jobs, text", [({"name": "a"}, "expected a list"), ([3], "expected a table"),
                                        ((), "expected a list"), ((job("a"),), "expected a list")])
def test_jobs_of_the_wrong_type_name_the_key(jobs, text):
    with pytest.raises(ScenarioError, match=r"jobs(\[0\])?: " + text):
        Scenario.from_dict({"jobs": jobs})


def test_a_scenario_keeps_a_jobs_list_of_its_own():
    given: list = []
    assert Scenario(jobs=given).jobs is not given


def test_mpi_keys_are_checked():
    with pytest.raises(ScenarioError, match=r"mpi.shm_gbps"):
        scenario(job("a"), mpi={"shm_gbps": 0})
    with pytest.raises(ScenarioError, match=r"mpi.rendezvous: unknown key"):
        scenario(job("a"), mpi={"rendezvous": True})


def test_run_limits_depend_on_jobs():
    assert (Scenario().run.duration_us, Scenario().run.warmup_us) == (500.0, 50.0)
    s = scenario(job("a"))
    assert (s.run.duration_us, s.run.warmup_us) == (1_000_000.0, 0.0)
    # Resolved values are not "set": an override re-resolves them.
    assert "duration_us" not in s.model_dump(exclude_unset=True).get("run", {})


# -- results ---------------------------------------------------------------------------------------


def test_job_results_ranks_table_and_resolved_placement():
    s = scenario(job("nn", 8, ranks_per_node=2, placement="random",
                     workload={"kind": "nearest-neighbor", "dims": 2, "iterations": 3, "compute_us": 2.0}),
                 job("pp", 2, workload={"kind": "ping-pong", "iterations": 5}), seed=5)
    r = simulate(s)
    jobs = r.summary["jobs"]
    assert set(jobs) == {"nn", "pp"}
    assert jobs["nn"]["ranks"] == 16 and jobs["nn"]["nodes"] == 8 and jobs["nn"]["completed"]
    assert r.summary["status"] == "completed"
    ranks = r.ranks.to_pandas()
    first = ranks[(ranks.job_name == "nn") & (ranks.run == 0)]
    assert len(first) == 16 * 3
    # Every iteration's time includes its 2 us of compute; waiting never exceeds the time.
    assert (first.time_ns >= 2000).all() and (first.mpi_wait_ns <= first.time_ns).all()
    # Two ranks per node: the hosts column names each node twice.
    hosts = first[first.iteration == 0].sort_values("rank").host.tolist()
    assert hosts[0::2] == hosts[1::2] == s.placements()[0]
    # The resolved scenario pins the placement so it replays exactly.
    resolved = r.summary["scenario"]["jobs"][0]
    assert resolved["placement"] == "hosts" and resolved["hosts"] == s.placements()[0]
    again = simulate(Scenario(**r.summary["scenario"])).summary
    assert again["jobs"] == r.summary["jobs"]


def test_job_runs_are_deterministic():
    s = scenario(job("a", 16, placement="random", workload={"kind": "random-pairs", "iterations": 4}),
                 job("b", 16, placement="random", workload={"kind": "all-to-all", "bytes": 8192, "iterations": 2}),
                 seed=11)
    one, two = simulate(s).summary, simulate(s).summary
    for summary in (one, two):
        summary.pop("wall_seconds")
    assert one == two


def test_contention_slows_a_job_down():
    victim = job("victim", 8, placement="fragmented", workload={"kind": "all-to-all", "bytes": 32768, "iterations": 3})
    flood = job("flood", 8, placement="fragmented", workload={"kind": "flood-pairs", "iterations": 50})
    slim = {"kind": "xgft", "m": [8, 8], "w": [1, 1]}
    alone = simulate(scenario(victim, topology=slim)).summary["jobs"]["victim"]["runtime_us"]
    shared = simulate(scenario(victim, flood, topology=slim)).summary["jobs"]["victim"]["runtime_us"]
    assert shared > 1.2 * alone


def test_time_limit_leaves_jobs_incomplete_and_warns(tmp_path):
    path = tmp_path / "slow.toml"
    path.write_text('[topology]\nkind = "single-switch"\nhosts = 4\n[run]\nduration_us = 20\n'
                    '[[jobs]]\nname = "a2a"\nnodes = 4\nworkload = { kind = "all-to-all", bytes = 1048576 }\n')
    result = CliRunner().invoke(app, ["run", str(path), "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert "did not finish within run.duration_us = 20" in result.output
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["status"] == "time_limit" and summary["jobs"]["a2a"]["completed"] is False
    assert summary["jobs"]["a2a"]["runtime_us"] is None
    assert pq.read_table(tmp_path / "out" / "ranks.parquet").num_rows == 0


def test_check_lists_the_placements(tmp_path):
    path = tmp_path / "jobs.toml"
    path.write_text('[topology]\nkind = "xgft"\nm = [8, 8]\nw = [1, 8]\n'
                    '[[jobs]]\nname = "frag"\nnodes = 8\nplacement = "fragmented"\nfragment_nodes = 2\n'
                    'workload = { kind = "random-pairs" }\n')
    result = CliRunner().invoke(app, ["check", str(path)])
    assert result.exit_code == 0, result.output
    assert "0-1,8-9,16-17,24-25" in result.output


def test_a_job_too_big_for_the_fabric_is_a_clear_cli_error(tmp_path):
    path = tmp_path / "big.toml"
    path.write_text('[topology]\nkind = "single-switch"\nhosts = 4\n'
                    '[[jobs]]\nnodes = 8\nworkload = { kind = "ping-pong" }\n')
    result = CliRunner().invoke(app, ["run", str(path)])
    assert result.exit_code == 2
    assert f"{path}: jobs[0].nodes: no 8 consecutive free hosts" in result.output
    assert "Traceback" not in result.output


def test_deadlock_is_a_clear_error_with_partial_results(tmp_path, monkeypatch):
    import importlib

    import numpy as np

    simulate_module = importlib.import_module("qoslab.simulate")
    # Rank 0 waits for tag 5 from rank 1, which sends tag 6 (packed ops: code, a, b, c).
    words = np.array([2, 1, 0, 5, 5, 0, 0, 0,
                      1, 0, 8, 6, 5, 0, 0, 0], dtype="<u8")
    offsets = np.array([0, 2, 4], dtype="<u8")
    monkeypatch.setattr(simulate_module, "trace_programs", lambda s: ({0: (offsets.tobytes(), words.tobytes())}, []))
    path = tmp_path / "stuck.toml"
    path.write_text('[topology]\nkind = "single-switch"\nhosts = 2\n'
                    '[[jobs]]\nname = "t"\nnodes = 2\nworkload = { kind = "trace", path = "unused.otf2" }\n')
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["run", str(path), "--out", str(out)])
    assert result.exit_code == 1
    assert 'job "t" rank 0 (host 0) waits for a receive from rank 1 (tag 5)' in result.output
    assert "Traceback" not in result.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "deadlock" and summary["jobs"]["t"]["completed"] is False
    with pytest.raises(qoslab.Deadlock) as caught:
        simulate(Scenario.from_toml(path))
    assert caught.value.result.summary["status"] == "deadlock"


def test_a_restarting_job_whose_run_takes_no_time_finishes_once():
    # One rank alone: its allreduce sends nothing and it computes nothing, so a run ends the
    # moment it starts. Restarting it (to keep contention up for the other job) used to recurse
    # until the stack overflowed; it adds no contention, so it now stays done.
    scenario = Scenario.model_validate({
        "name": "zero-time job", "topology": {"kind": "single-switch", "hosts": 8},
        "jobs": [{"name": "solo", "nodes": 1,
                  "workload": {"kind": "collective-loop", "collective": "allreduce", "bytes": 8, "iterations": 2}},
                 {"name": "pairs", "nodes": 4, "workload": {"kind": "ping-pong", "iterations": 50}}]})
    jobs = simulate(scenario).summary["jobs"]
    assert jobs["solo"]["completed"] and jobs["solo"]["runtime_us"] == 0
    assert jobs["pairs"]["completed"] and jobs["pairs"]["runtime_us"] > 0


@pytest.mark.parametrize("workload", [
    {"kind": "random-pairs", "bytes": 64, "iterations": 65},
    {"kind": "gpcnet-rr-bandwidth", "bytes": 64, "iterations": 65, "iterations_per_ring": 1},
])
def test_a_restarted_job_with_more_iterations_than_its_kept_draws_runs(workload):
    # Its random pairings or rings beyond the last 64 were dropped; a restart asked for them again.
    s = qoslab.Scenario(topology={"kind": "single-switch", "hosts": 4},
                        jobs=[{"name": "a", "nodes": 2, "workload": {"kind": "all-to-all", "bytes": 65536, "iterations": 20}},
                              {"name": "b", "nodes": 2, "workload": workload}])
    jobs = qoslab.simulate(s).summary["jobs"]
    assert jobs["a"]["completed"] and jobs["b"]["runs_completed"] >= 2, jobs["b"]


def test_the_message_table_names_ranks_protocol_and_tag_of_mpi_messages():
    # Two ranks per host, so hosts alone cannot tell the senders apart: the table names the ranks
    # within the job, the protocol part and the tag; open-loop rows have none (null).
    scenario = qoslab.Scenario(topology={"kind": "single-switch", "hosts": 4}, run={"messages": True},
                               jobs=[{"name": "a2a", "nodes": 2, "ranks_per_node": 2, "placement": "hosts", "hosts": [0, 1],
                                      "workload": {"kind": "all-to-all", "bytes": 8, "iterations": 1}}])
    rows = qoslab.simulate(scenario).messages.to_pylist()
    mpi = [r for r in rows if r["job"] == 0]
    # Ranks 0, 1 on host 0 and 2, 3 on host 1: every pair across the hosts, once each way, eager.
    assert sorted((r["src_rank"], r["dst_rank"]) for r in mpi) == sorted(
        (a, b) for a in range(4) for b in range(4) if a // 2 != b // 2)
    assert all(r["src"] == r["src_rank"] // 2 and r["dst"] == r["dst_rank"] // 2 and r["mpi_kind"] == "eager" for r in mpi)
    assert all(r["tag"] >= 2**31 for r in mpi)  # a collective's messages carry the engine's own tags
    open_loop = qoslab.Scenario(topology={"kind": "single-switch", "hosts": 4}, traffic=[{"load": 0.2}],
                                run={"messages": True, "duration_us": 20, "warmup_us": 0})
    traffic = qoslab.simulate(open_loop).messages.to_pylist()
    assert traffic and all(r["src_rank"] is None and r["tag"] is None and r["mpi_kind"] == "traffic" for r in traffic)
