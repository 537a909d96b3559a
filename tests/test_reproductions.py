"""The seeds' findings, checked for direction at small scale on the example studies (shortened
where they are long). docs/reproductions.md lists the findings, our numbers, and where the model
disagrees; the per-rank finding is checked on the default study (test_cli_engine.py)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from qoslab.analysis import congestion_impact, iteration_stats
from qoslab.scenario import read_toml
from qoslab.study.model import Study
from qoslab.study.runner import StudyRunner
from qoslab.sweep.executors import LocalExecutor

EXAMPLES = Path(__file__).parent.parent / "examples"


def run_example(name, tmp_path, **changes):
    path = EXAMPLES / name / "study.toml"
    data = {**read_toml(path), **changes}
    study = Study.from_dict(data, str(path))
    executor = LocalExecutor()
    try:
        return StudyRunner(study, tmp_path / name, executor, progress=False).run()
    finally:
        executor.close()


def slowdown_by(outcome):
    slow = pd.read_parquet(outcome.out / "slowdown.parquet")
    jobs = outcome.tables["jobs"]
    sl = jobs[jobs["mode"] == "shared"][["repetition", "policy", "job", "sl"]]
    return slow.merge(sl, on=["repetition", "policy", "job"])


def test_savoie_job_level_qos_moves_contention_between_jobs(tmp_path):
    outcome = run_example("savoie-per-job", tmp_path, repetitions=1)
    slow = slowdown_by(outcome)
    per_job = slow[slow["policy"].str.startswith("per-job")]
    by_level = per_job.groupby(["job", "sl"])["slowdown"].mean().unstack()
    default = slow[slow["policy"] == "default"].groupby("job")["slowdown"].mean()
    # The job on the top SL comes near its alone time; on the bottom SL it loses against default.
    assert (by_level[0] < 1.15).all(), by_level
    assert (by_level[0] < default).all() and (by_level[3] > default).all(), (by_level, default)
    # And over all assignments, total contention is no better than everyone on SL 0 (measured:
    # +14% on average), though the assignments spread both ways: priorities move contention.
    totals = pd.read_parquet(outcome.out / "policies.parquet").set_index("policy")["total_contention_us"]
    assignments = totals.drop("default")
    assert assignments.mean() > totals["default"]
    assert assignments.min() < totals["default"] < assignments.max()


def test_jokanovic_mapping_cuts_total_contention_and_the_heuristic_finds_q_opt(tmp_path):
    search = {"kind": "search", "weight_sets": ["equal"]}  # 15 mappings up to relabelling: exhaustive
    policies = [{"kind": "default"}, {"kind": "vl-mapping"}, search]
    outcome = run_example("jokanovic-mapping", tmp_path, policies=policies)
    totals = pd.read_parquet(outcome.out / "policies.parquet").set_index("policy")["total_contention_us"]
    assert totals["q-opt"] < 0.7 * totals["default"]  # tens of percent (the brief's example: 59%)
    assert totals["vl-mapping[spread-by-load,equal]"] < 1.05 * totals["q-opt"]
    candidates = outcome.search["value"]
    assert len(candidates) == 15 and candidates.median() > totals["q-opt"]  # a random mapping does worse


def test_khalilov_priority_assignment_cuts_the_canaries_congestion_impact(tmp_path):
    victims = ["rr-latency", "rr-bandwidth", "allreduce"]
    policies = [{"kind": "default"},
                {"kind": "per-message", "name": "promote", "jobs": victims},
                {"kind": "per-message", "name": "demote", "jobs": victims, "direction": "demote"}]
    outcome = run_example("khalilov-gpcnet", tmp_path, policies=policies)
    it = outcome.tables["iterations"]
    allreduce = congestion_impact(it, "allreduce").set_index("policy")
    bandwidth = congestion_impact(it, "rr-bandwidth", kind="bandwidth").set_index("policy")["cif_average"]
    assert allreduce.loc["default", "cif_p99"] > 5  # congestion hurts the canaries' tail
    # Demote (the victims' clean traffic on the top tier): the p99 impact falls by several times.
    assert allreduce.loc["demote", "cif_p99"] < allreduce.loc["default", "cif_p99"] / 3
    # Promote: the averages improve, the tail does not (docs/reproductions.md says why).
    assert allreduce.loc["promote", "cif_average"] < 0.9 * allreduce.loc["default", "cif_average"]
    assert bandwidth["promote"] < 0.9 * bandwidth["default"]


def test_subramoni_separate_vls_free_a_victim_from_head_of_line_blocking(tmp_path):
    outcome = run_example("subramoni-multi-vl", tmp_path)
    stats = iteration_stats(outcome.tables["iterations"]).query("job == 'victim'").set_index("policy")
    assert stats.loc["default", "p50"] > 2 * stats.loc["alone", "p50"]
    four = stats.loc["multi-vl[4,destination]"]
    assert four["p50"] < 0.5 * stats.loc["default", "p50"]
    assert four["std"] < stats.loc["default", "std"]
    # Spreading by connection spreads the incast over every VL too: no relief.
    assert stats.loc["multi-vl[4,connection]", "p50"] > 2 * four["p50"]
    # The same 128 KiB per port as 1, 2, 4 and 8 VLs (Sancho et al.'s fixed total): the victim's
    # median falls with every doubling.
    fixed = [stats.loc[p, "p50"] for p in ("default on 1 VL", "multi-vl[2,destination] on 2 VLs",
                                            "multi-vl[4,destination]", "multi-vl[8,destination] on 8 VLs")]
    assert fixed == sorted(fixed, reverse=True) and fixed[-1] < 0.5 * fixed[0]


@pytest.mark.parametrize("message_bytes, at_most", [(4096, 1.02), (16384, 1.10)])
def test_equal_vls_cost_only_what_interleaving_costs_without_a_congestor(tmp_path, message_bytes, at_most):
    scenario = read_toml(EXAMPLES / "subramoni-multi-vl" / "scenario.toml")
    scenario["jobs"] = scenario["jobs"][:1]  # the victim only
    scenario["jobs"][0]["workload"]["bytes"] = message_bytes
    study = Study.from_dict({"scenario": scenario, "policies": [{"kind": "multi-vl", "vls": 4, "by": "destination"}]},
                            str(EXAMPLES / "subramoni-multi-vl" / "study.toml"))
    outcome = StudyRunner(study, tmp_path, LocalExecutor(1), progress=False).run()
    runtime = outcome.tables["jobs"].set_index("policy")["runtime_us"]
    ratio = runtime["multi-vl[4,destination]"] / runtime["default"]
    # Never faster (nothing to relieve), and within science.md's 2% for one-packet messages
    # (measured +1.7%). Multi-packet messages pay more (measured +4.6% for 4-packet ones): packets
    # of different VLs interleave on a link, so a message finishes later than in one FIFO
    # (docs/reproductions.md). The bound is what we measure, not the 2% guess.
    assert 1.0 <= ratio <= at_most


def test_congestion_control_and_qos_together_protect_the_canaries_best(tmp_path):
    """docs/reproductions.md, "Congestion control with QoS": the study as the example ships it.
    What we measure: CC alone cuts the total contention; QoS alone cuts the bandwidth canary's
    impact; both together give the lowest total contention and bandwidth-canary impact."""
    study = Study.from_toml(EXAMPLES / "congestion-control" / "study.toml")
    outcome = study.run(tmp_path, executor="local", workers=2)
    sweep = outcome.tables["sweep"].set_index(["congestion_control.enabled", "policy"])
    total = sweep["total_contention_us"]
    assert total[(True, "default")] < 0.7 * total[(False, "default")]
    assert total[(True, "per-job[canaries high]")] == total.min()
    cif = {}
    for point, enabled in ((0, False), (1, True)):
        gpcnet = pd.read_parquet(tmp_path / "points" / f"point={point}" / "gpcnet.parquet")
        for row in gpcnet[gpcnet["job"] == "rr-bandwidth"].itertuples():
            cif[(enabled, row.policy)] = row.cif_average
    assert cif[(False, "per-job[canaries high]")] < 0.8 * cif[(False, "default")]
    assert cif[(True, "per-job[canaries high]")] == min(cif.values())
