"""Scenario validation, defaults, overrides and the engine config (no engine needed)."""

import copy
import json
import math

import pytest
from qoslab.errors import ScenarioError
from qoslab.scenario import Scenario

ENGINE_KEYS = {"seed", "fabric", "topology", "routing", "qos", "traffic", "run", "jobs", "mpi"}
FABRIC_KEYS = {
    "link_gbps",
    "link_latency_ns",
    "switch_latency_ns",
    "mtu_bytes",
    "header_bytes",
    "data_vls",
    "vl_buffer_bytes",
    "hca_send_queues_per_sl",
}
PORT_QOS_KEYS = {"sl2vl", "vlarb_high", "vlarb_low", "high_limit"}
TRAFFIC_KEYS = {
    "pattern",
    "hosts",
    "destinations",
    "load",
    "message_bytes",
    "sl",
    "arrival",
    "shift",
    "hotspot_hosts",
    "hotspot_fraction",
    "saturate_depth",
    "max_queued_messages",
}
RUN_KEYS = {"duration_us", "warmup_us", "messages"}

INTERFACE_EXAMPLE = """
name = "two-switch-demo"
seed = 1

[fabric]
link_gbps = 100.0
link_latency_ns = 20
switch_latency_ns = 100
mtu_bytes = 4096
header_bytes = 26
data_vls = 4
vl_buffer_bytes = 32768

[topology]
kind = "xgft"
m = [16, 16, 4]
w = [1, 4, 4]

[routing]
algorithm = "dmodk"

[qos]
sl2vl = [0,1,2,3, 0,1,2,3, 0,1,2,3, 0,1,2,3]
vlarb_high = "0:0"
vlarb_low = "0:64,1:64,2:64,3:64"
high_limit = 0

[[traffic]]
pattern = "uniform"
hosts = "all"
destinations = "all"
load = 0.5
message_bytes = 4096
sl = 0
arrival = "poisson"

[run]
duration_us = 500
warmup_us = 50
"""


def xgft(**extra):
    return {"topology": {"kind": "xgft", "m": [8, 4], "w": [1, 2]}, **extra}


def error_of(data, source="s.toml"):
    with pytest.raises(ScenarioError) as caught:
        Scenario.from_dict(data, source)
    return str(caught.value)


# ---- defaults and derived values ----------------------------------------------------------------


def test_defaults():
    s = Scenario()
    assert s.seed == 1 and s.name is None
    f = s.fabric
    assert (f.link_gbps, f.link_latency_ns, f.switch_latency_ns) == (100.0, 20.0, 100.0)
    assert (f.mtu_bytes, f.header_bytes, f.data_vls) == (4096, 26, 4)
    # 128 KiB per port, 32 KiB for each of the 4 VLs: the per-VL figure before port buffers.
    assert (f.port_buffer_bytes, f.vl_buffer_bytes, f.buffer_per_vl()) == (131072, None, 32768)
    assert s.topology.kind == "single-switch" and s.host_count() == 32
    assert s.routing.algorithm == "dmodk"
    assert s.traffic == []
    assert (s.run.duration_us, s.run.warmup_us, s.run.messages) == (500.0, 50.0, False)


def test_default_qos_follows_data_vls():
    for data_vls in (1, 2, 4, 8, 15):
        q = Scenario(fabric={"data_vls": data_vls}).port_qos("ca")
        assert q["sl2vl"] == [sl % data_vls for sl in range(16)]
        assert q["vlarb_low"] == [(vl, 255) for vl in range(data_vls)]
        assert q["vlarb_high"] == [] and q["high_limit"] == 0


def test_port_buffer_is_divided_among_the_data_vls_in_whole_credits():
    # The expected shares are written out: 131072 / 15 = 8738.1, rounded down to 136 credits.
    for data_vls, share in {1: 131072, 2: 65536, 4: 32768, 8: 16384, 15: 8704}.items():
        s = Scenario(fabric={"data_vls": data_vls})
        assert s.fabric.buffer_per_vl() == share
        assert s.to_engine_config()["fabric"]["vl_buffer_bytes"] == share
    assert Scenario(fabric={"port_buffer_bytes": 100000}).fabric.buffer_per_vl() == 24960  # 25000 -> 390 credits
    # The seeds' 64 KB port: 1 x 64, 2 x 32, 4 x 16 KB.
    assert [Scenario(fabric={"port_buffer_bytes": 65536, "data_vls": n}).fabric.buffer_per_vl() for n in (1, 2, 4)] \
        == [65536, 32768, 16384]


def test_smallest_port_buffer_is_one_packet_per_vl():
    # 15 VLs x 4160 bytes = 62400: accepted exactly at the minimum, refused one credit below.
    assert Scenario(fabric={"port_buffer_bytes": 62400, "data_vls": 15}).fabric.buffer_per_vl() == 4160
    assert "expected at least 62400 bytes for 15 data VLs" in error_of({"fabric": {"port_buffer_bytes": 62399, "data_vls": 15}})


def test_vl_buffer_override_is_per_vl_whatever_the_vl_count():
    for data_vls in (1, 4, 15):
        s = Scenario(fabric={"data_vls": data_vls, "vl_buffer_bytes": 20000})
        assert s.fabric.port_buffer_bytes is None
        assert s.to_engine_config()["fabric"]["vl_buffer_bytes"] == 20000


def test_resolved_scenario_carries_the_buffer_key_it_came_from():
    for fabric, key in (({}, "port_buffer_bytes"), ({"port_buffer_bytes": 65536}, "port_buffer_bytes"),
                        ({"vl_buffer_bytes": 16384}, "vl_buffer_bytes")):
        s = Scenario(fabric={"data_vls": 2, **fabric})
        resolved = s.resolved()["fabric"]
        assert key in resolved and {"port_buffer_bytes", "vl_buffer_bytes"} - {key} - set(resolved)
        again = Scenario.from_dict(s.resolved())
        assert again.to_engine_config() == s.to_engine_config()
        # Changing the VL count of the resolved scenario re-divides a port buffer, never an override.
        more = Scenario.from_dict({**s.resolved(), "fabric": {**resolved, "data_vls": 8}, "qos": {}})
        assert more.fabric.buffer_per_vl() == (16384 if key == "vl_buffer_bytes" else resolved[key] // 8)


def test_set_data_vls_divides_the_port_buffer_again():
    s = Scenario(fabric={"port_buffer_bytes": 65536})
    assert s.with_overrides(["fabric.data_vls=1"]).fabric.buffer_per_vl() == 65536
    assert s.with_overrides(["fabric.data_vls=8"]).fabric.buffer_per_vl() == 8192
    # The default port buffer is not "given", so a per-VL override alone is not two keys.
    assert Scenario().with_overrides(["fabric.vl_buffer_bytes=8192"]).fabric.buffer_per_vl() == 8192


def test_run_ids_of_unchanged_behaviour_stay_as_before_port_buffers():
    from qoslab.scenario import run_identity
    from qoslab.sweep.execute import run_id

    resolved = Scenario(**xgft()).resolved()
    before = copy.deepcopy(resolved)  # how the same scenario was resolved before port buffers
    del before["fabric"]["port_buffer_bytes"]
    before["fabric"]["vl_buffer_bytes"] = 32768
    assert run_id(0, "default", resolved) == run_id(0, "default", before)
    assert run_identity(resolved)["fabric"] == before["fabric"]
    # A changed division is a changed run.
    two = Scenario(**xgft(fabric={"data_vls": 2})).resolved()
    two_before = copy.deepcopy(two)
    del two_before["fabric"]["port_buffer_bytes"]
    two_before["fabric"]["vl_buffer_bytes"] = 32768
    assert run_id(0, "default", two) != run_id(0, "default", two_before)


def test_traffic_defaults():
    t = Scenario(traffic=[{"load": 0.3}]).traffic[0]
    assert (t.pattern, t.hosts, t.destinations, t.load) == ("uniform", "all", "all", 0.3)
    assert (t.message_bytes, t.sl, t.arrival, t.shift) == (4096, 0, "poisson", None)
    assert (t.hotspot_hosts, t.hotspot_fraction, t.saturate_depth) == ([0], 0.5, 2)


def test_traffic_keys_the_pattern_ignores_are_warned():
    s = Scenario(traffic=[{"load": 0.3, "shift": 3, "hotspot_fraction": 0.2, "saturate_depth": 4},
                          {"load": "saturate", "pattern": "shift", "shift": 2, "max_queued_messages": 10,
                           "arrival": "periodic"},
                          {"load": 0.3, "pattern": "hotspot", "hotspot_hosts": [3], "hotspot_fraction": 0.9}])
    assert s.traffic_warnings() == [
        'traffic[0].shift: ignored with pattern = "uniform" (only pattern = "shift" reads it)',
        'traffic[0].hotspot_fraction: ignored with pattern = "uniform" (only pattern = "hotspot" reads it)',
        'traffic[0].saturate_depth: ignored with load = 0.3 (only load = "saturate" reads it)',
        'traffic[1].max_queued_messages: ignored with load = "saturate" (only a fractional load reads it)',
        'traffic[1].arrival: ignored with load = "saturate" (only a fractional load reads it)',
    ]
    assert set(s.traffic_warnings()) <= set(s.warnings())
    # A resolved scenario (what a study stores) lists every key with its default: no warning.
    assert Scenario(traffic=[{"load": 0.3}, {"load": "saturate"}]).traffic_warnings() == []
    resolved = Scenario.from_dict(Scenario(traffic=[{"load": 0.3}, {"load": "saturate"}]).resolved())
    assert {"shift", "hotspot_hosts"} <= resolved.traffic[0].model_fields_set
    assert resolved.traffic_warnings() == []


def test_host_count():
    assert Scenario(topology={"kind": "single-switch", "hosts": 7}).host_count() == 7
    assert Scenario(**xgft()).host_count() == 32
    assert Scenario(topology={"kind": "xgft", "m": [16, 16, 4], "w": [1, 4, 4]}).host_count() == 1024


def test_interface_example_file(tmp_path):
    path = tmp_path / "demo.toml"
    path.write_text(INTERFACE_EXAMPLE)
    s = Scenario.from_toml(path)
    assert s.source == str(path)
    assert s.name == "two-switch-demo" and s.host_count() == 1024
    config = s.to_engine_config()
    assert config["qos"]["ca"]["vlarb_low"] == [[0, 64], [1, 64], [2, 64], [3, 64]]
    assert config["qos"]["swe"]["vlarb_high"] == [[0, 0]]
    assert config["run"] == {"duration_us": 500.0, "warmup_us": 50.0, "messages": False}


# ---- the engine config --------------------------------------------------------------------------


def test_engine_config_shape():
    flood = {"pattern": "incast", "hosts": "16-19", "destinations": 8, "load": "saturate", "sl": 1}
    s = Scenario(**xgft(traffic=[{"load": 0.5}, flood]))
    config = s.to_engine_config()
    assert set(config) == ENGINE_KEYS
    assert set(config["fabric"]) == FABRIC_KEYS
    assert config["topology"] == {"kind": "xgft", "m": [8, 4], "w": [1, 2]}
    assert config["routing"] == {"algorithm": "dmodk", "vls": 1}
    assert set(config["qos"]) == {"ca", "swe", "sl2vl_pairs"}
    for port in ("ca", "swe"):
        assert set(config["qos"][port]) == PORT_QOS_KEYS
    assert set(config["run"]) == RUN_KEYS
    first, second = config["traffic"]
    assert set(first) == set(second) == TRAFFIC_KEYS
    assert first["hosts"] == first["destinations"] == list(range(32))
    assert first["load"] == 0.5 and first["shift"] == 16
    assert second["hosts"] == [16, 17, 18, 19] and second["destinations"] == [8]
    assert second["load"] is None and second["sl"] == 1
    # Floats where the engine wants f64, and the whole thing is plain JSON.
    assert isinstance(config["fabric"]["link_latency_ns"], float)
    assert json.loads(json.dumps(config)) == config


def test_single_switch_engine_topology():
    config = Scenario(topology={"kind": "single-switch", "hosts": 4}).to_engine_config()
    assert config["topology"] == {"kind": "single-switch", "hosts": 4}


def test_qos_resolution_specific_then_generic_then_default():
    s = Scenario(
        fabric={"data_vls": 2},
        qos={
            "vlarb_low": "0:64,1:192",
            "high_limit": 4,
            "ca": {"sl2vl": [1] * 16, "high_limit": 255},
            "swe": {"vlarb_high": [[1, 64]]},
        },
    )
    config = s.to_engine_config()["qos"]
    assert config["ca"] == {
        "sl2vl": [1] * 16,  # specific
        "vlarb_high": [],  # default
        "vlarb_low": [[0, 64], [1, 192]],  # generic
        "high_limit": 255,  # specific
    }
    assert config["swe"] == {
        "sl2vl": [0, 1] * 8,  # default
        "vlarb_high": [[1, 64]],  # specific (list form)
        "vlarb_low": [[0, 64], [1, 192]],
        "high_limit": 4,
    }


def test_opensm_strings_accepted():
    s = Scenario(qos={"sl2vl": "0,1,2,3,0,1,2,3,0,1,2,3,0,1,2,3", "vlarb_low": " 0:0 , 1:64,2:128 ", "vlarb_high": ""})
    q = s.port_qos("swe")
    assert q["sl2vl"] == [0, 1, 2, 3] * 4
    assert q["vlarb_low"] == [(0, 0), (1, 64), (2, 128)]
    assert q["vlarb_high"] == []


def test_host_selections():
    s = Scenario(
        traffic=[
            {"load": 0.1, "hosts": "2-5", "destinations": [7, 1]},
            {"load": 0.1, "hosts": 3, "destinations": "all"},
        ]
    )
    first, second = s.to_engine_config()["traffic"]
    assert first["hosts"] == [2, 3, 4, 5] and first["destinations"] == [7, 1]
    assert second["hosts"] == [3] and len(second["destinations"]) == 32


def test_shift_default_and_normalisation():
    s = Scenario(
        traffic=[
            {"pattern": "shift", "load": 0.1},
            {"pattern": "shift", "load": 0.1, "destinations": "0-9"},
            {"pattern": "shift", "load": 0.1, "shift": -1},
        ]
    )
    assert [t["shift"] for t in s.to_engine_config()["traffic"]] == [16, 5, 31]


def test_resolved_is_a_valid_scenario_with_the_same_engine_config():
    s = Scenario(**xgft(qos={"vlarb_low": "0:64,1:64"}, traffic=[{"load": "saturate", "hosts": "0-3"}]))
    resolved = s.resolved()
    assert resolved["qos"]["ca"]["vlarb_low"] == [[0, 64], [1, 64]]
    assert resolved["traffic"][0]["shift"] == 16
    json.dumps(resolved)
    assert Scenario.from_dict(resolved).to_engine_config() == s.to_engine_config()


# ---- overrides ----------------------------------------------------------------------------------


def test_overrides():
    s = Scenario.from_dict({"traffic": [{"load": 0.5}]}, "base.toml")
    t = s.with_overrides(
        [
            "fabric.data_vls=8",
            "traffic[0].load=saturate",  # not TOML: taken as a string
            "qos.ca.high_limit=3",  # creates [qos] and [qos.ca]
            "name=my run",
            "run.messages=true",
            "topology.hosts=64",  # the default topology still takes its own keys
        ]
    )
    assert t.source == "base.toml"
    assert t.fabric.data_vls == 8 and t.port_qos("ca")["sl2vl"] == [sl % 8 for sl in range(16)]
    assert t.traffic[0].load == "saturate" and t.to_engine_config()["traffic"][0]["load"] is None
    assert t.port_qos("ca")["high_limit"] == 3 and t.port_qos("swe")["high_limit"] == 0
    assert t.name == "my run" and t.run.messages is True and t.host_count() == 64
    assert s.fabric.data_vls == 4  # the original is unchanged


def test_override_switches_topology_kind():
    t = Scenario().with_overrides(["topology.kind=xgft", "topology.m=[8, 4]", "topology.w=[1, 2]"])
    assert t.host_count() == 32


def test_override_dotted_index_form():
    t = Scenario(traffic=[{"load": 0.5}]).with_overrides(["traffic.0.sl=3"])
    assert t.traffic[0].sl == 3


@pytest.mark.parametrize(
    "item, expected",
    [
        ("nokey", "expected KEY=VALUE"),
        ("=3", "expected KEY=VALUE"),
        ("traffic[1].load=0.1", "--set traffic[1].load: traffic has 1 entries"),
        ("fabric..x=1", "expected a key path"),
        ("fabric.data_vls=3", "fabric.data_vls: expected 1, 2, 4, 8 or 15, got 3 (from --set)"),
        ("fabric.nonsense=1", "fabric.nonsense: unknown key"),
    ],
)
def test_bad_overrides(item, expected):
    with pytest.raises(ScenarioError) as caught:
        Scenario.from_dict({"traffic": [{"load": 0.5}]}, "base.toml").with_overrides([item])
    assert "base.toml" in str(caught.value)
    assert expected in str(caught.value)


# ---- bad input: every message names the file and the key ---------------------------------------

BAD = [
    # (scenario dict, key named, what the message says)
    ({"colour": "red"}, "colour", "unknown key"),
    ({"fabric": {"mtu": 4096}}, "fabric.mtu", "unknown key (expected one of: link_gbps"),
    ({"qos": {"ca": {"weights": 1}}}, "qos.ca.weights", "unknown key"),
    ({"traffic": [{"load": 0.5, "rate": 1}]}, "traffic[0].rate", "unknown key"),
    (xgft(topology={"kind": "xgft", "m": [8, 4], "w": [1, 2], "hosts": 4}), "topology.hosts", "unknown key"),
    ({"fabric": {"link_gbps": "fast"}}, "fabric.link_gbps", 'expected a number, got "fast"'),
    ({"fabric": {"data_vls": "4"}}, "fabric.data_vls", "expected 1, 2, 4, 8 or 15"),
    ({"seed": 1.5}, "seed", "expected an integer"),
    ({"run": {"messages": "yes"}}, "run.messages", "expected true or false"),
    ({"fabric": []}, "fabric", "expected a table"),
    ({"traffic": {"load": 0.5}}, "traffic", "expected a list"),
    ({"fabric": {"mtu_bytes": 3000}}, "fabric.mtu_bytes", "expected 256, 512, 1024, 2048 or 4096, got 3000"),
    ({"fabric": {"data_vls": 3}}, "fabric.data_vls", "expected 1, 2, 4, 8 or 15"),
    ({"fabric": {"vl_buffer_bytes": 4096}}, "fabric.vl_buffer_bytes", "expected at least 4160 bytes"),
    ({"fabric": {"port_buffer_bytes": 65536, "vl_buffer_bytes": 16384}}, "fabric.port_buffer_bytes",
     ("give fabric.port_buffer_bytes (one buffer per port, divided among the data VLs) or fabric.vl_buffer_bytes "
      "(the same buffer for every VL, whatever their number), not both")),
    ({"fabric": {"port_buffer_bytes": 16384}}, "fabric.port_buffer_bytes",
     "expected at least 16640 bytes for 4 data VLs (fabric.data_vls = 4)"),
    ({"fabric": {"port_buffer_bytes": 4200, "data_vls": 2, "mtu_bytes": 2048}}, "fabric.port_buffer_bytes",
     ("expected at least 4224 bytes for 2 data VLs (fabric.data_vls = 2): each VL's share must hold one MTU packet: "
      "2048 + 26 header bytes, rounded up to 64-byte credits (2112 bytes); got 4200, which leaves 2048 bytes per VL")),
    ({"fabric": {"port_buffer_bytes": 0}}, "fabric.port_buffer_bytes", "greater than 0"),
    ({"fabric": {"port_buffer_bytes": "64k"}}, "fabric.port_buffer_bytes", "expected an integer"),
    ({"fabric": {"link_gbps": 0}}, "fabric.link_gbps", "greater than 0"),
    ({"topology": {"kind": "xgft", "m": [8, 4], "w": [1]}}, "topology.w", "as many entries as m"),
    ({"topology": {"kind": "xgft", "m": [8, 4], "w": [2, 2]}}, "topology.w[0]", "multi-port HCAs are not modelled yet"),
    ({"topology": {"kind": "xgft", "m": [], "w": []}}, "topology.m", "at least 1"),
    ({"topology": {"kind": "xgft", "m": [8, 0], "w": [1, 1]}}, "topology.m[1]", "greater than 0"),
    ({"topology": {"kind": "xgft", "m": [8, 4]}}, "topology.w", "required key is missing"),
    ({"topology": {"kind": "single-switch", "hosts": 1}}, "topology.hosts", "greater than or equal to 2"),
    ({"topology": {"kind": "dragonfly-plus", "groups": 4}}, "topology.leaves_per_group", "expected a number"),
    ({"topology": {"kind": "dragonfly-plus", "groups": 4, "leaves_per_group": 2, "spines_per_group": 2,
                   "hosts_per_leaf": 4, "global_links_per_spine": 2}},
     "topology.global_links_per_spine", "do not split evenly over the 3 other groups"),
    ({"topology": {"kind": "dragonfly-plus", "preset": "marconi100", "hosts_per_leaf": 20}},
     "topology.hosts_per_leaf", "20 host ports + 18 spine ports = 38, more than switch_radix = 36"),
    ({"topology": {"kind": "dragonfly-plus", "preset": "marconi100", "global_links_per_spine": 0}},
     "topology.global_links_per_spine", "greater than or equal to 1"),
    ({"topology": {"kind": "dragonfly-plus", "preset": "marconi100", "global_links_per_pair": 100}},
     "topology.global_links_per_pair", "100 links to each of the 2 other groups (200 per group) do not split evenly over 18 spines"),
    ({"topology": {"kind": "dragonfly-plus", "preset": "marconi100", "global_links_per_spine": 18,
                   "global_links_per_pair": 100}},
     "topology.global_links_per_pair", "give 162 links per group pair, not 100"),
    ({"topology": {"kind": "dragonfly-plus", "preset": "marconi100"}, "routing": {"algorithm": "valiant", "vls": 1}},
     "routing.vls", "valiant routing needs 2 VL layers to be deadlock-free"),
    ({"topology": {"kind": "dragonfly-plus", "preset": "marconi100"}, "routing": {"algorithm": "adaptive"},
      "fabric": {"data_vls": 1}}, "routing.vls", "routing needs 2 VL layers but fabric.data_vls = 1"),
    ({"topology": {"kind": "dragonfly-plus", "preset": "marconi100"}, "routing": {"algorithm": "adaptive"},
      "qos": {"sl2vl": [0, 1, 2, 3] * 4}}, "qos.sl2vl", "routing.vls = 2 leaves VL0..VL1 for QoS"),
    ({"topology": {"kind": "dragonfly-plus", "preset": "marconi100"}, "routing": {"algorithm": "adaptive"},
      "qos": {"vlarb_low": "0:1,3:1"}}, "qos.vlarb_low", 'entry "3:1" is for VL3, but routing.vls = 2'),
    ({"topology": {"kind": "dragonfly-plus", "preset": "marconi100"}, "routing": {"algorithm": "dmodk"}},
     "routing.algorithm", '"dmodk" routing needs a fat tree'),
    ({"routing": {"algorithm": "valiant"}}, "routing.algorithm", "needs a dragonfly-plus topology"),
    ({"jobs": [{"nodes": 2, "placement": "same-group", "workload": {"kind": "ping-pong", "bytes": 8, "iterations": 1}}]},
     "jobs[0].placement", "needs a dragonfly-plus topology"),
    ({"topology": {"kind": "dragonfly-plus", "preset": "marconi100"},
      "jobs": [{"nodes": 400, "placement": "same-group", "workload": {"kind": "ping-pong", "bytes": 8, "iterations": 1}}]},
     "jobs[0].nodes", "no group has 400 free hosts (at most 324)"),
    ({"topology": {"kind": "ibnetdiscover", "path": "f.topo"}}, "topology.path", "file not found"),
    ({"topology": {"kind": "torus"}}, "topology.kind", 'got "torus"'),
    ({"topology": {"hosts": 4}}, "topology.kind", "required key is missing"),
    ({"routing": {"algorithm": "ecmp"}}, "routing.algorithm", "dmodk"),
    ({"qos": {"sl2vl": [0, 1, 2, 3, 4] + [0] * 11}}, "qos.sl2vl", "SL4 maps to VL4"),
    ({"qos": {"ca": {"sl2vl": [0] * 15 + [7]}}}, "qos.ca.sl2vl", "SL15 maps to VL7"),
    ({"qos": {"sl2vl": [0] * 15}}, "qos.sl2vl", "expected 16 entries"),
    ({"qos": {"sl2vl": [15] * 16}}, "qos.sl2vl", "SL0 -> VL15"),
    ({"qos": {"vlarb_low": "0-64"}}, "qos.vlarb_low", '"0-64"'),
    ({"qos": {"vlarb_low": "0:300"}}, "qos.vlarb_low", '"0:300": weight 300'),
    ({"qos": {"vlarb_high": "16:1"}}, "qos.vlarb_high", '"16:1": VL 16'),
    ({"qos": {"swe": {"vlarb_low": "a:b"}}}, "qos.swe.vlarb_low", '"a:b"'),
    ({"qos": {"vlarb_low": "0:64,"}}, "qos.vlarb_low", "bad entry"),
    ({"qos": {"vlarb_low": [[0, 64, 1]]}}, "qos.vlarb_low", "[vl, weight] pair"),
    ({"qos": {"vlarb_low": ",".join(["0:1"] * 65)}}, "qos.vlarb_low", "at most 64 entries"),
    ({"qos": {"vlarb_low": "0:64,5:64"}}, "qos.vlarb_low", 'entry "5:64" is for VL5'),
    ({"qos": {"high_limit": 256}}, "qos.high_limit", "less than or equal to 255"),
    ({"traffic": [{"load": 0}]}, "traffic[0].load", "expected a fraction in (0, 1]"),
    ({"traffic": [{"load": 1.5}]}, "traffic[0].load", "got 1.5"),
    ({"traffic": [{"load": -1}]}, "traffic[0].load", "got -1"),
    ({"traffic": [{"load": "fast"}]}, "traffic[0].load", 'got "fast"'),
    ({"traffic": [{"load": 0.5}, {"sl": 1}]}, "traffic[1].load", "required key is missing"),
    ({"traffic": [{"load": 0.5, "sl": 16}]}, "traffic[0].sl", "less than or equal to 15"),
    ({"traffic": [{"load": 0.5, "message_bytes": 0}]}, "traffic[0].message_bytes", "greater than or equal to 1"),
    ({"traffic": [{"load": 0.5, "pattern": "tornado"}]}, "traffic[0].pattern", "uniform"),
    ({"traffic": [{"load": 0.5, "arrival": "bursty"}]}, "traffic[0].arrival", "poisson"),
    ({"traffic": [{"load": 0.5, "hotspot_fraction": 1.5}]}, "traffic[0].hotspot_fraction", "less than or equal to 1"),
    ({"traffic": [{"load": "saturate", "saturate_depth": 0}]}, "traffic[0].saturate_depth", "greater than or equal"),
    ({"traffic": [{"load": 0.5, "hosts": "0-32"}]}, "traffic[0].hosts", "host 32 does not exist"),
    ({"traffic": [{"load": 0.5, "hosts": "5-2"}]}, "traffic[0].hosts", "first <= last"),
    ({"traffic": [{"load": 0.5, "hosts": "some"}]}, "traffic[0].hosts", "use indices or a range"),
    ({"traffic": [{"load": 0.5, "hosts": []}]}, "traffic[0].hosts", "at least one host"),
    ({"traffic": [{"load": 0.5, "hosts": [1, 1]}]}, "traffic[0].hosts", "listed twice"),
    ({"traffic": [{"load": 0.5, "destinations": [0, 99]}]}, "traffic[0].destinations", "host 99 does not exist"),
    ({"traffic": [{"load": 0.5, "hotspot_hosts": [40]}]}, "traffic[0].hotspot_hosts", "host 40 does not exist"),
    ({"traffic": [{"load": 0.5, "pattern": "hotspot", "hotspot_hosts": [1, 1]}]}, "traffic[0].hotspot_hosts",
     "host 1 listed twice"),
    ({"jobs": [{"name": "a", "nodes": 2, "placement": "random", "fragment_nodes": 3, "workload": {"kind": "ping-pong"}}]},
     "jobs[0].fragment_nodes", 'only used with placement = "fragmented"'),
    ({"run": {"warmup_us": 500}}, "run.warmup_us", "expected less than run.duration_us (500, the default), got 500"),
    ({"run": {"duration_us": 100, "warmup_us": 200}}, "run.warmup_us", "expected less than run.duration_us"),
    ({"run": {"duration_us": 0}}, "run.duration_us", "greater than 0"),
    ({"run": {"warmup_us": -1}}, "run.warmup_us", "greater than or equal to 0"),
]


@pytest.mark.parametrize("data, key, expected", BAD, ids=[f"{b[1]}-{i}" for i, b in enumerate(BAD)])
def test_bad_input_names_file_and_key(data, key, expected):
    message = error_of(data)
    assert f"s.toml: {key}: " in message, message
    assert expected in message, message
    assert "pydantic" not in message and "http" not in message


def test_several_problems_one_line_each():
    message = error_of({"fabric": {"mtu_bytes": 3000}, "traffic": [{"load": "fast"}]})
    lines = message.splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("s.toml: fabric.mtu_bytes: ")
    assert lines[1].startswith("s.toml: traffic[0].load: ")


def test_error_is_a_value_error_with_problems():
    with pytest.raises(ValueError) as caught:
        Scenario(fabric={"mtu_bytes": 3000})
    assert caught.value.problems == [("fabric.mtu_bytes", "expected 256, 512, 1024, 2048 or 4096, got 3000")]


def test_nan_load_rejected():
    assert "traffic[0].load" in error_of({"traffic": [{"load": math.nan}]})


# ---- files --------------------------------------------------------------------------------------


def test_toml_syntax_error_names_line(tmp_path):
    path = tmp_path / "broken.toml"
    path.write_text('seed = 1\n[fabric\nmtu_bytes = 4096\n')
    with pytest.raises(ScenarioError) as caught:
        Scenario.from_toml(path)
    message = str(caught.value)
    assert str(path) in message and "line 2" in message and "TOML syntax error" in message


def test_missing_file(tmp_path):
    path = tmp_path / "nope.toml"
    with pytest.raises(ScenarioError) as caught:
        Scenario.from_toml(path)
    assert str(caught.value) == f"{path}: file not found"


def test_directory_instead_of_file(tmp_path):
    with pytest.raises(ScenarioError) as caught:
        Scenario.from_toml(tmp_path)
    assert "is a directory" in str(caught.value)


def test_not_text(tmp_path):
    path = tmp_path / "binary.toml"
    path.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(ScenarioError) as caught:
        Scenario.from_toml(path)
    assert "not a text file" in str(caught.value)


def test_file_errors_name_the_file(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text('[fabric]\nmtu_bytes = 3000\n')
    with pytest.raises(ScenarioError) as caught:
        Scenario.from_toml(path)
    assert str(caught.value).startswith(f"{path}: fabric.mtu_bytes: ")


def test_a_scenario_dumped_whole_reads_back():
    # model_dump lists every key with its default (fragment_nodes = 4 beside a random placement),
    # which the check for keys a placement ignores must not take for a mistake.
    s = Scenario(topology={"kind": "xgft", "m": [4, 4], "w": [1, 2]},
                 jobs=[{"name": "a", "nodes": 4, "placement": "random", "workload": {"kind": "ping-pong"}}])
    again = Scenario.from_dict(s.model_dump(mode="json"))
    assert again.jobs[0].placement == "random"


def test_the_python_api_refuses_wrong_types_by_what_it_expected():
    import qoslab

    base = Scenario(topology={"kind": "single-switch", "hosts": 4}, traffic=[{"load": 0.1}])
    # A str was taken as its letters: "expected KEY=VALUE, got "f"".
    with pytest.raises(TypeError, match=r"expected a list of KEY=VALUE strings, got the string 'fabric.data_vls=8'"):
        base.with_overrides("fabric.data_vls=8")
    assert base.with_overrides(["fabric.data_vls=8"]).fabric.data_vls == 8
    for call in (qoslab.simulate, qoslab.describe):  # an AttributeError from deep inside before
        with pytest.raises(TypeError, match="expected a qoslab.Scenario"):
            call({"topology": {"kind": "single-switch", "hosts": 4}})
    with pytest.raises(ScenarioError, match="expected keys that are strings, got 5"):
        Scenario.from_dict({5: 1})
