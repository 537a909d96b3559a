"""Interference attribution (`run.interference`): each wait at an output port charged to the
class holding what it waits for, checked against closed forms."""

from __future__ import annotations

import math

import pyarrow.compute as pc
import pytest
import qoslab
from qoslab.simulate import simulate

SER_NS = (4096 + 26) * 8 / 100.0  # one full packet on a 100 Gb/s link


def two_flows(**run) -> qoslab.Scenario:
    return qoslab.Scenario(
        topology={"kind": "single-switch", "hosts": 4},
        traffic=[{"pattern": "incast", "hosts": [0], "destinations": [3], "load": "saturate"},
                 {"pattern": "incast", "hosts": [1], "destinations": [3], "load": "saturate"}],
        run={"duration_us": 200, "warmup_us": 20, **run},
    )


def test_two_saturating_flows_each_wait_half_the_window_for_the_other():
    result = simulate(two_flows(interference=True))
    wait = result.summary["interference"]["wait_ns"]
    window_ns = 180_000
    # The shared output alternates one packet of each: whenever one flow's packet is on the wire,
    # the other's head waits for it, so each waits for the other half the window.
    for victim, culprit in (("traffic[0]", "traffic[1]"), ("traffic[1]", "traffic[0]")):
        assert wait[victim][culprit] == pytest.approx(window_ns / 2, abs=2 * SER_NS)
        assert wait[victim][victim] < SER_NS
    # Each flow has its own input buffer: what waits behind a packet there is its own flow's.
    buffered = result.summary["interference"]["buffer_wait_ns"]
    assert buffered["traffic[0]"]["traffic[1]"] == buffered["traffic[1]"]["traffic[0]"] == 0
    table = result.interference.to_pandas()
    assert set(table["dst"][table["victim"] != table["culprit"]]) == {"H3"}  # all at the shared output
    # The table splits the same totals by link and VL.
    for kind, key in (("output", "wait_ns"), ("buffer", "buffer_wait_ns")):
        for victim in ("traffic[0]", "traffic[1]"):
            rows = table[(table["victim"] == victim) & (table["kind"] == kind)]
            assert rows["wait_ns"].sum() == pytest.approx(sum(result.summary["interference"][key][victim].values()))


def test_attribution_changes_nothing_but_its_own_outputs():
    off, on = simulate(two_flows()), simulate(two_flows(interference=True))
    assert off.interference is None and "interference" not in off.summary
    for key in ("events", "packet_hops", "by_traffic", "latency_ns", "conservation"):
        assert on.summary[key] == off.summary[key]
    assert on.links.equals(off.links)


def test_a_victim_whose_only_contention_is_a_flood_is_charged_to_the_flood():
    # One spine: every leaf-to-leaf message crosses its leaf's single up-link. The victim is a
    # ping-pong (one message in flight, so it never waits for itself); the flood shares its leaf.
    scenario = qoslab.Scenario(
        topology={"kind": "xgft", "m": [4, 2], "w": [1, 1]},
        jobs=[{"name": "victim", "placement": "hosts", "hosts": [0, 4],
               "workload": {"kind": "ping-pong", "bytes": 65536, "iterations": 50}},
              {"name": "flood", "placement": "hosts", "hosts": [1, 5, 2, 6, 3, 7],
               "workload": {"kind": "flood-pairs", "iterations": 20}}],
        run={"interference": True},
    )
    wait = simulate(scenario).summary["interference"]["wait_ns"]["victim"]
    total = sum(wait.values())
    assert total > 0
    assert wait["flood"] / total >= 0.9, wait


def test_credit_stalled_waits_are_charged_to_the_buffer_holder():
    # An incast of three into host 3 fills host 0's switch input (one buffer, two packets deep):
    # host 0's packets to host 2, an idle output, wait at host 0's port while host 0's incast
    # packets are on the wire, and while the port sits idle for credits that the incast's packets
    # at the head of that buffer hold.
    scenario = qoslab.Scenario(
        topology={"kind": "single-switch", "hosts": 4},
        fabric={"vl_buffer_bytes": 8448},
        traffic=[{"pattern": "incast", "hosts": [0, 1, 2], "destinations": [3], "load": "saturate"},
                 {"pattern": "incast", "hosts": [0], "destinations": [2], "load": "saturate"}],
        run={"duration_us": 200, "warmup_us": 20, "interference": True},
    )
    result = simulate(scenario)
    table = result.interference.to_pandas()
    at_hca = table[(table["src"] == "H0") & (table["victim"] == "traffic[1]") & (table["kind"] == "output")]
    by_incast = at_hca[at_hca["culprit"] == "traffic[0]"]["wait_ns"].sum()
    assert by_incast / at_hca["wait_ns"].sum() > 0.9
    # traffic[1] always has a head waiting at host 0's port except while its own packets are on
    # the wire, and all of that wait is the incast's: on the wire (half the port's busy time here)
    # or holding the buffer while the port sits idle for credits. Closed form: the window less
    # traffic[1]'s own transmissions, within a packet time.
    own = result.summary["by_traffic"][1]["packets_delivered"] * SER_NS
    assert by_incast == pytest.approx(180_000 - own, abs=2 * SER_NS)
    links = result.links.to_pandas()
    assert links[links["src"] == "H0"]["busy_ns"].sum() < 0.6 * 180_000  # so most of it was idle-for-credits time
    # And head-of-line blocking: traffic[1]'s packets queued behind the incast's in that buffer.
    behind = table[(table["kind"] == "buffer") & (table["victim"] == "traffic[1]") & (table["culprit"] == "traffic[0]")]
    assert behind["wait_ns"].sum() > 0 and set(behind["dst"]) == {"H3"}


def test_interference_parquet_is_written(tmp_path):
    result = simulate(two_flows(interference=True))
    result.save(tmp_path)
    assert "interference.parquet" in result.written()
    assert math.isclose(pc.sum(result.interference.column("wait_ns")).as_py(),
                        sum(sum(row.values()) for matrix in result.summary["interference"].values()
                            for row in matrix.values()))


def test_attribution_refuses_a_run_longer_than_it_can_time(tmp_path):
    """Attribution keeps a transmission's end in 48 bits of picoseconds beside its class, so a run
    with it is limited to 2^47 ps (140 s); longer is refused by name, not wrapped."""
    path = tmp_path / "long.toml"
    path.write_text('[topology]\nkind = "single-switch"\nhosts = 2\n\n[[traffic]]\npattern = "uniform"\nload = 0.1\n\n'
                    '[run]\nduration_us = 150000000\ninterference = true\n')
    with pytest.raises(qoslab.errors.ScenarioError) as refused:
        qoslab.Scenario.from_toml(path)
    assert "run.duration_us" in str(refused.value) and "140737488" in str(refused.value)
    path.write_text(path.read_text().replace("interference = true", "interference = false"))
    qoslab.Scenario.from_toml(path)  # the same run without attribution is fine
