"""The golden net (docs/design/golden.md): every scenario under tests/golden, simulated from its
TOML, must give exactly its stored engine config, summary and tables. A difference is either a
deliberate model change (regenerate with `python tests/golden/regenerate.py NAME` and say so in
the commit) or a bug."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "golden"))
import harness  # beside the stored outputs, shared with regenerate.py

NAMES = harness.names()


@pytest.mark.parametrize("name", NAMES)
def test_golden_scenario_reproduces_its_stored_outputs(name):
    found = harness.differences(harness.stored(name), harness.produce(name))
    assert not found, (f"golden scenario {name} differs from tests/golden/{name} "
                       f"({len(found)} differences):\n  " + "\n  ".join(found[:40]))


def test_a_one_weight_change_is_reported_field_by_field():
    """The net can fail: one VLArb weight changed (VL2: 2 packets a turn instead of 4) moves
    summary figures and link rows, and each is named."""
    found = harness.differences(harness.stored("xgft-dmodk"), harness.produce("xgft-dmodk", ["qos.vlarb_low=0:255,1:255,2:128,3:255"]))
    assert any(f.startswith("engine.json: qos.swe.vlarb_low[2][1]: 255 -> 128") for f in found), found
    assert any(f.startswith("summary.json: by_sl.2.latency_ns.") for f in found), found
    assert any(f.startswith("links.csv: column busy_ns: ") for f in found), found


def test_the_golden_net_covers_what_it_promises():
    """The features docs/design/golden.md lists, each in at least one stored scenario, so removing
    or weakening a scenario cannot silently drop one."""
    configs = {n: json.loads((harness.GOLDEN / n / "engine.json").read_text()) for n in NAMES}
    summaries = {n: json.loads((harness.GOLDEN / n / "summary.json").read_text()) for n in NAMES}

    def some(predicate) -> bool:
        return any(predicate(configs[n], summaries[n], harness.GOLDEN / n) for n in NAMES)

    kinds = {c["topology"]["kind"] for c in configs.values()}
    assert {"xgft", "single-switch", "dragonfly-plus", "graph"} <= kinds
    fat_tree = {c["routing"]["algorithm"] for c in configs.values() if c["topology"]["kind"] == "xgft"}
    assert {"dmodk", "smodk", "random", "adaptive"} <= fat_tree
    assert some(lambda c, s, _: c["topology"]["kind"] == "xgft"
                and any(w < m for w, m in zip(c["topology"]["w"][1:], c["topology"]["m"])))
    dragonfly = {c["routing"]["algorithm"] for c in configs.values() if c["topology"]["kind"] == "dragonfly-plus"}
    assert {"minimal", "valiant", "adaptive"} <= dragonfly
    assert some(lambda c, s, _: c["routing"].get("flowlet_gap_us", 0) > 0)
    assert some(lambda c, s, _: s["nonminimal_packets"] > 0)
    workloads = {j["workload"]["kind"] for c in configs.values() for j in c["jobs"]}
    assert {"collective-loop", "all-to-all", "nearest-neighbor", "random-pairs", "ping-pong", "flood-pairs",
            "gpcnet-rr-latency", "gpcnet-put-incast", "gpcnet-get-bcast", "milc", "trace"} <= workloads
    policies = {j["sl_policy"]["kind"] for c in configs.values() for j in c["jobs"]}
    assert {"job", "ranks", "slowest-ranks", "spread", "latency-history"} <= policies
    assert some(lambda c, s, d: (d / "engine_traces.json").exists())
    assert some(lambda c, s, _: c["qos"]["swe"]["vlarb_high"] and c["qos"]["swe"]["high_limit"] not in (0, 255))
    assert some(lambda c, s, _: c["qos"]["sl2vl_pairs"])
    assert some(lambda c, s, _: len(set(c["topology"].get("cable_gbps", []))) > 2)
    assert {"minhop", "lft"} <= {c["routing"]["algorithm"] for c in configs.values() if c["topology"]["kind"] == "graph"}
    assert some(lambda c, s, _: s["messages_refused"] > 0)
    assert some(lambda c, s, _: s["status"] == "deadlock" and "routing deadlock" in s["error"])
    vls = {c["fabric"]["data_vls"] for c, s in zip(configs.values(), summaries.values())
           if "port_buffer_bytes" in s["scenario"]["fabric"]}
    assert {1, 8} <= vls
    assert some(lambda c, s, d: (d / "interference.csv").exists() and s["interference"])
    assert some(lambda c, s, d: (d / "port_counters.csv").exists())
    assert some(lambda c, s, d: (d / "messages.csv").exists())
