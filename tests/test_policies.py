"""Policies on hand-made inputs: which ranks, which VLs, which tables, computed by hand."""

from __future__ import annotations

import pandas as pd
import pytest
from qoslab.policies import (
    AloneRun,
    MultiVl,
    PerJob,
    PerMessage,
    PerRank,
    PolicyContext,
    VlMapping,
)
from qoslab.policies.arbitration import Arbitration
from qoslab.policies.mapping import level_utilisation

JOBS = ["a", "b"]
SCENARIO = {"jobs": [{"name": "a", "sl": 3, "hosts": [0, 1]}, {"name": "b", "sl": 2, "hosts": [2, 3]}], "qos": {"old": True}}


def context(profile=None, alone=None, size=10):
    return PolicyContext(repetition=0, seed=5, jobs=JOBS, ranks={"a": size, "b": size}, qos_vls=4,
                         profile=profile, alone=alone or {})


def profile_with_waits(waits):
    """Two iterations per rank; rank r waits waits[r] in total."""
    rows = [{"job": "a", "rank": r, "iteration": i, "time_ns": 1000.0, "mpi_wait_ns": w / 2, "sends": 1}
            for r, w in enumerate(waits) for i in range(2)]
    rows.append({"job": "b", "rank": 0, "iteration": 0, "time_ns": 1.0, "mpi_wait_ns": 1e9, "sends": 1})  # other jobs ignored
    return pd.DataFrame(rows)


WAITS = [50, 10, 90, 30, 70, 20, 80, 60, 40, 100]


@pytest.mark.parametrize(
    "metric, fraction, expected",
    [
        ("least-wait", 0.1, [1]),  # rank 1 waits least: the one the others wait for
        ("least-wait", 0.3, [1, 3, 5]),
        ("most-wait", 0.2, [2, 9]),
        ("most-wait", 0.25, [2, 6, 9]),  # ceil(2.5) = 3
    ],
)
def test_per_rank_picks_ranks_by_the_metric(metric, fraction, expected):
    policy = PerRank(kind="per-rank", job="a", fraction=fraction, metric=metric)
    assert policy.choose(context(profile_with_waits(WAITS))) == expected


def test_per_rank_passes_over_ranks_that_never_send():
    # A rank that sends nothing waits 0 in MPI and so ranked first by least-wait, though an SL moves
    # only a rank's own sends: on a 4-rank ping-pong the choice was idle rank 2, and nothing went on
    # the priority SL.
    profile = profile_with_waits([40, 30, 0, 0])
    profile.loc[profile["rank"].isin([2, 3]), "sends"] = 0
    policy = PerRank(kind="per-rank", job="a", fraction=0.25, metric="least-wait")
    assert policy.choose(context(profile, size=4)) == [1]  # the sender that waits least
    most = PerRank(kind="per-rank", job="a", fraction=0.75, metric="most-wait")
    assert most.choose(context(profile, size=4)) == [0, 1, 2]  # both senders, then the lower idle rank


def test_wait_inflation_subtracts_the_alone_wait():
    alone_waits = [40, 0, 85, 0, 0, 0, 0, 0, 0, 95]  # ranks 0, 2, 9 waited nearly as much alone
    alone = AloneRun(runtime_us=1.0, iterations=profile_with_waits(alone_waits).query("job == 'a'").drop(columns="job"),
                     levels=pd.DataFrame(), link_gbps=100.0)
    policy = PerRank(kind="per-rank", job="a", fraction=0.2, metric="wait-inflation")
    # inflation: [10,10,5,30,70,20,80,60,40,5] -> 80 (rank 6), 70 (rank 4)
    assert policy.choose(context(profile_with_waits(WAITS), {"a": alone})) == [4, 6]


def test_random_ranks_are_seeded_and_sized():
    policy = PerRank(kind="per-rank", job="a", fraction=0.3, metric="random")
    first, second = policy.choose(context()), policy.choose(context())
    assert first == second and len(first) == 3 and len(set(first)) == 3
    picks = {tuple(policy.choose(PolicyContext(repetition=1, seed=s, jobs=JOBS, ranks={"a": 10, "b": 10}, qos_vls=4)))
             for s in range(6, 16)}
    assert len(picks) > 1  # another seed, another choice


def test_per_rank_scenario_puts_the_chosen_ranks_on_sl1_and_others_on_sl0():
    policy = PerRank(kind="per-rank", job="a", fraction=0.1, metric="least-wait", match="destination")
    out = policy.apply(SCENARIO, context(profile_with_waits(WAITS)))
    a, b = out["jobs"]
    assert a["sl"] == 0 and a["sl_policy"] == {"kind": "ranks", "ranks": [1], "sl": 1, "match": "destination"}
    assert b["sl"] == 0 and "sl_policy" not in b
    assert out["qos"]["sl2vl"][:3] == [0, 1, 0]
    assert SCENARIO["jobs"][0]["sl"] == 3  # the input is not modified
    online = PerRank(kind="per-rank", job="a", selection="online", after_iterations=3).apply(SCENARIO, context())
    assert online["jobs"][0]["sl_policy"]["kind"] == "slowest-ranks"
    assert online["jobs"][0]["sl_policy"]["after_iterations"] == 3


def test_per_job_sets_each_jobs_sl_and_the_seeds_tables():
    out = PerJob(kind="per-job", assignment={"a": 2, "b": 0}).apply(SCENARIO, context())
    assert [j["sl"] for j in out["jobs"]] == [2, 0]
    q = out["qos"]
    assert q["sl2vl"] == [0, 1, 2, 3] + [0] * 12 and q["vlarb_high"] == []
    weights = {vl: sum(w for v, w in q["vlarb_low"] if v == vl) for vl in range(4)}
    assert weights == {0: 2286, 1: 254, 2: 9, 3: 1}


def test_high_table_and_limit():
    q = Arbitration(weights=[255, 255], high=[1], high_limit=4).qos()
    assert q["vlarb_high"] == [[1, 255]] and q["vlarb_low"] == [[0, 255]] and q["high_limit"] == 4


def test_per_message_and_multi_vl_rules():
    out = PerMessage(kind="per-message", jobs=["b"], weights=[10, 20, 30], thresholds=[1.5, 4.0], direction="demote").apply(SCENARIO, context())
    a, b = out["jobs"]
    assert "sl_policy" not in a
    assert b["sl_policy"] == {"kind": "latency-history", "sls": [0, 1, 2], "thresholds": [1.5, 4.0],
                              "direction": "demote", "history_messages": 16, "high_bytes_cap": 1.0}
    # The top of three tiers (VL2) is in the high-priority table by default: it had been VL1, so
    # the middle tier outranked the top one.
    assert out["qos"]["vlarb_high"] == [[2, 30]] and out["qos"]["vlarb_low"] == [[0, 10], [1, 20]]
    spread = MultiVl(kind="multi-vl", by="destination").apply(SCENARIO, context())
    assert all(j["sl_policy"] == {"kind": "spread", "sls": [0, 1, 2, 3], "by": "destination"} for j in spread["jobs"])
    assert spread["qos"]["vlarb_low"] == [[v, 64] for v in range(4)]


def alone(runtime_us, up_bytes, links, gbps=8.0):
    """up_bytes[l-1] sent up through level l over `links` links."""
    rows = [{"level": l + 1, "direction": "up", "bytes": b, "links_used": links, "busy_ns": 0.0} for l, b in enumerate(up_bytes)]
    return AloneRun(runtime_us=runtime_us, iterations=pd.DataFrame(), levels=pd.DataFrame(rows), link_gbps=gbps)


def test_level_utilisation_is_bytes_over_time_rate_and_links():
    # 8 Gb/s = 1 byte/ns; 10 us on 4 links can carry 40000 bytes.
    assert level_utilisation(alone(10.0, [20000, 4000], 4)) == {1: 0.5, 2: 0.1}


def test_mapping_keeps_the_jobs_that_load_the_top_level_apart():
    four = ["a", "b", "c", "d"]
    runs = {"a": alone(10.0, [1, 30000], 4), "b": alone(10.0, [1, 1000], 4),
            "c": alone(10.0, [1, 20000], 4), "d": alone(10.0, [1, 0], 4)}
    ctx = PolicyContext(repetition=0, seed=1, jobs=four, ranks=dict.fromkeys(four, 4), qos_vls=4, alone=runs)
    assert VlMapping(kind="vl-mapping").mapping(ctx) == {"a": 0, "c": 1, "b": 2, "d": 3}
    two = PolicyContext(repetition=0, seed=1, jobs=four, ranks=dict.fromkeys(four, 4), qos_vls=2, alone=runs)
    assert VlMapping(kind="vl-mapping").mapping(two) == {"a": 0, "c": 1, "b": 0, "d": 1}
    # separate-heavy: a (0.75) and c (0.5) are >= 0.5 x 0.75; b and d share the last VL.
    heavy = VlMapping(kind="vl-mapping", rule="separate-heavy", vls=3).mapping(ctx)
    assert heavy == {"a": 0, "c": 1, "b": 2, "d": 2}


def test_slowest_sends_is_the_highest_mean_send_latency():
    rows = [{"job": "a", "rank": r, "iteration": 0, "time_ns": 1.0, "mpi_wait_ns": 0.0, "sends": n, "send_latency_ns": lat}
            for r, (n, lat) in enumerate([(4, 400.0), (2, 500.0), (5, 400.0), (0, 0.0)])]
    policy = PerRank(kind="per-rank", job="a", fraction=0.25, metric="slowest-sends")
    # means: 100, 250, 80, 0 -> rank 1
    assert policy.choose(context(pd.DataFrame(rows), size=4)) == [1]
