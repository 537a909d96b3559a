"""Arbitration granularity made visible: what VLArb weights give at the fabric's MTU (the closed
form against a reference round robin and hand arithmetic), the warnings when weights collapse,
`qoslab check --json`, and weights stated as shares (against exhaustive search)."""

from __future__ import annotations

import copy
import dataclasses
import itertools
import json
import math
import random

import pytest
from qoslab import validation
from qoslab.cli import app
from qoslab.errors import ScenarioError
from qoslab.policies import PerJob, PolicyContext, Search, VlMapping
from qoslab.policies.arbitration import Arbitration
from qoslab.scenario import Scenario
from qoslab.study.model import Study
from qoslab.vlarb import (
    CREDIT_BYTES,
    MAX_ENTRY_WEIGHT,
    OUTSIDE_SL0,
    Granularity,
    collapses,
    effective_shares,
    high_packets_per_low_packet,
    realise_shares,
    round_packets,
)
from typer.testing import CliRunner

HEADER = 26
SAVOIE = [2286, 254, 9, 1]


def credits(mtu: int, header: int = HEADER) -> int:
    return math.ceil((mtu + header) / CREDIT_BYTES)


def reference_served(entries: list[tuple[int, int]], credits: int, packets: int) -> dict[int, int]:
    """The engine's weighted round robin written as a plain loop (vl_arbiter.rs, reference_pick):
    every VL always ready, each packet `credits` credits; packets served per VL."""
    served = {vl: 0 for vl, _ in entries}
    index, used = 0, 0
    for _ in range(packets):
        while used >= entries[index][1]:  # the entry's weight is spent: the next one, afresh
            index, used = (index + 1) % len(entries), 0
        served[entries[index][0]] += 1
        used += credits
    return served


# -- the closed form --------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(20))
def test_effective_shares_match_a_reference_round_robin(seed):
    rng = random.Random(seed)
    entries = [(rng.randrange(4), rng.randint(1, MAX_ENTRY_WEIGHT)) for _ in range(rng.randint(1, 64))]
    c = credits(rng.choice([256, 512, 1024, 2048, 4096]), rng.randint(0, 100))
    per_round = round_packets(entries, c)
    rounds = 7
    served = reference_served(entries, c, rounds * sum(per_round.values()))
    assert served == {vl: rounds * n for vl, n in per_round.items()}
    shares = effective_shares(entries, c)
    assert shares == pytest.approx({vl: served[vl] / sum(served.values()) for vl in served})


def test_savoie_weights_by_hand():
    # The per-job policy writes 2286 as 9 entries of 254; an entry sends ceil(254 / credits).
    entries = Arbitration(weights=SAVOIE).qos()["vlarb_low"]
    for mtu in (4096, 2048, 1024, 512, 256):
        c = credits(mtu)
        by_hand = {0: 9 * math.ceil(254 / c), 1: math.ceil(254 / c), 2: math.ceil(9 / c), 3: 1}
        assert round_packets(entries, c) == by_hand
    c = credits(4096)
    assert c == math.ceil(4122 / 64)
    assert effective_shares(entries, c) == pytest.approx({0: 36 / 42, 1: 4 / 42, 2: 1 / 42, 3: 1 / 42})


def test_high_limit_in_packets():
    wire = 4096 + HEADER
    assert high_packets_per_low_packet(255, wire) is None  # unbounded
    assert high_packets_per_low_packet(0, wire) == 1  # "one packet"
    assert high_packets_per_low_packet(4, wire) == math.ceil(4 * 4096 / wire)
    assert high_packets_per_low_packet(4, 2048) == 8


def test_collapses_name_the_vls_whose_weights_differ():
    entries = Arbitration(weights=SAVOIE).qos()["vlarb_low"]
    found = collapses(entries, credits(4096))
    assert [c.vls for c in found] == [(2, 3)]
    message = found[0].message("the low table", Granularity(4096, HEADER))
    assert message.startswith("VL2 (weight 9) and VL3 (weight 1) both get 1 packet per round of the low table")
    assert f"({100 / 42:.3g}% each" in message and "MTU 4096" in message and "collapse" in message
    assert collapses(entries, credits(256)) == []  # 2 packets against 1
    assert collapses([(0, 255), (1, 255)], credits(4096)) == []  # equal weights are not a collapse
    three = collapses([(0, 1), (1, 8), (2, 64)], credits(4096))
    assert three[0].vls == (0, 1, 2) and "all get" in three[0].message("vlarb_low", Granularity(4096, HEADER))


def test_the_validation_tells_effective_from_nominal_shares():
    """The engine check (docs/validation.md) passes with the closed form and would fail with the
    shares the weights nominally promise."""
    checks = [c for c in validation.arbitration_granularity() if c.name.startswith("weights 2286:254:9:1 at MTU 4096")]
    assert len(checks) == len(SAVOIE) and all(c.ok for c in checks)
    nominal = [w / sum(SAVOIE) for w in SAVOIE]
    assert not any(dataclasses.replace(c, measured=n).ok for c, n in zip(checks, nominal))


# -- scenarios: check, check --json, run ----------------------------------------------------------


def scenario_file(tmp_path, qos: str, mtu: int = 4096):
    path = tmp_path / "s.toml"
    path.write_text(f'[fabric]\nmtu_bytes = {mtu}\n[topology]\nkind = "single-switch"\nhosts = 4\n{qos}\n'
                    '[[traffic]]\nhosts = [0]\ndestinations = [1]\nload = 0.1\n[run]\nduration_us = 5\nwarmup_us = 1\n')
    return path


def test_scenario_warnings_name_the_key_that_set_the_table():
    s = Scenario(qos={"vlarb_low": "0:9,1:1,2:255"})
    assert [w for w in s.qos_warnings() if "collapse" in w] == [
        (f"qos.vlarb_low: VL0 (weight 9) and VL1 (weight 1) both get 1 packet per round of vlarb_low "
         f"({100 / 6:.3g}% each of a saturated port) at MTU 4096: the weights collapse")]
    swe_only = Scenario(qos={"swe": {"vlarb_low": "0:9,1:1"}})
    assert [w.split(":")[0] for w in swe_only.arbitration_warnings()] == ["qos.swe.vlarb_low"]
    assert Scenario(fabric={"mtu_bytes": 256}, qos={"vlarb_low": "0:9,1:1"}).arbitration_warnings() == []
    assert Scenario().arbitration_warnings() == []


def test_check_json_describes_the_fabric_and_the_arbitration(tmp_path):
    path = scenario_file(tmp_path, '[qos]\nvlarb_low = "0:254,0:254,1:254,2:9,3:1"\n[qos.ca]\nvlarb_high = "1:10"\nhigh_limit = 4')
    result = CliRunner().invoke(app, ["check", str(path), "--json"])
    assert result.exit_code == 0, result.output
    text = result.stdout
    document = json.loads(text)
    assert document["valid"] and document["fabric"]["hosts"] == 4
    assert document["qos"]["ca"]["vlarb_high"] == [[1, 10]] and document["qos"]["swe"]["high_limit"] == 0
    arb = document["vl_arbitration"]
    assert arb["packet_credits"] == credits(4096)
    low = {row["vl"]: row for row in arb["swe"]["vls"]}
    per_round = [2 * math.ceil(254 / 65), math.ceil(254 / 65), 1, 1]
    for vl, n in enumerate(per_round):
        assert low[vl]["low_packets_per_round"] == n
        assert low[vl]["effective_low_share"] == pytest.approx(n / sum(per_round))
    assert [low[vl]["low_weight"] for vl in range(4)] == [508, 254, 9, 1]
    ca = {row["vl"]: row for row in arb["ca"]["vls"]}
    assert ca[1]["high_weight"] == 10 and ca[1]["effective_high_share"] == 1.0 and ca[0]["effective_high_share"] == 0
    assert arb["ca"]["high_packets_per_low_packet"] == math.ceil(4 * 4096 / 4122)
    assert arb["swe"]["high_packets_per_low_packet"] is None
    assert any("VL2 (weight 9) and VL3 (weight 1)" in w for w in document["warnings"])


def test_check_and_run_print_the_collapse_and_the_table(tmp_path):
    path = scenario_file(tmp_path, '[qos]\nvlarb_low = "0:9,1:1,2:255,3:255"')
    check = CliRunner().invoke(app, ["check", str(path)])
    assert check.exit_code == 0, check.output
    assert "warning: qos.vlarb_low: VL0 (weight 9) and VL1 (weight 1) both get 1 packet" in check.output
    assert "VL arbitration at MTU 4096" in check.output
    run = CliRunner().invoke(app, ["run", str(path), "--out", str(tmp_path / "out")])
    assert run.exit_code == 0, run.output
    assert "VL0 (weight 9) and VL1 (weight 1)" in run.output
    quiet = CliRunner().invoke(app, ["check", str(scenario_file(tmp_path, '[qos]\nvlarb_low = "0:9,1:1"', mtu=256))])
    assert quiet.exit_code == 0 and "collapse" not in quiet.output


# -- shares ----------------------------------------------------------------------------------------


def brute_force(shares: list[float], per_entry: int, max_entries: int) -> list[float]:
    """The sorted (largest first) relative errors of the lexicographically best table, found by
    trying every count of packets per VL that fits."""
    best = None
    ranges = [range(1, per_entry * max_entries + 1)] * len(shares)
    for counts in itertools.product(*ranges):
        if sum(math.ceil(n / per_entry) for n in counts) > max_entries:
            continue
        total = sum(counts)
        errors = sorted((abs(n / total - s) / s for n, s in zip(counts, shares)), reverse=True)
        if best is None or [round(e, 9) for e in errors] < [round(e, 9) for e in best]:
            best = errors
    assert best is not None
    return best


@pytest.mark.parametrize("seed", range(12))
def test_shares_are_realised_as_well_as_any_table_can(seed):
    rng = random.Random(seed)
    # Small tables (routing layers share the 64 entries) so that every table can be tried.
    mtu = rng.choice([2048, 4096])
    granularity = Granularity(mtu, HEADER, rng.choice([8, 16]) if mtu == 4096 else 16)
    raw = [rng.random() ** 2 + 0.01 for _ in range(rng.randint(2, 3))]
    shares = [r / sum(raw) for r in raw]
    realised = realise_shares(dict(enumerate(shares)), granularity)
    assert len(realised.entries) <= granularity.max_entries
    assert all(0 < w <= MAX_ENTRY_WEIGHT for _, w in realised.entries)
    errors = sorted(realised.errors(dict(enumerate(shares))).values(), reverse=True)
    assert errors == pytest.approx(brute_force(shares, granularity.packets_per_entry, granularity.max_entries), abs=1e-9)
    assert realised.shares == pytest.approx(effective_shares(realised.entries, granularity.credits))


def test_savoie_shares_by_mtu():
    shares = {0: 0.9, 1: 0.09, 2: 0.009, 3: 0.001}
    small = realise_shares(shares, Granularity(256, HEADER))
    assert small.error == pytest.approx(0, abs=1e-12) and small.shares == pytest.approx(shares)
    # Each entry is weighted packets x credits, so smaller packets are weighted by bytes too.
    assert all(w % credits(256) == 0 for _, w in small.entries)
    big = realise_shares(shares, Granularity(4096, HEADER))
    # VL3 can get no less than one packet in the largest round 64 entries hold.
    assert big.shares[3] >= 1 / (64 * math.ceil(255 / credits(4096)))
    with pytest.raises(ValueError, match="cannot be realised at MTU 4096.*VL3 gets"):
        Arbitration(shares=list(shares.values())).realise(Granularity(4096, HEADER))
    ok = Arbitration(shares=list(shares.values())).realise(Granularity(1024, HEADER))
    assert ok.error <= 0.1


def context(mtu: int | None) -> PolicyContext:
    return PolicyContext(repetition=0, seed=1, jobs=["a", "b"], ranks={"a": 2, "b": 2}, qos_vls=4,
                         granularity=None if mtu is None else Granularity(mtu, HEADER))


def test_policies_with_shares_program_the_realised_tables():
    scenario = {"jobs": [{"name": "a", "hosts": [0]}, {"name": "b", "hosts": [1]}]}
    policy = PerJob(kind="per-job", assignment={"a": 0, "b": 1}, shares=[0.6, 0.3, 0.1])
    out = policy.apply(scenario, context(4096))
    low = [tuple(e) for e in out["qos"]["vlarb_low"]]
    assert effective_shares(low, credits(4096)) == pytest.approx({0: 0.6, 1: 0.3, 2: 0.1})
    assert "realised at MTU 4096 as VL0 60%, VL1 30%, VL2 10%" in policy.describe(Granularity(4096, HEADER))
    with pytest.raises(ValueError, match="MTU"):
        policy.apply(scenario, context(None))
    mapping = VlMapping(kind="vl-mapping", shares=[0.75, 0.25])
    assert mapping.arbitration(None).qos(Granularity(4096, HEADER))["vlarb_low"] == [[0, 195], [1, 65]]
    search = Search(kind="search", share_sets=[[0.5, 0.5], [0.8, 0.2]])
    assert search.weight_sets == []  # only shares given: no implicit "equal" set
    assert search.space_size(2, 4) == 2 + 4  # equal shares: VLs interchangeable
    candidate = search.candidate(((0, 1), 1), ["a", "b"], 4)
    assert candidate.shares == [0.8, 0.2] and candidate.label().endswith("s=0.8:0.2]")


def test_weights_keep_their_tables_and_names():
    # Stored studies resume by run id: weights must program exactly what they did before.
    policy = PerJob(kind="per-job", assignment={"a": 0})
    assert policy.weights == SAVOIE
    assert policy.arbitration().qos()["vlarb_low"][:4] == [[0, 254], [1, 254], [2, 9], [3, 1]]
    assert "weights 2286:254:9:1 (a saturated port at MTU 4096: VL0 85.7%, VL1 9.52%, VL2 2.38%, VL3 2.38%)" \
        in policy.describe(Granularity(4096, HEADER))


# -- studies -------------------------------------------------------------------------------------

SCENARIO = {"topology": {"kind": "single-switch", "hosts": 8},
            "jobs": [{"name": "a", "nodes": 2, "workload": {"kind": "ping-pong"}},
                     {"name": "b", "nodes": 2, "workload": {"kind": "ping-pong"}}]}


def study(policies, mtu: int = 4096) -> Study:
    scenario = copy.deepcopy(SCENARIO)
    scenario["fabric"] = {"mtu_bytes": mtu}
    return Study.from_dict({"scenario": scenario, "policies": policies}, "study.toml")


def test_study_warns_when_a_policy_leaves_a_vl_carrying_traffic_without_weight():
    jobs = [job["name"] for job in SCENARIO["jobs"]]
    starving = study([{"kind": "per-job", "assignment": {jobs[1]: 1}, "weights": [255, 0]}])
    assert starving.warnings() == [
        f"policies[0] (per-job[{jobs[1]}=1]), weights: job {jobs[1]!r} on SL1, which maps to VL1, and VL1 has no "
        "weight in either VLArb table: that traffic is never sent (a job on it cannot finish), and qoslab export "
        "opensm refuses such tables"]
    # A level without weight that no job is put on is not warned about; every assignment may use any level.
    assert study([{"kind": "per-job", "assignment": {jobs[1]: 0}, "weights": [255, 0]}]).warnings() == []
    every = study([{"kind": "per-job", "assignment": "all", "weights": [255, 255, 255, 0]}]).warnings()
    assert len(every) == 1 and "any job it puts there on SL3" in every[0]
    # The baseline runs the scenario's own tables with every job on SL 0.
    scenario = {**copy.deepcopy(SCENARIO), "qos": {"vlarb_low": "1:64"}}
    baseline = Study.from_dict({"scenario": scenario, "policies": [{"kind": "per-job", "assignment": {jobs[0]: 1}}]},
                               "study.toml").warnings()
    assert [w for w in baseline if "no weight" in w] == [
        f"policy default (the scenario's [qos]), qos.{port}: job 'a', job 'b', {OUTSIDE_SL0} on SL0, which maps to "
        "VL0, and VL0 has no weight in either VLArb table: that traffic is never sent (a job on it cannot finish), "
        "and qoslab export opensm refuses such tables" for port in ("ca", "swe")]
    # No job on SL 0, but on a cluster everything else is: such a policy cannot be deployed, and the
    # export refused it while the study had said nothing (the default choice then failed on it).
    off_sl0 = study([{"kind": "per-job", "assignment": {jobs[0]: 1, jobs[1]: 2}, "weights": [0, 255, 1]}])
    assert [w for w in off_sl0.warnings() if "no weight" in w] == [
        f"policies[0] (per-job[{jobs[0]}=1 {jobs[1]}=2]), weights: {OUTSIDE_SL0} on SL0, which maps to VL0, and VL0 has "
        "no weight in either VLArb table: that traffic is never sent (a job on it cannot finish), and qoslab export "
        "opensm refuses such tables"]


def test_study_warns_when_a_policys_weights_collapse():
    s = study([{"kind": "per-job", "assignment": "all"}, {"kind": "search", "weight_sets": ["equal", [254, 9, 1]]}])
    assert s.warnings() == [
        (f"policies[0] (per-job[all]), weights: VL2 (weight 9) and VL3 (weight 1) both get 1 packet per round of "
         f"the low table ({100 / 42:.3g}% each of a saturated port) at MTU 4096: the weights collapse"),
        (f"policies[1] (q-opt), weight_sets[1]: VL1 (weight 9) and VL2 (weight 1) both get 1 packet per round of "
         f"the low table ({100 / 6:.3g}% each of a saturated port) at MTU 4096: the weights collapse")]
    assert study([{"kind": "per-job", "assignment": "all"}], mtu=256).warnings() == []
    # An assignment that puts no traffic on VL2 or VL3: their collapse tells no jobs apart, no warning;
    # one that puts jobs on both is warned about.
    jobs = [job["name"] for job in SCENARIO["jobs"]]
    assert study([{"kind": "per-job", "assignment": {jobs[0]: 1}}]).warnings() == []
    both = study([{"kind": "per-job", "assignment": {jobs[0]: 2, jobs[1]: 3}}]).warnings()
    assert len(both) == 1 and "VL2 (weight 9) and VL3 (weight 1)" in both[0]
    # Open-loop traffic on SL3 shares VL3 with whatever the policy puts on VL2: warned again.
    scenario = {**copy.deepcopy(SCENARIO), "traffic": [{"load": 0.1, "sl": 3}]}
    with_traffic = Study.from_dict({"scenario": scenario, "policies": [{"kind": "per-job", "assignment": {jobs[1]: 2}}]},
                                   "study.toml").warnings()
    assert any("VL2 (weight 9) and VL3 (weight 1)" in w for w in with_traffic)
    # The scenario's own tables are the default policy's.
    base = copy.deepcopy(SCENARIO)
    base["qos"] = {"vlarb_low": "0:9,1:1"}
    s = Study.from_dict({"scenario": base, "policies": [{"kind": "default"}]}, "study.toml")
    assert s.warnings()[0].startswith("policy default (the scenario's [qos]): qos.vlarb_low: VL0 (weight 9)")


@pytest.mark.parametrize(
    "policy, key, words",
    [
        ({"kind": "per-job", "assignment": {}, "shares": [0.9, 0.09, 0.009, 0.001]}, "policies[0].shares",
         "cannot be realised at MTU 4096"),
        ({"kind": "per-job", "assignment": {}, "shares": [90, 10]}, "policies[0].shares", "not percentages"),
        ({"kind": "per-job", "assignment": {}, "shares": [0.5, 0.4]}, "policies[0].shares", "summing to 1"),
        ({"kind": "per-job", "assignment": {}, "shares": [1.1, -0.1]}, "policies[0].shares", "got -0.1 for VL1"),
        ({"kind": "per-job", "assignment": {}, "shares": [0.5, 0.5], "weights": [1, 1]}, "policies[0].shares",
         "not both"),
        ({"kind": "per-message", "shares": [0.5, 0.5]}, "policies[0].shares", "high = []"),
        ({"kind": "per-rank", "job": "a", "shares": [1.0]}, "policies[0].shares", "at least 2"),
        ({"kind": "per-job", "assignment": {}, "shares": [0.5, 0.5], "share_tolerance": 0}, "policies[0].share_tolerance",
         "greater than 0"),
        ({"kind": "vl-mapping", "shares": [0.999, 0.001]}, "policies[0].shares", "cannot be realised"),
        ({"kind": "vl-mapping", "shares": [0.5, 0.5], "weights": [1, 1]}, "policies[0].shares", "not both"),
        ({"kind": "search", "share_sets": [[0.5, 0.6]]}, "policies[0].share_sets[0]", "summing to 1"),
        ({"kind": "search", "share_sets": [[0.999, 0.001]]}, "policies[0].share_sets[0]", "cannot be realised"),
        ({"kind": "search", "weight_sets": [[1, 2]], "share_sets": [[0.2, 0.3, 0.5]]}, "policies[0].share_sets",
         "same number"),
    ],
)
def test_bad_shares_are_refused_naming_the_key(policy, key, words):
    with pytest.raises(ScenarioError) as caught:
        study([policy])
    text = str(caught.value)
    assert f"study.toml: {key}: " in text and words in text, text


def test_cli_study_plan_prints_the_warning(tmp_path):
    (tmp_path / "base.toml").write_text('[topology]\nkind = "single-switch"\nhosts = 8\n'
                                        '[[jobs]]\nname = "a"\nnodes = 2\nworkload = { kind = "ping-pong" }\n'
                                        '[[jobs]]\nname = "b"\nnodes = 2\nworkload = { kind = "ping-pong" }\n')
    path = tmp_path / "s.toml"
    path.write_text('scenario = "base.toml"\n[[policies]]\nkind = "per-job"\nassignment = { a = 2, b = 3 }\n')
    result = CliRunner().invoke(app, ["study", str(path), "--plan", "--out", str(tmp_path / "plan")])
    assert result.exit_code == 0, result.output
    assert "warning: policies[0] (per-job[a=2 b=3]), weights: VL2 (weight 9) and VL3 (weight 1)" in result.output


def test_study_json_and_report_carry_the_warning_and_the_shares(tmp_path):
    from qoslab.study.runner import StudyRunner
    from qoslab.sweep.executors import LocalExecutor

    s = study([{"kind": "per-job", "assignment": {"a": 1, "b": 2}, "weights": [254, 9, 1]},
               {"kind": "per-job", "name": "by-shares", "assignment": {"a": 0, "b": 1}, "shares": [0.75, 0.25]}])
    StudyRunner(s, tmp_path, LocalExecutor(1), progress=False).run()
    meta = json.loads((tmp_path / "study.json").read_text())
    assert meta["warnings"] == s.warnings() and "VL1 (weight 9) and VL2 (weight 1)" in meta["warnings"][0]
    described = {p["name"]: p["description"] for p in meta["policies"]}
    assert f"VL0 {400 / 6:.3g}%, VL1 {100 / 6:.3g}%, VL2 {100 / 6:.3g}%" in described["per-job[a=1 b=2]"]  # 4:1:1
    assert "realised at MTU 4096 as VL0 75%, VL1 25%" in described["by-shares"]
    report = (tmp_path / "report.html").read_text()
    assert "VL1 (weight 9) and VL2 (weight 1) both get 1 packet" in report
