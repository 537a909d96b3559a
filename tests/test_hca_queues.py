"""The HCA's send queues: one lane (QP) per MPI connection, served round robin packet by packet.

Closed forms on one switch, 4 ranks per host, each rank of host 0 sending one 64 KiB eager
message to its partner on host 1 (flood-pairs): 64 packets of T = 4122 B x 8 / 100 Gb/s leave
host 0 back to back, and a message is delivered 2 x link latency + switch latency after its last
packet has left (cut-through, one rate).
"""

import pytest
import qoslab

T_NS = 4122 * 8 / 100  # one 4 KiB packet (+ 26 B header) at 100 Gb/s
PATH_NS = 20 + 100 + 20  # link, switch, link


def flood_pairs(lanes=None, messages=1):
    fabric = {} if lanes is None else {"hca_send_queues_per_sl": lanes}
    s = qoslab.Scenario(topology={"kind": "single-switch", "hosts": 2}, fabric=fabric, run={"messages": True},
                        mpi={"eager_threshold_bytes": 65536},
                        jobs=[{"name": "f", "nodes": 2, "ranks_per_node": 4, "placement": "hosts", "hosts": [0, 1],
                               "workload": {"kind": "flood-pairs", "bytes": 65536, "messages": messages,
                                            "iterations": 1}}])
    rows = [r for r in qoslab.simulate(s).messages.to_pylist() if r["src"] == 0]
    return rows


def ends_of(packet_counts):
    return [pytest.approx(n * T_NS + PATH_NS, abs=0.02) for n in packet_counts]


def test_each_rank_pair_has_its_own_queue_served_round_robin():
    # Four connections on four lanes: their packets interleave, so the messages end one packet
    # apart at the end of the 64 (packets 61..64), not one after the other (16, 32, 48, 64), as
    # when every rank of a host sending to one other host shared one FIFO (before model .12).
    rows = sorted(flood_pairs(), key=lambda r: r["delivered_ns"])
    assert [r["delivered_ns"] for r in rows] == ends_of([61, 62, 63, 64])
    assert sorted((r["src_rank"], r["dst_rank"]) for r in rows) == [(0, 4), (1, 5), (2, 6), (3, 7)]


def test_one_lane_per_sl_is_one_fifo():
    rows = sorted(flood_pairs(lanes=1), key=lambda r: r["delivered_ns"])
    assert [r["delivered_ns"] for r in rows] == ends_of([16, 32, 48, 64])


def test_connections_beyond_the_lanes_share_them_in_turn():
    # Two lanes: connections take lanes 0, 1, then share 0, 1 as they open, so each lane holds
    # two messages, one after the other, and the lanes alternate packet by packet.
    rows = sorted(flood_pairs(lanes=2), key=lambda r: r["delivered_ns"])
    assert [r["delivered_ns"] for r in rows] == ends_of([31, 32, 63, 64])


def test_a_connection_keeps_its_lane_so_its_messages_stay_in_order():
    # Three messages per pair with eight lanes free: each pair's messages still go one after the
    # other in the pair's one lane (a QP is ordered), so the four lanes end together at packets
    # 189..192 of 192 and each pair's first message ends two thirds of the way in.
    rows = flood_pairs(lanes=8, messages=3)
    by_pair: dict[tuple[int, int], list[float]] = {}
    for r in rows:
        by_pair.setdefault((r["src_rank"], r["dst_rank"]), []).append(r["delivered_ns"])
    assert sorted(by_pair) == [(0, 4), (1, 5), (2, 6), (3, 7)]
    assert sorted(max(e) for e in by_pair.values()) == ends_of([189, 190, 191, 192])
    assert sorted(min(e) for e in by_pair.values()) == ends_of([61, 62, 63, 64])


def test_a_becn_throttles_the_lane_of_the_connection_whose_packet_was_marked():
    # Host 0's two ranks each send to their partner on host 1 (lanes 0 and 1, in the order the
    # connections open, and back to them each time; by destination host both would be lane 1),
    # while six open-loop senders saturate host 1's switch port, so packets of both connections
    # are marked and their BECNs must raise the CCTIs of lanes 0 and 1 of host 0, each
    # connection's own (a connection that took the next free lane each time would spread them).
    scenario = qoslab.Scenario(
        topology={"kind": "single-switch", "hosts": 8}, run={"cc_trace": True},
        traffic=[{"pattern": "hotspot", "hosts": "2-7", "load": "saturate", "hotspot_hosts": [1],
                  "hotspot_fraction": 1.0}],
        jobs=[{"name": "f", "nodes": 2, "ranks_per_node": 2, "placement": "hosts", "hosts": [0, 1],
               "workload": {"kind": "flood-pairs", "bytes": 65536, "messages": 4, "iterations": 2}}],
        congestion_control={"enabled": True, "ca_cong_setting_ccti_timer": 2, "cct": "0:0,0:1,0:2,0:4,0:8,0:16"})
    result = qoslab.simulate(scenario)
    host0 = {row["lane"] for row in result.ccti.to_pylist() if row["host"] == 0}
    assert host0 == {0, 1}


def shared_messages(lanes):
    s = qoslab.Scenario(topology={"kind": "single-switch", "hosts": 2}, fabric={"hca_send_queues_per_sl": lanes},
                        mpi={"eager_threshold_bytes": 65536},
                        jobs=[{"name": "f", "nodes": 2, "ranks_per_node": 4, "placement": "hosts", "hosts": [0, 1],
                               "workload": {"kind": "flood-pairs", "bytes": 65536, "messages": 1, "iterations": 1}}])
    return qoslab.simulate(s).summary


@pytest.mark.parametrize(("lanes", "shared"), [(1, 6), (2, 4), (3, 2), (4, 0), (256, 0)])
def test_messages_that_share_a_send_queue_are_counted(lanes, shared):
    # Each host's 4 ranks open 4 connections at once (one eager message each): with n lanes the
    # first n have one each and the other 4 - n join a lane holding another's message, on both
    # hosts.
    summary = shared_messages(lanes)
    assert summary["jobs"]["f"]["network"]["shared_send_queue_messages"] == shared


def test_at_the_most_queues_the_warning_says_it_is_the_model_s_limit():
    # 260 ranks a host, each sending one message to its partner on the other host at once: 260
    # connections per host, 4 more than the 256 queues the model allows, so 4 messages a host
    # share a queue; raising the setting cannot help.
    s = qoslab.Scenario(topology={"kind": "single-switch", "hosts": 2}, mpi={"eager_threshold_bytes": 65536},
                        jobs=[{"name": "a", "nodes": 2, "ranks_per_node": 260, "placement": "hosts", "hosts": [0, 1],
                               "workload": {"kind": "flood-pairs", "bytes": 65536, "messages": 1, "iterations": 1}}])
    summary = qoslab.simulate(s).summary
    assert summary["scenario"]["fabric"]["hca_send_queues_per_sl"] == 256
    assert summary["jobs"]["a"]["network"]["shared_send_queue_messages"] == 2 * 4
    (warning,) = summary["warnings"]
    assert "256 is the model's most" in warning and "raise it" not in warning
    (below,) = shared_messages(2)["warnings"]
    assert "raise it, up to 256, for a queue pair per connection" in below


def test_a_run_whose_connections_share_send_queues_says_so():
    assert "warnings" not in shared_messages(4)
    (line,) = shared_messages(2)["warnings"]
    assert line.startswith("job 'f': some network messages waited in HCA send queues shared")
    assert "fabric.hca_send_queues_per_sl = 2" in line


def test_send_queues_per_sl_go_up_to_256():
    assert shared_messages(256)["scenario"]["fabric"]["hca_send_queues_per_sl"] == 256
    with pytest.raises(qoslab.ScenarioError, match=r"fabric.hca_send_queues_per_sl: expected less than or equal to 256"):
        qoslab.Scenario(fabric={"hca_send_queues_per_sl": 257})


def test_send_queues_exist_for_the_sls_in_use_whatever_their_numbers():
    # A job spreading its messages over SL 3 and SL 14 beside open-loop traffic on SL 9, with
    # congestion control (whose flows and CNP queues follow the same SLs): every SL a message
    # carries has its queues, and each delivers what it was given.
    s = qoslab.Scenario(
        topology={"kind": "single-switch", "hosts": 4}, fabric={"hca_send_queues_per_sl": 256},
        traffic=[{"pattern": "hotspot", "hosts": "2-3", "load": "saturate", "hotspot_hosts": [1], "sl": 9,
                  "hotspot_fraction": 1.0}],
        jobs=[{"name": "f", "nodes": 2, "ranks_per_node": 4, "placement": "hosts", "hosts": [0, 1],
               "sl_policy": {"kind": "spread", "sls": [3, 14], "by": "message"},
               "workload": {"kind": "flood-pairs", "bytes": 65536, "messages": 2, "iterations": 1}}],
        congestion_control={"enabled": True})
    summary = qoslab.simulate(s).summary
    assert summary["status"] == "completed"
    assert set(summary["jobs"]["f"]["bytes_by_sl"]) == {"3", "14"}
    assert {sl: summary["by_sl"][sl]["packets_delivered"] > 0 for sl in ("3", "9", "14")} == dict.fromkeys(("3", "9", "14"), True)


@pytest.mark.parametrize("policy", [
    {"kind": "job"},
    {"kind": "ranks", "ranks": [0], "sl": 5},
    {"kind": "slowest-ranks", "sl": 6},
    {"kind": "spread", "sls": [3, 14]},
    {"kind": "latency-history", "sls": [4, 7], "thresholds": [2.0]},
])
def test_the_engine_builds_send_queues_for_the_sls_python_says_are_used(policy):
    # Two owners of one rule, pinned together: the SLs Python counts in the memory estimate and
    # its warnings (Scenario.sl_users) are the SLs the engine gives send queues
    # (EngineConfig::sls_in_use), which `qoslab check` shows.
    s = qoslab.Scenario(
        topology={"kind": "single-switch", "hosts": 4},
        traffic=[{"pattern": "uniform", "hosts": "2-3", "load": 0.1, "sl": 9}],
        jobs=[{"name": "f", "nodes": 2, "ranks_per_node": 2, "sl": 2, "placement": "hosts", "hosts": [0, 1],
               "sl_policy": policy, "workload": {"kind": "ping-pong"}}])
    queues = qoslab.describe(s)["hca_send_queues"]
    assert queues == {"sls": sorted(s.sl_users()), "per_sl": 256}
    assert 2 in queues["sls"] and 9 in queues["sls"]


def test_send_queues_default_to_a_queue_pair_per_connection_with_jobs_and_8_without():
    with_jobs = qoslab.Scenario(topology={"kind": "single-switch", "hosts": 2},
                                jobs=[{"name": "f", "nodes": 2, "workload": {"kind": "ping-pong"}}])
    open_loop = qoslab.Scenario(topology={"kind": "single-switch", "hosts": 2},
                                traffic=[{"pattern": "uniform", "load": 0.1}])
    assert with_jobs.fabric.hca_send_queues_per_sl == 256
    assert open_loop.fabric.hca_send_queues_per_sl == 8
    # A value the scenario gives is kept either way, and a default is not marked as given.
    given = qoslab.Scenario(topology={"kind": "single-switch", "hosts": 2}, fabric={"hca_send_queues_per_sl": 8},
                            jobs=[{"name": "f", "nodes": 2, "workload": {"kind": "ping-pong"}}])
    assert given.fabric.hca_send_queues_per_sl == 8
    assert "hca_send_queues_per_sl" not in with_jobs.fabric.model_fields_set


@pytest.mark.parametrize("cc", [False, True])
def test_the_memory_estimate_counts_the_send_queues_of_the_sls_in_use(cc):
    # 324 hosts, a job on SL 1 with a policy adding SL 4: two SLs in use, 32 bytes a queue (64
    # with congestion control's flow beside each).
    def need(lanes):
        return qoslab.Scenario(
            topology={"kind": "xgft", "m": [18, 18], "w": [1, 18]}, fabric={"hca_send_queues_per_sl": lanes},
            congestion_control={"enabled": cc},
            jobs=[{"name": "f", "nodes": 70, "ranks_per_node": 2, "sl": 1, "workload": {"kind": "ping-pong"},
                   "sl_policy": {"kind": "ranks", "ranks": [0], "sl": 4}}]).estimated_memory_bytes()

    assert need(256) - need(8) == 324 * 2 * 248 * (64 if cc else 32)


def test_shared_send_queues_are_warned_by_run_and_said_once_by_a_study(tmp_path):
    import json

    from qoslab.cli import app
    from qoslab.study.model import Study
    from qoslab.sweep.executors import LocalExecutor
    from typer.testing import CliRunner

    scenario = tmp_path / "s.toml"
    scenario.write_text('[topology]\nkind = "single-switch"\nhosts = 2\n[fabric]\nhca_send_queues_per_sl = 2\n'
                        '[mpi]\neager_threshold_bytes = 65536\n'
                        '[[jobs]]\nname = "f"\nnodes = 2\nranks_per_node = 4\nplacement = "hosts"\nhosts = [0, 1]\n'
                        'workload = { kind = "flood-pairs", bytes = 65536, messages = 1, iterations = 1 }\n')
    result = CliRunner().invoke(app, ["run", str(scenario), "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    (warning,) = json.loads((tmp_path / "out" / "summary.json").read_text())["warnings"]
    assert f"warning: {warning}" in " ".join(result.stderr.split())
    # The warning names no count, so two runs of a study give one note, not one per run.
    study = Study.from_dict({"scenario": "s.toml", "policies": [{"kind": "default"}], "repetitions": 2},
                            str(tmp_path / "study.toml"))
    assert study.run(tmp_path / "study", executor=LocalExecutor(1)).notes == [f"runs: {warning}"]
