"""The Python/engine boundary (docs/design/engine-boundary.md): the rules on the resolved config
that the engine owns are reported when a scenario is loaded, by file and by the key the user
wrote, and Python keeps no copy of them; the engine config is one typed object with one producer."""

from __future__ import annotations

import importlib
import typing
from pathlib import Path

import pytest
import qoslab
from qoslab.cli import app
from qoslab.engine_config import EngineConfig, engine_config
from qoslab.errors import ScenarioError
from qoslab.scenario import Scenario
from typer.testing import CliRunner

simulate = importlib.import_module("qoslab.simulate")  # the module (qoslab.simulate is also its function)

MARCONI = '[topology]\nkind = "dragonfly-plus"\npreset = "marconi100"\n'
XGFT = '[topology]\nkind = "xgft"\nm = [4, 4]\nw = [1, 4]\n'
SMALL_DRAGONFLY = ('[topology]\nkind = "dragonfly-plus"\ngroups = 5\nleaves_per_group = 3\nspines_per_group = 2\n'
                   "hosts_per_leaf = 2\nglobal_links_per_pair = 1\n")

# Each rule the engine owns (config.rs EngineConfig::validate, RoutingConfig::check_fits): a file
# that breaks it, the key the error must name, and what it must say.
ENGINE_RULES = {
    "flowlets-algorithm": (SMALL_DRAGONFLY + '[routing]\nalgorithm = "minimal"\nflowlet_gap_us = 5\n',
                           "routing.flowlet_gap_us",
                           'flowlets apply to adaptive routing on a Dragonfly+ (routing.algorithm is "minimal" on '
                           "dragonfly-plus); remove the key or set it to 0"),
    "flowlets-topology": (XGFT + '[routing]\nalgorithm = "adaptive"\nflowlet_gap_us = 5\n',
                          "routing.flowlet_gap_us",
                          'flowlets apply to adaptive routing on a Dragonfly+ (routing.algorithm is "adaptive" on xgft)'),
    "layers-needed": (MARCONI + '[routing]\nalgorithm = "valiant"\nvls = 1\n', "routing.vls",
                      "valiant routing needs 2 VL layers to be deadlock-free"),
    "layers-beyond-data-vls": (MARCONI + '[routing]\nalgorithm = "adaptive"\n[fabric]\ndata_vls = 1\n', "routing.vls",
                               "routing needs 2 VL layers but fabric.data_vls = 1: set fabric.data_vls to at least 2"),
    "algorithm-topology": (MARCONI + '[routing]\nalgorithm = "dmodk"\n', "routing.algorithm",
                           '"dmodk" routing needs a fat tree; route a Dragonfly+ with "minimal"'),
    "algorithm-dragonfly-only": ('[routing]\nalgorithm = "valiant"\n', "routing.algorithm",
                                 '"valiant" routing needs a dragonfly-plus topology'),
    "sl2vl-generic": ("[qos]\nsl2vl = [0, 1, 2, 3, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]\n", "qos.sl2vl",
                      "SL4 maps to VL4, but only VL0..VL3 exist (fabric.data_vls = 4)"),
    "sl2vl-port": ("[qos.swe]\nsl2vl = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7]\n", "qos.swe.sl2vl",
                   "SL15 maps to VL7, but only VL0..VL3 exist"),
    "sl2vl-layers": (MARCONI + '[routing]\nalgorithm = "adaptive"\n[qos]\nsl2vl = "0,1,2,3,0,1,2,3,0,1,2,3,0,1,2,3"\n',
                     "qos.sl2vl", "SL2 maps to VL2, but routing.vls = 2 leaves VL0..VL1 for QoS (fabric.data_vls = 4"),
    "sl2vl-pairs": ("[[qos.sl2vl_pairs]]\nswitch = 0\nin_port = 0\nout_port = 1\n"
                    "sl2vl = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9]\n", "qos.sl2vl_pairs[0].sl2vl",
                    "SL15 maps to VL9, but only VL0..VL3 exist"),
    "vlarb-size": ("[qos]\nvlarb_low = \"" + ",".join(["0:1"] * 65) + "\"\n", "qos.vlarb_low",
                   "expected at most 64 entries, got 65"),
    "vlarb-size-layers": (MARCONI + '[routing]\nalgorithm = "adaptive"\n[qos.ca]\nvlarb_low = "'
                          + ",".join(["0:1"] * 40) + '"\n', "qos.ca.vlarb_low",
                          "expected at most 64 entries, got 80 (40 entries, one per routing layer (2) each)"),
    "sl-policy-ranks": ('[[jobs]]\nnodes = 2\nranks_per_node = 2\n[jobs.workload]\nkind = "ping-pong"\n'
                        '[jobs.sl_policy]\nkind = "ranks"\nranks = [1, 4]\n', "jobs[0].sl_policy.ranks",
                        "rank 4 is not in the job: it has 4 ranks (0..3)"),
}


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "s.toml"
    path.write_text(text)
    return path


@pytest.mark.parametrize("rule", ENGINE_RULES)
def test_an_engine_rule_is_reported_at_load_by_file_and_key(tmp_path, rule):
    text, key, expected = ENGINE_RULES[rule]
    path = write(tmp_path, text)
    with pytest.raises(ScenarioError) as error:
        Scenario.from_toml(path)
    assert error.value.problems[0][0] == key, error.value.problems
    assert f"{path}: {key}: " in str(error.value) and expected in str(error.value), str(error.value)


@pytest.mark.parametrize("rule", ["flowlets-topology", "layers-needed", "sl2vl-generic", "vlarb-size-layers"])
def test_qoslab_check_reports_an_engine_rule_naming_file_and_key(tmp_path, rule):
    text, key, expected = ENGINE_RULES[rule]
    path = write(tmp_path, text)
    result = CliRunner().invoke(app, ["check", str(path)])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert f"{path}: {key}: {expected}" in result.stderr, result.stderr


@pytest.mark.parametrize("rule", ENGINE_RULES)
def test_python_keeps_no_copy_of_an_engine_rule(tmp_path, monkeypatch, rule):
    """With the engine's verdict switched off, Python accepts every one of these files: the
    error above came from the engine alone."""
    asked = []

    def nobody_objects(scenario):
        asked.append(scenario.to_engine_config())
        return None

    monkeypatch.setattr(simulate, "check_engine_config", nobody_objects)
    Scenario.from_toml(write(tmp_path, ENGINE_RULES[rule][0]))
    assert asked, "the engine was not asked"


def test_the_messages_live_in_the_engine_only():
    """The texts of the engine's rules appear nowhere in the Python package."""
    package = Path(qoslab.__file__).parent
    sources = "\n".join(p.read_text() for p in package.rglob("*.py"))
    for text in ("flowlets apply to adaptive routing", "VL layers to be deadlock-free", "VL layers but fabric.data_vls",
                 "routing needs a fat tree", "routing needs a dragonfly-plus", "maps to VL{vl}, but",
                 "expected at most 64 entries", "one per routing layer ("):
        assert text not in sources, text


def test_the_engine_is_asked_with_the_config_it_would_run(monkeypatch):
    seen = []
    real = simulate.engine()

    class Recording:
        def validate(self, config_json):
            seen.append(config_json)
            return real.validate(config_json)

    monkeypatch.setattr(simulate, "engine", lambda: Recording())
    s = Scenario(traffic=[{"load": 0.5}])
    assert seen == [simulate.encode(s.to_engine_config())]


def test_a_tail_study_routing_is_checked_by_the_engine_under_the_study_key():
    from qoslab.scenario import read_toml
    from qoslab.study.tail_model import RoutingChoice, TailStudy

    # The study file's routing table alone accepts flowlets with any algorithm; the study asks the
    # engine, through its base scenario, whether each routing suits the fabric.
    assert RoutingChoice(algorithm="minimal", flowlet_gap_us=5).flowlet_gap_us == 5
    example = Path(__file__).parent.parent / "examples" / "dragonfly-tail" / "study.toml"
    data = read_toml(example)
    with pytest.raises(ScenarioError) as error:
        TailStudy.from_dict({**data, "routings": ["minimal", {"algorithm": "minimal", "flowlet_gap_us": 5}]},
                            str(example))
    assert error.value.problems[0][0] == "routings[1].flowlet_gap_us"
    assert error.value.problems[0][1].startswith("flowlets apply to adaptive routing on a Dragonfly+")
    # A rule on another key that only this routing breaks: named by the routing, the key in the text.
    scenario = {**read_toml(example.parent / data["scenario"]), "qos": {"sl2vl": "0,1,2,3,0,1,2,3,0,1,2,3,0,1,2,3"}}
    with pytest.raises(ScenarioError) as error:
        TailStudy.from_dict({**data, "scenario": scenario, "routings": ["minimal", "adaptive"]}, str(example))
    key, message = error.value.problems[0]
    assert key == "routings[1]", error.value.problems
    assert message.startswith("with 'adaptive' the scenario is invalid: qos.sl2vl: SL2 maps to VL2"), message


# -- the engine config: one type, one producer ---------------------------------------------------

SCENARIOS = [
    {"traffic": [{"load": 0.5}]},
    {"topology": {"kind": "dragonfly-plus", "preset": "marconi100"}, "routing": {"algorithm": "adaptive",
     "flowlet_gap_us": 2}, "run": {"interference": True, "port_counters": True}},
    {"topology": {"kind": "xgft", "m": [4, 4], "w": [1, 2]},
     "jobs": [{"nodes": 4, "workload": {"kind": "ping-pong", "bytes": 8, "iterations": 1}}],
     "qos": {"sl2vl_pairs": [{"switch": 0, "in_port": 0, "out_port": 1, "sl2vl": [0] * 16}]}},
]


def _keys_match(value: typing.Any, hint: typing.Any, where: str) -> None:
    """`value` has every required key of TypedDict `hint`, optional ones only as declared, no others."""
    if typing.is_typeddict(hint):
        assert isinstance(value, dict), where
        required, optional = hint.__required_keys__, hint.__optional_keys__
        assert required <= value.keys() <= required | optional, (where, sorted(value), sorted(required | optional))
        hints = typing.get_type_hints(hint)
        for key, item in value.items():
            _keys_match(item, hints[key], f"{where}.{key}")
    elif typing.get_origin(hint) is list and value:
        for i, item in enumerate(value):
            _keys_match(item, typing.get_args(hint)[0], f"{where}[{i}]")
    elif typing.get_origin(hint) in (typing.Union, __import__("types").UnionType):
        kinds = [h for h in typing.get_args(hint) if typing.is_typeddict(h)]
        if kinds and isinstance(value, dict):
            (match,) = [h for h in kinds if typing.get_type_hints(h)["kind"].__args__ == (value["kind"],)]
            _keys_match(value, match, where)


@pytest.mark.parametrize("data", SCENARIOS)
def test_the_engine_config_has_the_shape_of_its_type(data):
    s = Scenario(**data)
    config = engine_config(s)
    assert config == s.to_engine_config()
    _keys_match(config, EngineConfig, "config")


def test_the_encoding_is_plain_json_in_the_producers_key_order():
    config = engine_config(Scenario(traffic=[{"load": 0.5}]))
    text = simulate.encode(config)
    assert text.startswith('{"seed": 1, "fabric": {"link_gbps": 100.0, "link_latency_ns": 20.0')
    assert list(config) == ["seed", "fabric", "topology", "routing", "qos", "traffic", "run", "jobs", "mpi"]
