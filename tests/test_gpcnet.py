"""GPCNeT as GPCNeT defines it (netbench/GPCNET v1.3): the canary sequence and the congestors
checked against closed forms of what they send, node slices at several ranks per node, the same
rings alone and shared, and the congestion impact factor computed as GPCNeT computes it."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from qoslab import Scenario, ScenarioError, simulate
from qoslab.analysis import canary_tests, gpcnet_impact
from qoslab.analysis.gpcnet import gpcnet_p99
from qoslab.cli import app
from qoslab.workloads import GpcnetCanaries
from typer.testing import CliRunner

TREE = {"kind": "xgft", "m": [4, 4], "w": [1, 4]}  # 16 hosts, full bisection

SMALL = {"kind": "gpcnet-canaries", "latency_rings": 2, "latency_iterations": 3, "latency_warmup": 2,
         "bandwidth_rings": 2, "bandwidth_iterations": 2, "bandwidth_warmup": 1, "bandwidth_bytes": 16384,
         "allreduce_tests": 2, "allreduce_iterations": 3, "allreduce_warmup": 1}


def canaries(nodes=5, per_node=2, workload=None, name="canaries", hosts=None, **keys):
    job = {"name": name, "ranks_per_node": per_node, "restart": False, "workload": dict(workload or SMALL), **keys}
    if hosts is not None:
        job.update(placement="hosts", hosts=hosts)
    else:
        job["nodes"] = nodes
    return job


def run(*jobs, **extra):
    return simulate(Scenario(topology=TREE, jobs=list(jobs), **extra))


def recursive_doubling_messages(p):
    """Messages of one recursive-doubling allreduce over p ranks (MPICH's fold for p not a power of 2)."""
    p2 = 1 << (p.bit_length() - 1)
    return p2 * int(math.log2(p2)) + 2 * (p - p2)


def test_the_canary_sequence_records_exactly_gpcnet_s_timed_iterations():
    model = GpcnetCanaries(**SMALL)
    # 2 latency rings of 1 sync + 2 warm-up + 3 timed, 2 bandwidth rings of 1 + 1 + 2, 2 allreduce tests of 1 + 1 + 3.
    assert model.total_iterations() == 2 * 6 + 2 * 4 + 2 * 5
    tests = model.gpcnet_tests()
    assert [t.name for t in tests] == ["RR Two-sided Lat (8 B)", "RR Two-sided BW+Sync (16384 B)", "Multiple Allreduce (8 B)"]
    assert [t.blocks for t in tests] == [((3, 3), (9, 3)), ((14, 2), (18, 2)), ((22, 3), (27, 3))]
    result = run(canaries())
    job = result.summary["jobs"]["canaries"]
    assert job["iterations"] == model.total_iterations() and job["completed"]
    ranks = result.ranks.to_pandas()
    timed = sorted(i for t in tests for first, count in t.blocks for i in range(first, first + count))
    assert sorted(ranks["iteration"].unique()) == timed  # syncs and warm-ups are not recorded
    assert len(ranks) == 10 * len(timed)


def test_each_canary_test_sends_what_gpcnet_sends():
    nodes, per_node = 5, 2
    result = run(canaries(nodes, per_node))
    m = GpcnetCanaries(**SMALL)
    ranks = nodes * per_node
    # RR latency: 8 B to each ring neighbour per iteration; BW+Sync: outstanding x bytes to each
    # (the barrier of the slice sends 0 bytes); warm-up iterations send as much as timed ones.
    latency = ranks * m.latency_rings * (m.latency_warmup + m.latency_iterations) * 2 * m.latency_bytes
    bandwidth = ranks * m.bandwidth_rings * (m.bandwidth_warmup + m.bandwidth_iterations) * 2 * m.bandwidth_outstanding \
        * m.bandwidth_bytes
    # Multiple Allreduce: one 8 B allreduce per slice (per_node of them, each over the 5 nodes) per
    # iteration; each test opens with GPCNeT's timeout check, an 8 B allreduce of all 10 ranks.
    allreduce = m.allreduce_tests * ((m.allreduce_warmup + m.allreduce_iterations) * per_node
                                     * recursive_doubling_messages(nodes) * 8 + recursive_doubling_messages(ranks) * 8)
    assert result.summary["jobs"]["canaries"]["bytes_sent"] == latency + bandwidth + allreduce


@pytest.mark.parametrize("kind, per_iteration", [
    # n nodes x k ranks: every slice (one rank per node) runs its own congestor.
    ("gpcnet-alltoall", lambda n, k: k * n * (n - 1) * 4096),
    ("gpcnet-incast", lambda n, k: k * (n - 1) * 4096),
    ("gpcnet-put-incast", lambda n, k: k * (n - 1) * 4096),
])
def test_congestors_run_once_per_node_slice_and_never_inside_a_node(kind, per_iteration):
    n, k, iterations = 6, 3, 4
    job = {"name": "c", "nodes": n, "ranks_per_node": k, "workload": {"kind": kind, "iterations": iterations}}
    result = run(job)
    figures = result.summary["jobs"]["c"]
    assert figures["bytes_sent"] == iterations * per_iteration(n, k)
    # All of it crosses the fabric: with one communicator over the whole job, ranks sharing a
    # node would have exchanged through shared memory.
    assert figures["network"]["bytes_delivered"] == figures["bytes_sent"]


def test_get_bcast_roots_sit_on_the_first_node_one_per_slice():
    result = run({"name": "g", "nodes": 4, "ranks_per_node": 2, "workload": {"kind": "gpcnet-get-bcast", "iterations": 3}},
                 run={"messages": True})
    hosts = result.summary["scenario"]["jobs"][0]["hosts"]
    messages = result.messages.to_pandas()
    data = messages[messages["bytes"] == 4096]
    # Every 4 KiB answer leaves the job's first node, towards the 3 others, 2 slices x 3 iterations each.
    assert set(data["src"]) == {hosts[0]} and len(data) == 3 * 2 * 3
    assert set(data["dst"]) == set(hosts[1:])


def test_canaries_see_the_same_rings_alone_and_beside_other_jobs():
    # The study's alone run makes the canary job 0; in the shared run it is job 1. GPCNeT measures
    # isolated and congested on the same rings, so the draws must not depend on the job's index.
    hosts = [0, 5, 6, 11, 12]
    idle = {"name": "idle", "nodes": 1, "placement": "hosts", "hosts": [15],
            "restart": False, "workload": {"kind": "collective-loop", "collective": "barrier", "iterations": 1}}
    alone = run(canaries(hosts=hosts)).ranks.to_pandas()
    beside = run(idle, canaries(hosts=hosts)).ranks.to_pandas()
    beside = beside[beside["job_name"] == "canaries"]
    columns = ["rank", "iteration", "time_ns", "sends"]
    pd.testing.assert_frame_equal(alone[columns].reset_index(drop=True), beside[columns].reset_index(drop=True))
    # Another name draws other rings (the test can tell).
    renamed = run(canaries(hosts=hosts, name="other")).ranks.to_pandas()
    assert not np.array_equal(renamed["time_ns"].to_numpy(), alone["time_ns"].to_numpy())


def test_a_job_can_run_without_recording_its_iterations():
    result = run(canaries(3, 1), {"name": "bg", "nodes": 4, "record_iterations": False,
                                  "workload": {"kind": "gpcnet-incast", "iterations": 5}})
    ranks = result.ranks.to_pandas()
    assert set(ranks["job_name"]) == {"canaries"}
    assert result.summary["jobs"]["bg"]["completed"] and result.summary["jobs"]["bg"]["rank_iteration_ns"]["count"] == 0
    # Left out of the resolved scenario at its default, so stored runs keep their ids.
    resolved = Scenario(topology=TREE, jobs=[canaries(3, 1)]).resolved()
    assert "record_iterations" not in resolved["jobs"][0]
    quiet = Scenario(topology=TREE, jobs=[canaries(3, 1, record_iterations=False)]).resolved()
    assert quiet["jobs"][0]["record_iterations"] is False


def test_bad_canary_settings_are_named_without_a_traceback(tmp_path):
    with pytest.raises(ScenarioError, match=r"jobs\[0\]\.workload\.latency_rings"):
        Scenario(topology=TREE, jobs=[canaries(workload={**SMALL, "latency_rings": 2**31, "latency_iterations": 2**31 - 1})])
    with pytest.raises(ScenarioError, match=r"jobs\[0\]\.workload\.rings"):
        Scenario(topology=TREE, jobs=[canaries(workload={**SMALL, "rings": 3})])
    one_node = tmp_path / "one.toml"
    one_node.write_text('[topology]\nkind = "single-switch"\nhosts = 4\n[[jobs]]\nnodes = 1\nranks_per_node = 4\n'
                        'workload = { kind = "gpcnet-canaries" }\n')
    result = CliRunner().invoke(app, ["run", str(one_node), "--out", str(tmp_path / "out")])
    assert result.exit_code != 0 and "Traceback" not in result.output
    assert "jobs[0].workload" in result.output and "at least 2 nodes" in result.output


# -- the congestion impact factor ------------------------------------------------------------


def test_gpcnet_p99_is_the_floor_0_99_n_th_sample_from_the_best():
    samples = np.arange(1.0, 1001.0)
    assert gpcnet_p99(samples, "latency") == 990.0  # the 990th lowest latency
    assert gpcnet_p99(samples, "bandwidth") == 11.0  # the 990th highest bandwidth
    assert gpcnet_p99(np.arange(1.0, 151.0), "latency") == 148.0  # floor(148.5)
    assert gpcnet_p99(np.array([5.0]), "latency") == 5.0
    assert math.isnan(gpcnet_p99(np.array([]), "latency"))


def iterations_table(model, samples):
    """samples: {(mode, policy): {iteration: [time_ns per rank]}}, one repetition."""
    rows = []
    for (mode, policy), per_iteration in samples.items():
        for iteration, times in per_iteration.items():
            for rank, t in enumerate(times):
                rows.append({"repetition": 0, "mode": mode, "policy": policy, "job": "canaries", "rank": rank,
                             "iteration": iteration, "time_ns": float(t)})
    return pd.DataFrame(rows)


def test_congestion_impact_of_a_known_case_as_gpcnet_computes_it():
    model = GpcnetCanaries(**SMALL)
    latency, bandwidth, allreduce = model.gpcnet_tests()
    (l0, _), (l1, _) = latency.blocks
    (b0, _), (b1, _) = bandwidth.blocks
    (a0, _), (a1, _) = allreduce.blocks
    alone, shared = {}, {}
    # RR latency (2 ranks, 2 rings of 3): alone 2080 ns per iteration, i.e. 1.04 us per send;
    # shared 3120 ns: 1.56 us. Exactly 1.5x, but GPCNeT prints 1.0 and 1.6 and divides those.
    for first in (l0, l1):
        for i in range(first, first + 3):
            alone[i], shared[i] = [2080, 2080], [3120, 3120]
    # An untimed warm-up in the table (older stores recorded them) must not count.
    alone[l0 - 1], shared[l0 - 1] = [1e9, 1e9], [1e9, 1e9]
    # BW+Sync, 2 x 8 x 16 KiB = 256 KiB per iteration: alone 0.25 ms (1000 MiB/s); shared ring 0
    # takes 0.25 + 0.75 ms (500 MiB/s over the ring), ring 1 0.5 + 0.5 ms (500 MiB/s).
    for first, times in ((b0, (250e3, 750e3)), (b1, (500e3, 500e3))):
        for i, t in zip(range(first, first + 2), times):
            alone[i], shared[i] = [250e3, 250e3], [t, t]
    # Multiple Allreduce: alone 1 us; shared 1, 2, 3 us in test 0 and 2, 2, 2 us in test 1.
    for first, times in ((a0, (1e3, 2e3, 3e3)), (a1, (2e3, 2e3, 2e3))):
        for i, t in zip(range(first, first + 3), times):
            alone[i], shared[i] = [1e3, 1e3], [t, t]
    table = iterations_table(model, {("alone", "alone"): alone, ("shared", "default"): shared})
    cif = gpcnet_impact(table, "canaries", model.gpcnet_tests()).set_index("test")
    lat = cif.loc["RR Two-sided Lat (8 B)"]
    assert lat["isolated_average"] == pytest.approx(1.04) and lat["congested_average"] == pytest.approx(1.56)
    assert lat["cif_average"] == pytest.approx(1.5) and lat["cif_p99"] == pytest.approx(1.5)
    assert lat["cif_average_printed"] == 1.6 and lat["cif_p99_printed"] == 1.6
    assert lat["samples_isolated"] == 12 and lat["unit"] == "usec"
    bw = cif.loc["RR Two-sided BW+Sync (16384 B)"]
    assert bw["isolated_average"] == pytest.approx(1000.0) and bw["congested_average"] == pytest.approx(500.0)
    # GPCNeT's average is per ring (bytes over the ring's time), not the mean of per-iteration
    # bandwidths ((1000 + 333 + 500 + 500) / 4 = 583 MiB/s would give 1.71).
    assert bw["cif_average"] == pytest.approx(2.0)
    # p99 of 8 congested samples (1000, 1000, 500 x 4, 333, 333): the floor(7.92) = 7th highest.
    assert bw["congested_p99"] == pytest.approx(1000 / 3) and bw["cif_p99"] == pytest.approx(3.0)
    ar = cif.loc["Multiple Allreduce (8 B)"]
    assert ar["congested_average"] == pytest.approx(2.0) and ar["cif_average"] == pytest.approx(2.0)
    # 12 congested samples (1, 1, 2 x 8, 3, 3 us): the floor(11.88) = 11th lowest, 3 us.
    assert ar["congested_p99"] == pytest.approx(3.0) and ar["cif_p99"] == pytest.approx(3.0)


def test_canary_jobs_are_found_in_a_resolved_scenario():
    scenario = Scenario(topology=TREE, jobs=[canaries(3, 1), {"name": "ring", "nodes": 4, "workload": {
        "kind": "gpcnet-rr-bandwidth", "iterations": 20}}, {"name": "bg", "nodes": 4, "workload": {"kind": "gpcnet-incast"}}])
    found = canary_tests(scenario.resolved())
    assert set(found) == {"canaries", "ring"}
    (ring,) = found["ring"]
    # GPCNeT's NUM_BW_ITERS: a ring of 8 iterations; 20 iterations are rings of 8, 8 and 4.
    assert ring.kind == "bandwidth" and ring.blocks == ((0, 8), (8, 8), (16, 4))
    assert ring.bytes_per_iteration == 2 * 8 * 131072


def test_a_study_of_canaries_beside_unrecorded_congestors_writes_gpcnet_s_table_and_its_report(tmp_path):
    from qoslab.study.model import Study
    from qoslab.study.runner import StudyRunner
    from qoslab.sweep.executors import LocalExecutor

    quiet = {"record_iterations": False, "ranks_per_node": 2}
    scenario = {"topology": TREE, "seed": 3, "jobs": [
        canaries(3, 2, placement="random"),
        {"name": "alltoall", "nodes": 6, "placement": "random", "workload": {"kind": "gpcnet-alltoall", "iterations": 5}, **quiet},
        {"name": "incast", "nodes": 6, "placement": "random", "workload": {"kind": "gpcnet-incast", "iterations": 20}, **quiet},
    ]}
    study = Study.from_dict({"scenario": scenario, "policies": [{"kind": "default"}, {
        "kind": "per-job", "name": "static", "assignment": {"canaries": 1}, "weights": [255, 255], "high": [1]}]})
    executor = LocalExecutor(workers=1)
    try:
        outcome = StudyRunner(study, tmp_path, executor, progress=False).run()
    finally:
        executor.close()
    assert outcome.report_error is None and (tmp_path / "report.html").exists()
    assert set(outcome.tables["iterations"]["job"]) == {"canaries"}
    slow = pd.read_parquet(tmp_path / "slowdown.parquet")
    # The job the default policy slows most has no iterations to show: the report still comes out.
    worst = slow[slow["policy"] == "default"].groupby("job")["slowdown"].mean().idxmax()
    assert worst != "canaries"
    table = pd.read_parquet(tmp_path / "gpcnet.parquet")
    assert len(table) == 2 * 3 and set(table["policy"]) == {"default", "static"}
    assert (table["cif_average"] > 0).all() and "GPCNeT congestion impact" in (tmp_path / "report.html").read_text()
