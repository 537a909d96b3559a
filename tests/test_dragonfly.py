"""Dragonfly+ from the scenario file: the preset, minimal paths against the topology's formulas,
placements by group, `qoslab check`, the VLs routing takes from QoS in the exported OpenSM
configuration, and a routing deadlock (minhop on a ring) reported as a cycle."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
from qoslab import simulate
from qoslab.cli import app
from qoslab.errors import ScenarioError
from qoslab.scenario import Scenario
from qoslab.simulate import cabling
from typer.testing import CliRunner

SMALL = {"kind": "dragonfly-plus", "groups": 5, "leaves_per_group": 3, "spines_per_group": 2, "hosts_per_leaf": 2,
         "global_links_per_pair": 1}


def test_marconi100_preset_has_the_documented_shape():
    s = Scenario(topology={"kind": "dragonfly-plus", "preset": "marconi100"})
    t = s.topology
    assert (t.groups, t.leaves_per_group, t.spines_per_group, t.hosts_per_leaf) == (3, 18, 18, 18)
    assert s.host_count() == 972 and t.global_links_per_pair == 162
    described = cabling(s)
    assert described["hosts"] == 972 and described["switches"] == 108
    assert s.routing.algorithm == "minimal" and s.routing.vls == 1


def test_a_per_pair_global_link_count_replaces_the_preset_s_per_spine_one():
    # Refused before: the preset filled global_links_per_spine = 18, which gives 18 x 18 / 2 = 162
    # links per pair, "not 9". The tapered Marconi: 9 per pair x 2 other groups = 18 per group
    # over 18 spines = 1 global link per spine.
    s = Scenario(topology={"kind": "dragonfly-plus", "preset": "marconi100", "global_links_per_pair": 9})
    t = s.topology
    assert (t.global_links_per_spine, t.global_links_per_pair) == (1, 9)
    described = cabling(s)
    assert described["hosts"] == 972 and described["switches"] == 108
    spine = Scenario(topology={"kind": "dragonfly-plus", "preset": "marconi100", "global_links_per_spine": 2}).topology
    assert (spine.global_links_per_spine, spine.global_links_per_pair) == (2, 18)
    with pytest.raises(ScenarioError, match="global_links_per_pair"):  # both given: still checked against each other
        Scenario(topology={"kind": "dragonfly-plus", "preset": "marconi100", "global_links_per_spine": 2,
                           "global_links_per_pair": 9})


def test_minimal_forwarding_tables_give_the_formula_hop_counts():
    s = Scenario(topology=SMALL)
    tables = cabling(s, with_routes=True)
    base, peer, hosts = tables["port_base"], tables["port_peer"], tables["hosts"]
    node_of = {p: n for n in range(len(base) - 1) for p in range(base[n], base[n + 1])}
    per_group, per_leaf = 6, 2
    for src in range(hosts):
        for dst in range(hosts):
            if src == dst:
                continue
            node, hops = node_of[peer[base[src]]], 0
            while node >= hosts:
                port = base[node] + tables["routes"][node - hosts][dst]
                node = node_of[peer[port]]
                hops += 1
            assert node == dst
            expected = 1 if src // per_leaf == dst // per_leaf else 3 if src // per_group == dst // per_group else 4
            assert hops == expected, (src, dst, hops)


def test_placements_by_group_and_check_lists_groups_and_leaves(tmp_path):
    jobs = [
        {"name": "one", "nodes": 4, "placement": "same-group", "workload": {"kind": "ping-pong", "bytes": 8, "iterations": 1}},
        {"name": "all", "nodes": 5, "placement": "spread-groups", "workload": {"kind": "ping-pong", "bytes": 8, "iterations": 1}},
        {"name": "fit", "nodes": 4, "placement": "scheduler", "workload": {"kind": "ping-pong", "bytes": 8, "iterations": 1}},
    ]
    s = Scenario(topology=SMALL, jobs=jobs)
    groups = s.host_groups()
    one, spread, fit = s.placements()
    assert len({groups[h] for h in one}) == 1
    assert sorted(groups[h] for h in spread) == [0, 1, 2, 3, 4]
    # Groups of 6: "all" took one host of each, "one" 4 more of its group (1 left). Best fit for 4:
    # the fullest group that still holds them, a 5-free one, the lowest such; its lowest free hosts.
    first = min(g for g in range(5) if g != groups[one[0]])
    assert fit == [h for h in range(first * 6, first * 6 + 6) if h not in spread][:4]
    path = tmp_path / "df.toml"
    path.write_text("[topology]\nkind = \"dragonfly-plus\"\ngroups = 5\nleaves_per_group = 3\nspines_per_group = 2\n"
                    "hosts_per_leaf = 2\nglobal_links_per_pair = 1\n\n[[jobs]]\nnodes = 5\nplacement = \"spread-groups\"\n"
                    "workload = { kind = \"ping-pong\", bytes = 8, iterations = 1 }\n")
    result = CliRunner().invoke(app, ["check", str(path)])
    assert result.exit_code == 0, result.output
    assert "groups" in result.output and "0-4" in result.output and "global_links_per_pair" in result.output


def test_exported_opensm_tables_carry_the_routing_layers(tmp_path):
    path = tmp_path / "df.toml"
    path.write_text('[topology]\nkind = "dragonfly-plus"\npreset = "marconi100"\n\n[routing]\nalgorithm = "adaptive"\n\n'
                    '[qos]\nsl2vl = "0,1,0,1,0,1,0,1,0,1,0,1,0,1,0,1"\nvlarb_low = "0:200,1:50"\n')
    result = CliRunner().invoke(app, ["export", "opensm", str(path), "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    conf = (tmp_path / "out" / "opensm.conf").read_text()
    # data_vls 4 = 2 routing layers x 2 QoS VLs: VL k+2 is VL k's copy with the same weight.
    assert "qos_swe_vlarb_low 0:200,2:200,1:50,3:50" in conf, conf
    assert "Routing uses 2 VL layers" in conf and "VL v + 2 repeats VL v's weight" in conf
    assert "VL escalation" in (tmp_path / "out" / "README.md").read_text()


def test_import_folds_the_routing_layer_copies_back_into_the_scenarios_tables(tmp_path):
    path = tmp_path / "df.toml"
    path.write_text('[topology]\nkind = "dragonfly-plus"\npreset = "marconi100"\n\n[routing]\nalgorithm = "adaptive"\n\n'
                    '[qos]\nsl2vl = "0,1,0,1,0,1,0,1,0,1,0,1,0,1,0,1"\nvlarb_low = "0:200,1:50"\nvlarb_high = "1:10"\n'
                    'high_limit = 3\n')
    runner = CliRunner()
    assert runner.invoke(app, ["export", "opensm", str(path), "--out", str(tmp_path / "out")]).exit_code == 0
    conf = str(tmp_path / "out" / "opensm.conf")
    unfolded = runner.invoke(app, ["import", "opensm", conf])
    assert unfolded.exit_code == 0 and "pass --routing-vls 2" in unfolded.output
    folded = runner.invoke(app, ["import", "opensm", conf, "--routing-vls", "2"])
    assert folded.exit_code == 0, folded.output
    imported = tomllib.loads(folded.stdout)
    assert imported["routing"] == {"vls": 2} and imported["fabric"] == {"data_vls": 4}
    original = Scenario.from_toml(path)
    again = Scenario(topology={"kind": "dragonfly-plus", "preset": "marconi100"},
                       routing={"algorithm": "adaptive", **imported["routing"]},
                       fabric=imported["fabric"], qos=imported["qos"])
    for port in ("ca", "swe"):
        assert again.port_qos(port) == original.port_qos(port)
        assert again.engine_port_qos(port) == original.engine_port_qos(port)

    # Tables that are not layer copies are refused, naming the key.
    (tmp_path / "hand.conf").write_text("qos TRUE\nmax_op_vls 3\nqos_vlarb_high 0:0\nqos_swe_vlarb_low 0:200,2:100\nqos_swe_sl2vl 0,1,0,1,0,1,0,1,0,1,0,1,0,1,0,1\n"
                                        "qos_ca_sl2vl 0,1,0,1,0,1,0,1,0,1,0,1,0,1,0,1\nqos_ca_vlarb_low 0:1,2:1\n")
    refused = runner.invoke(app, ["import", "opensm", str(tmp_path / "hand.conf"), "--routing-vls", "2"])
    assert refused.exit_code != 0
    assert "qos_swe_vlarb_low: entries 0:200,2:100 are not one entry's 2 routing-layer copies (expected 0:200,2:200)" in refused.output


def test_flowlets_keep_a_flow_on_its_path_while_its_packets_keep_coming():
    # One global link per group pair, so no spine reaches every group and the source leaf decides.
    # Two saturating flows from group 0 (hosts 0, 1) to group 1 (hosts 6, 7) share that one link:
    # per-packet UGAL diverts part of each flow.
    def flows(gap_us):
        scenario = Scenario(topology=SMALL, routing={"algorithm": "adaptive", "flowlet_gap_us": gap_us},
                            traffic=[{"pattern": "incast", "hosts": [0], "destinations": [6], "load": "saturate"},
                                     {"pattern": "incast", "hosts": [1], "destinations": [7], "load": "saturate"}],
                            run={"duration_us": 200, "warmup_us": 20})
        summary = simulate(scenario).summary
        return [(t["nonminimal_packets"], t["packets_delivered"]) for t in summary["by_traffic"]]

    for nonminimal, delivered in flows(0):  # per packet: some of each flow go round
        assert 0 < nonminimal < delivered
    # Packets ~330 ns apart never fall within a 1 ns gap: every one starts a flowlet and decides.
    assert any(0 < nonminimal < delivered for nonminimal, delivered in flows(0.001))
    # A gap longer than the run: each flow keeps its first decision, whole (minimal or not).
    for nonminimal, delivered in flows(1000.0):
        assert delivered > 0 and nonminimal in (0, delivered)


def test_flowlets_need_adaptive_routing_on_a_dragonfly():
    for routing, topology in (({"algorithm": "minimal", "flowlet_gap_us": 5}, SMALL),
                              ({"algorithm": "adaptive", "flowlet_gap_us": 5}, {"kind": "xgft", "m": [4, 4], "w": [1, 4]})):
        with pytest.raises(ScenarioError, match="routing.flowlet_gap_us: flowlets apply to adaptive routing on a Dragonfly"):
            Scenario(topology=topology, routing=routing)
    with pytest.raises(ScenarioError, match="routing.flowlet_gap_us: expected greater than or equal to 0"):
        Scenario(topology=SMALL, routing={"algorithm": "adaptive", "flowlet_gap_us": -1})


RING = 5  # switches; minhop's unique 2-hop paths run both ways round: a channel cycle each way


def ring_net() -> str:
    lines = []
    for s in range(RING):
        lines += [f'Switch\t4 "S-ring{s}"\t# "ring{s}"', f'[1]\t"H-h{2 * s}"[1]', f'[2]\t"H-h{2 * s + 1}"[1]',
                  f'[3]\t"S-ring{(s + 1) % RING}"[4]', f'[4]\t"S-ring{(s - 1) % RING}"[3]', ""]
    for h in range(2 * RING):
        lines += [f'Hca\t1 "H-h{h}"\t# "h{h} HCA-1"', f'[1]\t"S-ring{h // 2}"[{h % 2 + 1}]', ""]
    return "\n".join(lines)


def test_minhop_round_a_ring_deadlocks_and_the_run_names_the_cycle(tmp_path):
    (tmp_path / "ring.net").write_text(ring_net())
    scenario = tmp_path / "ring.toml"
    scenario.write_text('[topology]\nkind = "ibnetdiscover"\npath = "ring.net"\n\n[fabric]\ndata_vls = 1\n'
                        'vl_buffer_bytes = 4160\n\n[[traffic]]\nload = "saturate"\n\n[run]\nduration_us = 300\n')
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["run", str(scenario), "--out", str(out)])
    assert result.exit_code == 1
    assert "routing deadlock" in result.stderr and "a cycle of 5 full input buffers" in result.stderr
    assert "port 4 VL0 ->" in result.stderr or "port 3 VL0 ->" in result.stderr
    summary = json.loads(Path(out / "summary.json").read_text())
    # The partial results are kept; the cycle's full buffers still hold their packets.
    assert summary["status"] == "deadlock" and summary["conservation"]["packets_in_flight"] > 0
