"""Per-message service-level policies (`[[jobs]] sl_policy`): which SL each message gets, checked
against what the workload sends (counted by hand), and what the choice does to a job."""

from __future__ import annotations

import json

import pytest
from qoslab import Scenario, ScenarioError, simulate
from qoslab.cli import app
from typer.testing import CliRunner

SWITCH = {"kind": "single-switch", "hosts": 16}
TREE = {"kind": "xgft", "m": [4, 4], "w": [1, 1]}  # 4 leaves of 4 hosts, one spine: 4:1


def a2a(name="a2a", nodes=8, bytes_=4096, iterations=4, **keys):
    return {"name": name, "nodes": nodes, "workload": {"kind": "all-to-all", "bytes": bytes_, "iterations": iterations}, **keys}


def run(*jobs, topology=SWITCH, **extra):
    return simulate(Scenario(topology=topology, jobs=list(jobs), **extra))


def by_sl(result, job="a2a"):
    return {int(sl): b for sl, b in result.summary["jobs"][job]["bytes_by_sl"].items()}


def comparable(summary):
    out = dict(summary)
    out.pop("wall_seconds")
    out["scenario"] = {k: v for k, v in summary["scenario"].items() if k != "jobs"}
    return out


def test_job_rule_is_the_default_and_changes_nothing():
    plain = run(a2a(sl=2))
    explicit = run(a2a(sl=2, sl_policy={"kind": "job"}))
    assert comparable(plain.summary) == comparable(explicit.summary)
    assert by_sl(plain) == {2: 8 * 7 * 4096 * 4}
    assert "prioritized_ranks" not in plain.summary["jobs"]["a2a"]


@pytest.mark.parametrize("match, expected_ranks_bytes", [
    ("source", 2 * 7),  # ranks 1 and 5 each send to 7 peers
    ("destination", 2 * 7),  # and each receives from 7
    ("either", 2 * 7 + 2 * 7 - 2),  # the 1<->5 pair counted once each way
])
def test_ranks_rule_puts_exactly_the_chosen_ranks_messages_on_the_high_sl(match, expected_ranks_bytes):
    result = run(a2a(sl_policy={"kind": "ranks", "ranks": [5, 1], "sl": 3, "match": match}))
    per_message = 4096 * 4  # bytes x iterations per (source, destination) pair
    assert by_sl(result) == {3: expected_ranks_bytes * per_message, 0: (56 - expected_ranks_bytes) * per_message}
    assert result.summary["jobs"]["a2a"]["prioritized_ranks"] == [1, 5]


def test_spread_by_destination_and_by_message_share_bytes_equally_and_show_on_the_wire():
    for by in ("destination", "message"):
        result = run(a2a(sl_policy={"kind": "spread", "sls": [0, 1, 2, 3], "by": by}), run={"messages": True})
        # 8 ranks x 7 peers x 4 iterations = 224 messages: 56 per SL (per destination: 2 destinations
        # of each residue x 7 senders; per message: each rank's 28 messages dealt round robin).
        assert by_sl(result) == dict.fromkeys(range(4), 56 * 4096), by
        wire = result.messages.to_pandas()
        counts = wire[wire["job"] == 0].groupby("sl").size().to_dict()
        assert counts == {0: 56, 1: 56, 2: 56, 3: 56}, by


def test_spread_by_connection_gives_each_rank_s_peers_the_sls_in_order_of_first_contact():
    # As MVAPICH2's per-process counter at each on-demand connection set-up. The pairwise
    # alltoall's rank r first sends to r + 1, then r + 2, ...: peer r + k gets SL (k - 1) mod 4.
    result = run(a2a(sl_policy={"kind": "spread", "sls": [0, 1, 2, 3], "by": "connection"}), run={"messages": True})
    wire = result.messages.to_pandas()
    wire = wire[wire["job"] == 0]
    per_pair = wire.groupby(["src_rank", "dst_rank"])["sl"].agg(set)
    assert len(per_pair) == 56 and all(len(sls) == 1 for sls in per_pair)  # a connection keeps its SL
    assert all(per_pair[(a, b)] == {((b - a) % 8 - 1) % 4} for a, b in per_pair.index)


def test_spread_rendezvous_messages_keep_one_sl_for_rts_cts_and_data():
    result = run(a2a(bytes_=65536, iterations=1, sl_policy={"kind": "spread", "sls": [1, 2], "by": "destination"}),
                 run={"messages": True})
    wire = result.messages.to_pandas()
    wire = wire[wire["job"] == 0]
    data = wire[wire["bytes"] == 65536]
    assert len(data) == 56 and set(data["sl"]) == {1, 2}
    # RTS and CTS of a send travel on its SL: control messages on both SLs, never on SL 0.
    control = wire[wire["bytes"] < 65536]
    assert len(control) == 2 * 56 and set(control["sl"]) == {1, 2}


def incast_on(host):
    """Saturating open-loop traffic from 4 free hosts into `host`: its receives queue behind it."""
    return [{"pattern": "incast", "hosts": "8-11", "destinations": [host], "load": "saturate"}]


def test_slowest_ranks_online_picks_the_rank_whose_receives_are_congested():
    jobs = a2a(iterations=3, sl_policy={"kind": "slowest-ranks", "fraction": 0.125, "after_iterations": 1,
                                         "metric": "most-wait", "sl": 1})
    result = run(jobs, traffic=incast_on(3))
    assert result.summary["jobs"]["a2a"]["prioritized_ranks"] == [3]  # rank 3 runs on host 3
    # Chosen after the first iteration: rank 3's sends of the last two iterations go on SL1.
    assert by_sl(result)[1] == 7 * 4096 * 2
    wait = result.ranks.to_pandas().query("run == 0 and iteration == 0").set_index("rank")["mpi_wait_ns"]
    assert wait.idxmax() == 3


def test_latency_history_stays_low_without_congestion_and_moves_under_it():
    rule = {"kind": "latency-history", "sls": [0, 1, 2], "thresholds": [1.5, 3.0], "history_messages": 4}
    quiet = run(a2a(iterations=6, sl_policy={**rule, "direction": "promote"}))
    assert by_sl(quiet) == {0: 8 * 7 * 4096 * 6}  # nothing ever delayed beyond 1.5x its best
    promoted = run(a2a(iterations=6, sl_policy={**rule, "direction": "promote"}), traffic=incast_on(3))
    assert sum(b for sl, b in by_sl(promoted).items() if sl > 0) > 0
    demoted = run(a2a(iterations=6, sl_policy={**rule, "direction": "demote"}), traffic=incast_on(3))
    assert 0 < sum(b for sl, b in by_sl(demoted).items() if sl < 2) < 8 * 7 * 4096 * 6


def test_high_bytes_cap_bounds_the_top_tier():
    # Demote: fresh destinations start on the top tier; a 25% cap holds each rank to a quarter.
    capped = run(a2a(iterations=6, sl_policy={"kind": "latency-history", "sls": [0, 1], "thresholds": [2.0],
                                               "direction": "demote", "high_bytes_cap": 0.25}))
    total = 8 * 7 * 4096 * 6
    top = by_sl(capped).get(1, 0)
    assert top <= 0.25 * total + 8 * 4096  # at most one message per rank beyond the share
    assert top >= 0.25 * total - 8 * 4096


def test_a_prioritised_victim_beats_a_flood_it_shares_the_uplink_with():
    # Victim and flood on the same leaves; everything crosses the single spine (4:1).
    jobs = [
        {"name": "victim", "nodes": 4, "placement": "fragmented", "fragment_nodes": 1,
         "workload": {"kind": "all-to-all", "bytes": 16384, "iterations": 4}},
        {"name": "flood", "nodes": 8, "placement": "fragmented", "fragment_nodes": 2,
         "workload": {"kind": "flood-pairs", "iterations": 50}},
    ]
    qos = {"sl2vl": [0, 1] + [0] * 14, "vlarb_low": [[0, 9], [1, 254], [1, 254], [1, 254]]}
    plain = run(*jobs, topology=TREE, qos=qos)
    jobs[0]["sl_policy"] = {"kind": "ranks", "ranks": [0, 1, 2, 3], "sl": 1}
    prioritised = run(*jobs, topology=TREE, qos=qos)
    t_plain = plain.summary["jobs"]["victim"]["runtime_us"]
    t_high = prioritised.summary["jobs"]["victim"]["runtime_us"]
    assert t_high < 0.8 * t_plain, (t_plain, t_high)


def inline_toml(table):
    return "{ " + ", ".join(f"{k} = {json.dumps(v)}" for k, v in table.items()) + " }"


@pytest.mark.parametrize("rule, key, words", [
    ({"kind": "nope"}, "jobs[0].sl_policy.kind", "expected one of"),
    ({"kind": "ranks", "ranks": [8]}, "jobs[0].sl_policy.ranks", "rank 8 is not in the job"),
    ({"kind": "ranks", "ranks": [1], "sl": 16}, "jobs[0].sl_policy.sl", "less than or equal to 15"),
    ({"kind": "ranks", "ranks": [1], "mtach": "source"}, "jobs[0].sl_policy.mtach", "unknown key"),
    ({"kind": "slowest-ranks", "fraction": 0}, "jobs[0].sl_policy.fraction", "greater than 0"),
    ({"kind": "slowest-ranks", "after_iterations": 9}, "jobs[0].sl_policy.after_iterations", "expected 1..4"),
    ({"kind": "spread", "sls": []}, "jobs[0].sl_policy.sls", "at least 1"),
    ({"kind": "spread", "sls": [0, 1], "by": "qp"}, "jobs[0].sl_policy.by", "expected"),
    ({"kind": "latency-history", "sls": [0, 1], "thresholds": [1.5, 2]}, "jobs[0].sl_policy.thresholds", "expected 1 thresholds"),
    ({"kind": "latency-history", "sls": [0, 1, 2], "thresholds": [3.0, 2.0]}, "jobs[0].sl_policy.thresholds", "strictly increasing"),
    ({"kind": "latency-history", "sls": [0, 1], "thresholds": [2.0], "high_bytes_cap": 1.5}, "jobs[0].sl_policy.high_bytes_cap", "less than or equal to 1"),
    ({"kind": "latency-history", "sls": [0, 1], "thresholds": [2.0], "history_messages": 0}, "jobs[0].sl_policy.history_messages", "greater than or equal to 1"),
])
def test_bad_rules_name_their_key(tmp_path, rule, key, words):
    def check():
        scenario = Scenario(topology=SWITCH, jobs=[a2a(sl_policy=rule)])
        simulate(scenario)  # what only the engine checks is reported the same way

    with pytest.raises(ScenarioError) as caught:
        check()
    assert key in str(caught.value) and words in str(caught.value), str(caught.value)
    path = tmp_path / "s.toml"
    path.write_text('[topology]\nkind = "single-switch"\nhosts = 16\n[[jobs]]\nnodes = 8\n'
                    'workload = { kind = "all-to-all", bytes = 4096, iterations = 4 }\n'
                    f"sl_policy = {inline_toml(rule)}\n")
    result = CliRunner().invoke(app, ["check", str(path)])
    assert result.exit_code == 2 and key in result.output and "Traceback" not in result.output, result.output


def test_policy_sls_without_weight_are_warned_about():
    scenario = Scenario(topology=SWITCH, qos={"vlarb_low": "0:255"},
                        jobs=[a2a(sl_policy={"kind": "spread", "sls": [0, 1], "by": "message"})])
    assert any("SL1 maps to VL1" in w for w in scenario.qos_warnings())


def test_sends_and_their_latency_are_recorded_per_rank_and_iteration():
    result = run(a2a(iterations=2))
    ranks = result.ranks.to_pandas()
    # 7 messages per rank and iteration; an eager send completes on injection, so a message may
    # be delivered in its sender's next iteration, or after its last (then it is not counted).
    per_rank = ranks.groupby("rank")["sends"].sum()
    assert (per_rank <= 14).all() and per_rank.sum() >= 8 * 14 - 8
    # A 4 KiB eager message on an idle single switch: one serialization of 4096 + 26 bytes at
    # 100 Gb/s (cut-through), two link latencies and one switch latency, exactly.
    closed_form = (4096 + 26) * 8 / 100 + 2 * 20 + 100
    assert ranks["send_latency_ns"].div(ranks["sends"]).sub(closed_form).abs().max() < 1e-6


def test_slowest_sends_online_picks_the_rank_whose_sends_cross_the_congested_link():
    # The job has one rank (host 13) on the leaf of hosts 12-15, whose single up-link hosts 14 and
    # 15 flood: that rank's sends are the late ones.
    jobs = a2a(iterations=3, sl_policy={"kind": "slowest-ranks", "fraction": 0.125, "metric": "slowest-sends", "sl": 1})
    tree = {"kind": "xgft", "m": [4, 4], "w": [1, 1]}
    result = run({**jobs, "placement": "hosts", "hosts": [0, 4, 8, 9, 1, 5, 10, 13], "nodes": None},
                 topology=tree, traffic=[{"pattern": "uniform", "hosts": "14-15", "destinations": "0-3", "load": "saturate"}])
    ranks = result.ranks.to_pandas().query("run == 0 and iteration == 0")
    slowest = int((ranks["send_latency_ns"] / ranks["sends"]).idxmax())
    assert result.summary["jobs"]["a2a"]["prioritized_ranks"] == [int(ranks.loc[slowest, "rank"])]
    assert int(ranks.loc[slowest, "host"]) == 13  # the rank sharing its leaf's up-link with the flood
