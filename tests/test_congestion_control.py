"""[congestion_control] from the scenario to the engine and back out (issue 17). The mechanism's
closed forms are the engine's tests (crates/qoslab-engine/tests/congestion_control.rs); here: the
table reaches the engine as config_cc.rs reads it, off changes nothing (not even run ids), the run
reports what CC did (per class, checked against the throttle's closed forms, and traced), and
export/import carry it to OpenSM and back."""

import json
import math
from pathlib import Path

import pytest
from qoslab import Scenario, simulate
from qoslab.cli import app
from qoslab.engine_config import engine_config
from qoslab.errors import ScenarioError
from typer.testing import CliRunner

GOLDEN = Path(__file__).parent / "golden" / "congestion-control" / "scenario.toml"


def test_off_is_absent_from_the_engine_config_and_the_resolved_scenario():
    scenario = Scenario.from_toml(GOLDEN).with_overrides(["congestion_control.enabled=false"])
    assert "congestion_control" not in engine_config(scenario)
    assert "congestion_control" not in scenario.resolved()  # run ids hash it: as before the table existed


def test_the_table_reaches_the_engine_as_it_reads_it():
    scenario = Scenario.from_toml(GOLDEN).with_overrides(["congestion_control.ca_cong_setting_control_map=0x0003"])
    cc = engine_config(scenario)["congestion_control"]
    assert cc["threshold"] == 12 and cc["packet_size_credits"] == 0 and cc["marking_rate"] == 0
    assert cc["victim_ports"] == [0, 1, 2, 3, 4, 5, 6, 7]  # Victim_Mask bit b is IB port b, local port b - 1
    assert cc["sl_based"] is True
    assert [s["enabled"] for s in cc["sls"]] == [True, True] + [False] * 14
    assert cc["sls"][0] == {"enabled": True, "ccti_timer": 4, "ccti_increase": 2, "ccti_min": 0, "trigger_threshold": 0}
    assert cc["cct"] == [[0, 0], [0, 1], [0, 2], [0, 4], [0, 8], [1, 32], [0, 32], [0, 64]]
    again = Scenario.from_dict(scenario.resolved())  # the resolved scenario is itself a valid scenario
    assert engine_config(again) == engine_config(scenario)


def test_a_table_by_sl_leaves_the_sls_it_does_not_list_at_their_default():
    # { 3 = 2 } had set every other SL's increase to 0: CC silently off on SL0, where the traffic is.
    scenario = Scenario.from_toml(GOLDEN).with_overrides(["congestion_control.ca_cong_setting_ccti_increase={ 3 = 2 }",
                                                          "congestion_control.ca_cong_setting_ccti_timer={ 0 = 10, 3 = 40 }"])
    cc = scenario.congestion_control
    assert cc.ca_cong_setting_ccti_increase == [1, 1, 1, 2] + [1] * 12
    assert cc.ca_cong_setting_ccti_timer == [10, 10, 10, 40] + [10] * 12  # the documented example is valid


def test_congestion_control_moves_the_hot_spot_queue_to_the_sources():
    """Eight saturating senders into one host: with CC the sources hold their packets back, so a
    packet's time in the fabric falls (measured: 23 µs against 35 µs mean) while the hot link stays
    busy (accepted load within 2%)."""
    base = Scenario.from_toml(GOLDEN).with_overrides(["run.duration_us=600"])
    on = simulate(base).summary
    off = simulate(base.with_overrides(["congestion_control.enabled=false"])).summary
    assert "congestion_control" not in off
    cc = on["congestion_control"]
    # one CNP per marked packet delivered: packets marked near the end are still on their way
    assert 0 < cc["cnp_packets"] <= cc["marks_root"] + cc["marks_victim"] and cc["max_ccti"] == 7
    hot_on, hot_off = on["by_traffic"][0], off["by_traffic"][0]
    assert hot_on["latency_ns"]["mean"] < 0.8 * hot_off["latency_ns"]["mean"]
    assert hot_on["accepted_load"] == pytest.approx(hot_off["accepted_load"], rel=0.02)


def test_export_writes_it_and_import_reads_it_back(tmp_path):
    exported = CliRunner().invoke(app, ["export", "opensm", str(GOLDEN), "--out", str(tmp_path / "conf")])
    assert exported.exit_code == 0, exported.output
    conf = (tmp_path / "conf" / "opensm.conf").read_text()
    assert "congestion_control TRUE" in conf and "cc_sw_cong_setting_threshold 0x0C" in conf
    imported = CliRunner().invoke(app, ["import", "opensm", str(tmp_path / "conf" / "opensm.conf")])
    assert imported.exit_code == 0, imported.output
    text = imported.output[imported.output.index("[congestion_control]"):]
    (tmp_path / "back.toml").write_text("[topology]\nkind = \"xgft\"\nm = [4, 4]\nw = [1, 2]\n" + text)
    back = Scenario.from_toml(tmp_path / "back.toml")
    assert engine_config(back)["congestion_control"] == engine_config(Scenario.from_toml(GOLDEN))["congestion_control"]


def test_off_writes_nothing_and_a_base_that_enables_it_is_warned_about(tmp_path):
    plain = tmp_path / "plain.toml"
    plain.write_text(GOLDEN.read_text().replace("enabled = true", "enabled = false"))
    base = tmp_path / "site.conf"
    base.write_text("congestion_control TRUE\ncc_sw_cong_setting_threshold 0x0F\nqos FALSE\n")
    done = CliRunner().invoke(app, ["export", "opensm", str(plain), "--out", str(tmp_path / "conf"), "--base", str(base)])
    assert done.exit_code == 0, done.output
    conf = (tmp_path / "conf" / "opensm.conf").read_text()
    assert "congestion_control TRUE" in conf and "congestion_control FALSE" not in conf  # the site's own, kept
    assert "simulated the policy without congestion control" in done.output


# -- what CC did, per class and traced (run.cc_trace) ---------------------------------------------

T_PS = 329_760  # a 4096 + 26-byte packet at 100 Gb/s
FIXED_CCT = [[0, 0], [0, 1], [1, 3], [2, 5], [3, 7], [3, 100]]


def _ird_ps(k: int) -> int:
    """IRD = (T_maxpkt >> shift) x multiplier (docs/design/congestion-control.md, [K1])."""
    shift, multiplier = FIXED_CCT[k]
    return (T_PS >> shift) * multiplier


def _held_at(k: int, **cc):
    """CC on with nothing marked (threshold 0) and every flow held at CCT index k (ccti_min = k)."""
    return {"enabled": True, "sw_cong_setting_threshold": 0, "ca_cong_setting_ccti_min": k, "cct": FIXED_CCT, **cc}


@pytest.mark.parametrize("k", range(len(FIXED_CCT)))
def test_a_flow_held_at_a_fixed_ccti_is_throttled_one_ird_per_packet(k):
    """One saturating flow of 1-packet messages at CCTI k: a packet starts every T + IRD from 0,
    so n = ceil(D / (T + IRD)) start in [0, D), and after each one the next waits exactly IRD."""
    duration_us = 200.0
    s = simulate(Scenario(topology={"kind": "single-switch", "hosts": 4},
                          traffic=[{"hosts": [0], "destinations": [1], "load": "saturate", "message_bytes": 4096}],
                          run={"duration_us": duration_us, "warmup_us": 0}, congestion_control=_held_at(k))).summary
    ird = _ird_ps(k)
    sent = math.ceil(duration_us * 1e6 / (T_PS + ird))
    t = s["by_traffic"][0]
    assert t["cc_throttle_ps"] == sent * ird
    assert t["fecn_marked_packets"] == 0 and t["becn_received"] == 0
    assert s["congestion_control"]["cnp_wire_bytes"] == 0


@pytest.mark.parametrize("k", [0, 1, 2, 5])
def test_a_job_is_throttled_where_the_gap_outlasts_its_round_trip(k):
    """A ping-pong of 8-byte messages at CCTI k: a rank's next send comes one round trip
    (2 x (ser + 2 link + switch)) after its last began, and must wait for ser + IRD; in each
    period one of the two ranks waits the difference (the other's reply then finds its own gap
    over), so the job is held (iterations - 1) x max(0, ser + IRD - round trip) in all."""
    iterations = 20
    s = simulate(Scenario(topology={"kind": "single-switch", "hosts": 2},
                          jobs=[{"name": "pp", "nodes": 2,
                                 "workload": {"kind": "ping-pong", "bytes": 8, "iterations": iterations}}],
                          congestion_control=_held_at(k))).summary
    ser = (8 + 26) * 80
    round_trip = 2 * (ser + 2 * 20_000 + 100_000)
    held = max(0, ser + _ird_ps(k) - round_trip)
    network = s["jobs"]["pp"]["network"]
    assert network["cc_throttle_ps"] == (iterations - 1) * held
    assert s["jobs"]["pp"]["runtime_us"] * 1e6 == pytest.approx((iterations - 1) * max(round_trip, ser + _ird_ps(k))
                                                                + round_trip, abs=1)
    assert k in (0, 2, 5) or held > 0  # index 1 (one packet time) already outlasts this round trip


def test_marks_cnps_and_becns_add_up_and_the_trace_holds_every_one(tmp_path):
    """An incast job into one host marks at that host's switch port. The run ends when the job
    has completed, so every marked packet was delivered (marks = CNPs) and what is still in
    flight is CNPs (BECNs received = CNPs less those); each CNP is one 26-byte header on the wire.
    The trace tables list every mark, every BECN and every CCTI change."""
    scenario = Scenario(topology={"kind": "single-switch", "hosts": 8},
                        jobs=[{"name": "incast", "nodes": 8, "workload": {"kind": "gpcnet-incast"}}],
                        run={"cc_trace": True},
                        congestion_control={"enabled": True, "ca_cong_setting_ccti_timer": 2,
                                            "cct": "0:0,0:1,0:2,0:4,0:8,0:16"})
    result = simulate(scenario)
    s = result.summary
    cc, network = s["congestion_control"], s["jobs"]["incast"]["network"]
    marks = cc["marks_root"] + cc["marks_victim"]
    assert marks > 100 and network["fecn_marked_packets"] == marks
    assert cc["cnp_packets"] == marks
    assert network["becn_received"] == cc["cnp_packets"] - s["conservation"]["packets_in_flight"]
    assert network["cc_throttle_ps"] > 0
    assert cc["cnp_wire_bytes"] == 26 * cc["cnp_packets"]  # none left queued at an HCA
    table = result.cc_marks
    assert table.num_rows == marks and table.column("becn_ps").null_count == marks - network["becn_received"]
    assert set(table.column("dst").to_pylist()) == {0} and not any(table.column("victim").to_pylist())
    # Each CCTI change is one step of one flow: +1 (ccti_increase) on a BECN, -1 on its timer.
    ccti = result.ccti.to_pylist()
    last: dict[tuple[int, int, int], int] = {}
    for row in ccti:
        flow = (row["host"], row["sl"], row["lane"])
        assert abs(row["ccti"] - last.get(flow, 0)) == 1, row
        last[flow] = row["ccti"]
    assert max(r["ccti"] for r in ccti) == cc["max_ccti"]
    written = result.save(tmp_path)
    assert (written / "ccti.parquet").exists() and (written / "cc_marks.parquet").exists()
    assert "ccti.parquet" in result.written() and "cc_marks.parquet" in result.written()


def test_cc_outputs_are_absent_with_cc_off_and_tracing_it_then_is_refused():
    scenario = Scenario.from_toml(GOLDEN).with_overrides(["congestion_control.enabled=false", "run.duration_us=50"])
    result = simulate(scenario)
    assert all(key not in entry for entry in result.summary["by_traffic"]
               for key in ("fecn_marked_packets", "becn_received", "cc_throttle_ps"))
    assert result.ccti is None and result.cc_marks is None
    assert "cc_trace" not in scenario.resolved()["run"]
    with pytest.raises(ScenarioError) as error:
        scenario.with_overrides(["run.cc_trace=true"])
    assert "run.cc_trace" in str(error.value) and "congestion_control.enabled" in str(error.value)


def test_tracing_changes_nothing_but_the_tables():
    base = Scenario.from_toml(GOLDEN).with_overrides(["run.duration_us=60"])
    plain, traced = simulate(base), simulate(base.with_overrides(["run.cc_trace=true"]))
    for key in ("by_traffic", "congestion_control", "conservation", "packet_hops"):
        assert plain.summary[key] == traced.summary[key]
    assert plain.ccti is None and traced.ccti is not None and traced.ccti.num_rows > 0
    assert "trace" not in engine_config(base)["congestion_control"]


def test_qoslab_run_prints_the_congestion_control_table_only_when_it_is_on(tmp_path):
    done = CliRunner().invoke(app, ["run", str(GOLDEN), "--out", str(tmp_path / "on")], env={"COLUMNS": "200"})
    assert done.exit_code == 0, done.output
    summary = json.loads((tmp_path / "on" / "summary.json").read_text())
    assert "congestion control (whole run)" in done.output
    # each class's row carries the summary's own counts, the throttled time in microseconds
    for i, figures in enumerate(summary["by_traffic"]):
        row = next(line for line in done.output.splitlines() if f"traffic[{i}]" in line)
        cells = [cell.strip() for cell in row.split("│")[1:-1]]
        assert cells == [f"traffic[{i}]", f"{figures['fecn_marked_packets']:,}", f"{figures['becn_received']:,}",
                         f"{figures['cc_throttle_ps'] / 1e6:.3g}"]
    assert f"CNPs {summary['congestion_control']['cnp_packets']:,}" in done.output
    off = CliRunner().invoke(app, ["run", str(GOLDEN), "--out", str(tmp_path / "off"),
                                   "--set", "congestion_control.enabled=false"])
    assert off.exit_code == 0, off.output
    assert "congestion control" not in off.output


def test_a_clear_control_map_bit_leaves_the_switch_at_its_reset_value():
    # Bit 2 clear: the threshold is not sent and stays 0 (no marking); bits 0 and 4 likewise for
    # the victim mask and the marking rate. The export writes the map as given, so the simulation
    # must do what the switches then do: it had marked as if every field were sent.
    base = Scenario.from_toml(GOLDEN)
    cleared = base.with_overrides(["congestion_control.sw_cong_setting_control_map=0x0"])
    cc = engine_config(cleared)["congestion_control"]
    assert (cc["threshold"], cc["packet_size_credits"], cc["marking_rate"], cc["victim_ports"]) == (0, 0, 0, [])
    marks = simulate(cleared).summary["congestion_control"]
    assert (marks["marks_root"], marks["marks_victim"], marks["cnp_packets"]) == (0, 0, 0)
    assert simulate(base).summary["congestion_control"]["marks_root"] > 0
    assert any("bit 2 (threshold and packet size) is clear" in w for w in cleared.warnings())
    assert engine_config(base)["congestion_control"]["threshold"] == base.congestion_control.sw_cong_setting_threshold
    starving = base.with_overrides(["congestion_control.sw_cong_setting_credit_starvation_threshold=15"])
    assert any("credit starvation is not modelled" in w for w in starving.warnings())
    assert not any("congestion_control" in w for w in base.warnings())
    # A study that sweeps CC on from a base where it is off is told of the settings too.
    from qoslab.study.model import Study

    off = {**base.given(), "congestion_control": {**base.given()["congestion_control"], "enabled": False,
                                                  "sw_cong_setting_control_map": 0x1B},
           "jobs": [{"name": "pp", "nodes": 2, "workload": {"kind": "ping-pong"}}]}
    study = Study.from_dict({"scenario": off, "policies": [{"kind": "default"}],
                             "sweep": [{"key": "congestion_control.enabled", "values": [False, True]}]}, "study.toml")
    assert any("bit 2 (threshold and packet size) is clear" in w for w in study.warnings())
