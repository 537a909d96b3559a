"""fabric.vlarb_capacity: ports hold only the first entries of each VLArb table (8 on ibsim's ports
and many switches), so a table longer than that shares the link as its first entries do. The
scenario, the simulation, `qoslab check` and the export all use the entries the ports hold."""

from __future__ import annotations

import pytest
import qoslab
from qoslab.deploy import export_opensm
from qoslab.errors import ScenarioError
from qoslab.io.opensm import parse_opensm_conf
from qoslab.vlarb import Granularity, effective_shares

# The seeds' 2286:254:9:1 as OpenSM entries: 12 of them, the last eight VL0's.
TWELVE = "0:254,1:254,2:9,3:1" + ",0:254" * 8
FIRST_EIGHT = "0:254,1:254,2:9,3:1" + ",0:254" * 4
TRAFFIC = [{"hosts": [0, 1, 2, 3], "destinations": [4], "pattern": "incast", "load": "saturate", "sl": sl}
           for sl in range(4)]


def scenario(vlarb_low: str, capacity: int | None = None, **keys) -> qoslab.Scenario:
    fabric = {"vlarb_capacity": capacity} if capacity is not None else {}
    return qoslab.Scenario(topology={"kind": "single-switch", "hosts": 5}, fabric=fabric,
                           qos={"vlarb_low": vlarb_low, "sl2vl": [0, 1, 2, 3] * 4},
                           run={"duration_us": 60, "warmup_us": 10}, **keys)


def without_scenario(summary: dict) -> dict:
    return {k: v for k, v in summary.items() if k not in ("scenario", "wall_seconds")}


def test_a_table_longer_than_the_ports_hold_runs_as_its_first_entries():
    capped = qoslab.simulate(scenario(TWELVE, 8, traffic=TRAFFIC)).summary
    eight = qoslab.simulate(scenario(FIRST_EIGHT, traffic=TRAFFIC)).summary
    whole = qoslab.simulate(scenario(TWELVE, traffic=TRAFFIC)).summary
    assert without_scenario(capped) == without_scenario(eight)
    # And not as the whole table: the closed form gives VL0 36 of 42 packets a round with all
    # twelve entries, 20 of 26 with the first eight (an entry sends whole packets: 254 -> 4, 9 -> 1).
    share = {name: s["by_sl"]["0"]["accepted_load"] / s["accepted_load"] for name, s in
             (("capped", capped), ("whole", whole))}
    assert share["whole"] == pytest.approx(36 / 42, abs=0.02) and share["capped"] == pytest.approx(20 / 26, abs=0.02)


def test_check_and_warnings_show_what_the_ports_hold():
    s = scenario(TWELVE, 8)
    assert len(s.port_qos("swe")["vlarb_low"]) == 8
    assert any("qos.vlarb_low: 12 entries, but ports hold 8" in w and "0:254, 0:254, 0:254, 0:254) are dropped" in w
               for w in s.qos_warnings())
    shares = s.vl_arbitration()
    whole = scenario(TWELVE).vl_arbitration()
    assert shares != whole


def test_the_export_writes_what_the_ports_hold_and_warns_when_the_capacity_is_unset(tmp_path):
    bundle = export_opensm(scenario(TWELVE, 8), tmp_path / "capped")
    read = parse_opensm_conf((tmp_path / "capped" / "opensm.conf").read_text())
    assert len(read.tables["swe"]["vlarb_low"]) == 8 and not any("VLArb entries" in w for w in bundle.warnings)
    bundle = export_opensm(scenario(TWELVE), tmp_path / "whole")
    assert any("set fabric.vlarb_capacity = 8" in w for w in bundle.warnings)


def test_unset_it_leaves_the_resolved_scenario_as_before_and_too_small_is_refused():
    # Run ids hash the resolved scenario: the default must not appear in it.
    assert "vlarb_capacity" not in scenario(TWELVE).resolved()["fabric"]
    assert scenario(TWELVE, 8).resolved()["fabric"]["vlarb_capacity"] == 8
    again = qoslab.Scenario.from_dict(scenario(TWELVE, 8).resolved())
    assert again.port_qos("ca") == scenario(TWELVE, 8).port_qos("ca")
    with pytest.raises(ScenarioError, match="fabric.vlarb_capacity: 1 entries cannot hold one entry per routing layer"):
        qoslab.Scenario(topology={"kind": "dragonfly-plus", "groups": 3, "leaves_per_group": 2, "spines_per_group": 2,
                                  "hosts_per_leaf": 2, "global_links_per_spine": 1},
                        routing={"algorithm": "adaptive", "vls": 2}, fabric={"vlarb_capacity": 1, "data_vls": 4})


def test_a_study_says_which_policies_the_ports_cannot_hold_whole():
    from qoslab.study.model import Study

    base = {"topology": {"kind": "single-switch", "hosts": 4}, "fabric": {"vlarb_capacity": 8},
            "jobs": [{"name": "a", "nodes": 2, "workload": {"kind": "ping-pong"}},
                     {"name": "b", "nodes": 2, "workload": {"kind": "ping-pong"}}]}
    study = Study.from_dict({"scenario": base, "policies": [{"kind": "per-job", "assignment": "all"}]}, "study.toml")
    assert any("its vlarb_low table has 12 entries, the ports hold 8" in w for w in study.warnings()), study.warnings()
    # Its description gives the shares of the 8 entries simulated (20:4:1:1 packets a round),
    # not of the 12 written (36:4:1:1).
    policy = study.concrete_policies()[-1]
    assert "VL0 76.9%, VL1 15.4%, VL2 3.85%, VL3 3.85%, by the first 8 of its 12 entries" in policy.description(
        Granularity.of(study.base()))


def test_shares_are_realised_within_the_entries_the_ports_hold():
    from qoslab.study.model import Study

    base = {"topology": {"kind": "single-switch", "hosts": 4}, "fabric": {"vlarb_capacity": 8, "mtu_bytes": 256},
            "jobs": [{"name": "a", "nodes": 2, "workload": {"kind": "ping-pong"}},
                     {"name": "b", "nodes": 2, "workload": {"kind": "ping-pong"}}]}
    # 0.6:0.3:0.1 fits in 8 entries exactly (30:15:5 packets of 5 credits): no warning, and what
    # the ports hold is the whole table.
    fits = Study.from_dict({"scenario": base, "policies": [{"kind": "per-job", "assignment": {"a": 1, "b": 2},
                                                            "shares": [0.6, 0.3, 0.1]}]}, "study.toml")
    assert not any("vlarb_capacity" in w for w in fits.warnings())
    held = Granularity.of(fits.base())
    entries = fits.concrete_policies()[-1].arbitration().entries(held)[1]
    assert len(entries) <= 8 and effective_shares(entries, held.credits) == pytest.approx({0: 0.6, 1: 0.3, 2: 0.1})
    # 0.9:0.09:0.009:0.001 needs more than 8 entries of at most 51 packets: refused, saying the
    # capacity is why. It had been realised in 22 entries, described as exact, and cut to 8.
    with pytest.raises(ScenarioError, match=r"cannot be realised at MTU 256 .* 8 entries as fabric.vlarb_capacity holds"):
        Study.from_dict({"scenario": base, "policies": [{"kind": "per-job", "assignment": {"a": 1, "b": 2},
                                                         "shares": [0.9, 0.09, 0.009, 0.001]}]}, "study.toml")


def test_an_imported_table_keeps_its_weight_0_entries_which_ports_count():
    # OpenSM's default low table starts 0:0; on 8-entry ports its first 8 entries reach VL7 only.
    # Dropped on import, VL8 had come into the eight.
    from qoslab.io.opensm import parse_opensm_conf

    low = ",".join(["0:0"] + [f"{vl}:4" for vl in range(1, 15)])
    read = parse_opensm_conf(f"qos TRUE\nqos_max_vls 15\nqos_vlarb_low {low}\nqos_sl2vl 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,7\n",
                             "site.conf")
    table = read.scenario_qos()["swe"]["vlarb_low"]
    assert table[0] == [0, 0] and len(table) == 15
    s = qoslab.Scenario(topology={"kind": "single-switch", "hosts": 4}, fabric={"data_vls": 15, "vlarb_capacity": 8},
                        qos={"swe": {**read.scenario_qos()["swe"]}, "ca": {**read.scenario_qos()["ca"]}},
                        traffic=[{"load": 0.1, "sl": 8}])
    assert [vl for vl, _ in s.port_qos("swe")["vlarb_low"]] == list(range(8))
    assert any("SL8 maps to VL8, which has no weight" in w for w in s.warnings())
