"""[congestion_control] in OpenSM's vocabulary (issue 17, its configuration; the mechanism is not
simulated yet): checked as the hardware fields hold them, written in OpenSM's exact syntax, read
back by OpenSM's own rules, and the real OpenSM parses what qoslab writes into the same settings."""

import shutil
import subprocess
from pathlib import Path

import pytest
from pydantic import ValidationError
from qoslab.errors import from_validation_error
from qoslab.io.opensm import OpenSmConfError, parse_opensm_conf
from qoslab.io.opensm_cc import cc_lines
from qoslab.scenario_cc import CongestionControl, mellanox_default_cct

SETTINGS = {"enabled": True, "sw_cong_setting_victim_mask": [1, 2, 36], "sw_cong_setting_threshold": 0xC,
            "sw_cong_setting_packet_size": 8, "sw_cong_setting_marking_rate": 3, "ca_cong_setting_port_control": 1,
            "ca_cong_setting_control_map": 0b1011, "ca_cong_setting_ccti_timer": {"0": 20, "1": 30, "3": 40},
            "ca_cong_setting_ccti_increase": 2, "ca_cong_setting_ccti_min": {"3": 4}, "cct": "0:0,1:3,2:9,3:100,0:57"}


def fields(cc: CongestionControl, sls) -> dict:
    data = cc.model_dump()
    for key in [k for k in data if k.startswith("ca_cong_setting_") and isinstance(data[k], list)]:
        data[key] = [data[key][sl] for sl in sls]  # only the SLs control_map names reach the CAs
    return data


def conf(cc: CongestionControl) -> str:
    return "qos TRUE\n" + "\n".join(cc_lines(cc)) + "\n"


def test_export_then_import_gives_the_same_settings():
    cc = CongestionControl.model_validate(SETTINGS)
    back = parse_opensm_conf(conf(cc), "opensm.conf")
    assert back.congestion_control is not None
    again = CongestionControl.model_validate(back.congestion_control)
    assert fields(again, cc.controlled_sls()) == fields(cc, cc.controlled_sls())
    # Whole, too: the SLs outside the control map, which the export leaves out, come back at
    # qoslab's defaults (they had come back 0, so the round trip changed the scenario's hash).
    assert again == cc


@pytest.mark.skipif(shutil.which("opensm") is None and not Path("/usr/sbin/opensm").exists(),
                    reason="OpenSM is not installed (scripts/install-ib-tools)")
def test_the_real_opensm_reads_what_qoslab_writes(tmp_path):
    cc = CongestionControl.model_validate(SETTINGS)
    (tmp_path / "qoslab.conf").write_text(conf(cc))
    opensm = shutil.which("opensm") or "/usr/sbin/opensm"
    # -F reads the file, -c writes back everything OpenSM parsed (then it exits): OpenSM's own reading.
    subprocess.run([opensm, "-F", str(tmp_path / "qoslab.conf"), "-c", str(tmp_path / "dumped.conf")],
                   capture_output=True, timeout=30, check=True)
    dumped = parse_opensm_conf((tmp_path / "dumped.conf").read_text(), "dumped.conf")
    assert dumped.congestion_control is not None
    again = CongestionControl.model_validate(dumped.congestion_control)
    assert fields(again, cc.controlled_sls()) == fields(cc, cc.controlled_sls())


def test_off_writes_only_that():
    assert cc_lines(CongestionControl()) == ["congestion_control FALSE"]
    assert parse_opensm_conf("qos TRUE\ncongestion_control FALSE\n").congestion_control is None


@pytest.mark.parametrize(("line", "words"), [
    ("cc_sw_cong_setting_packet_size 300", "cc_sw_cong_setting_packet_size: expected 0..255, got 300"),
    ("cc_sw_cong_setting_victim_mask 0xZZ", "expected a hex mask"),
    ("cc_ca_cong_setting_ccti_timer 16 10", "SL: expected 0..15, got 16"),
    ("cc_ca_cong_setting_ccti_timer 3", "expected '<sl> <value>'"),
    ("cc_cct 0:1,2", "cc_cct: expected shift:multiplier, got '2'"),
    ("cc_sw_cong_setting_marking_rate 70000", "expected 0..65535"),
])
def test_what_opensm_would_ignore_is_refused_naming_the_line(line, words):
    with pytest.raises(OpenSmConfError) as caught:
        parse_opensm_conf(f"qos TRUE\ncongestion_control TRUE\n{line}\n", "site.conf")
    assert str(caught.value).startswith("site.conf:3:") and words in str(caught.value), str(caught.value)


@pytest.mark.parametrize(("line", "words"), [
    ("cc_sw_cong_setting_threshold 0x1F", "programs the low 4 bits (15)"),
    ("cc_sw_cong_setting_victim_mask 0x1" + "0" * 70, "OpenSM keeps the leading 64"),
    ("cc_cct " + ",".join(["0:1"] * 130), "keeps the first 128"),
    ("cc_cct 4:1", "the device gets 0:1"),
    ("cc_sw_cong_setting_packet_size 010", "octal (8)"),
    ("cc_ca_cong_setting_ccti_timer 5 10", "SL 5 set, but cc_ca_cong_setting_control_map leaves them out"),
])
def test_what_opensm_changes_is_a_warning(line, words):
    text = f"qos TRUE\ncongestion_control TRUE\ncc_ca_cong_setting_control_map 0x0001\n{line}\n"
    warnings = parse_opensm_conf(text, "site.conf").warnings
    assert any(words in w for w in warnings), warnings


def test_lower_case_true_is_off_as_opensm_reads_it():
    read = parse_opensm_conf("qos TRUE\ncongestion_control true\n", "site.conf")
    assert read.congestion_control is None and any("reads this as FALSE" in w for w in read.warnings)


@pytest.mark.parametrize(("settings", "key"), [
    ({"sw_cong_setting_threshold": 16}, "sw_cong_setting_threshold"),
    ({"sw_cong_setting_victim_mask": "0x8" + "0" * 63}, "sw_cong_setting_victim_mask"),  # bit 255: reserved
    ({"sw_cong_setting_victim_mask": "0x1" + "0" * 64}, "sw_cong_setting_victim_mask"),  # 257 bits
    ({"cct": [[0, 1]] * 129}, "cct"),
    ({"cct": "0:16384"}, "cct"),
    ({"ca_cong_setting_ccti_min": {"16": 1}}, "ca_cong_setting_ccti_min"),
    ({"enabled": True, "cct": []}, "cct"),
    ({"enabled": True, "ca_cong_setting_ccti_timer": 0}, "ca_cong_setting_ccti_timer"),
    ({"enabled": True, "cct": "0:1,0:2", "ca_cong_setting_ccti_min": 2}, "ca_cong_setting_ccti_min"),
])
def test_values_outside_the_hardware_fields_are_refused_naming_the_key(settings, key):
    with pytest.raises(ValidationError) as caught:
        CongestionControl.model_validate(settings)
    problems = from_validation_error(caught.value).problems  # as a scenario reports them: key, message
    assert [k for k, _ in problems] == [key], problems


def test_the_injection_delay_is_the_max_packet_time_shifted_times_the_multiplier():
    cc = CongestionControl.model_validate({"cct": "0:0,0:57,2:57,3:1"})
    packet_ns = (4096 + 26) * 8 / 100.0  # a maximum-size packet at 100 Gb/s: 329.76 ns
    assert [round(cc.injection_delay_ns(i, packet_ns), 3) for i in range(4)] == [0, 18796.32, 4699.08, 41.22]
    assert cc.injection_delay_ns(99, packet_ns) == cc.injection_delay_ns(3, packet_ns)  # capped at CCTI_Limit
    table = mellanox_default_cct()
    assert len(table) == 128 and table[16] == (0, 0) and table[17] == (0, 1) and table[127] == (0, 57)


def test_an_import_that_qoslab_would_refuse_or_that_marks_nothing_says_so():
    # congestion_control TRUE alone: OpenSM's defaults (no CCT, timers 0, switch control map 0).
    read = parse_opensm_conf("qos TRUE\ncongestion_control TRUE\ncc_ca_cong_setting_control_map 0x0001\n", "min.conf")
    assert any("without cc_cct" in w for w in read.warnings), read.warnings
    assert any("ccti_timer is 0 on SL 0" in w for w in read.warnings)
    assert any("bit 2 clear" in w for w in read.warnings)
    # Per-SL values come in whole, so that SLs OpenSM programs 0 stay 0 (a table by SL would give
    # the SLs it leaves out qoslab's defaults).
    read = parse_opensm_conf("qos TRUE\ncongestion_control TRUE\ncc_ca_cong_setting_control_map 0x0003\n"
                             "cc_ca_cong_setting_ccti_increase 1 3\n", "site.conf")
    # SLs outside the control map (ignored by CAs, left out by the export) take qoslab's defaults.
    assert read.congestion_control["ca_cong_setting_ccti_increase"] == [0, 3] + [1] * 14
    assert any("cc_ca_cong_setting_control_map is 0" in w for w in
               parse_opensm_conf("qos TRUE\ncongestion_control TRUE\ncc_cct 0:1\n", "site.conf").warnings)
