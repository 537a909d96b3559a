"""[congestion_control] from the scenario to the engine and back out (issue 17). The mechanism's
closed forms are the engine's tests (crates/qoslab-engine/tests/congestion_control.rs); here: the
table reaches the engine as config_cc.rs reads it, off changes nothing (not even run ids), the run
reports what CC did, and export/import carry it to OpenSM and back."""

from pathlib import Path

import pytest
from qoslab import Scenario, simulate
from qoslab.cli import app
from qoslab.engine_config import engine_config
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
