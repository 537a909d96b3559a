"""Congestion control through the real OpenSM (issue 17): a scenario with congestion control on
exported by `qoslab export opensm`, read by OpenSM, and sent as congestion-control MADs to the
switches and HCAs of an ibsim fabric, decoded from ibsim's packet dump. ibsim itself has no
congestion-control agent (test_ibsim_has_no_congestion_control_agent); docs/design/
congestion-control.md, section 5, says what that leaves checkable. The tools run through
ib_harness.py, as in test_real_tools.py."""

from __future__ import annotations

import re

import pytest
import qoslab
from ib_harness import Fabric, export_to_ibsim, lids, requires_ib_tools, sl2vl_rows

pytestmark = requires_ib_tools

SCENARIO = {
    "seed": 3,
    "fabric": {"data_vls": 4},
    "topology": {"kind": "xgft", "m": [4, 4], "w": [1, 2]},
    "qos": {"ca": {"sl2vl": [0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3]},
            "swe": {"sl2vl": [0, 1, 2, 3, 3, 2, 1, 0, 0, 1, 2, 3, 3, 2, 1, 0]}},
}
# Non-default values everywhere, and a CCT of 70 entries, so that OpenSM sends it in two 64-entry
# blocks.
CC = {"enabled": True, "sw_cong_setting_threshold": 0xC, "sw_cong_setting_packet_size": 8,
      "sw_cong_setting_marking_rate": 3, "sw_cong_setting_victim_mask": [1, 2, 5],
      "ca_cong_setting_port_control": 1, "ca_cong_setting_control_map": 0b1011,
      "ca_cong_setting_ccti_timer": {"0": 20, "1": 30, "3": 40}, "ca_cong_setting_ccti_increase": 2,
      "ca_cong_setting_trigger_threshold": {"1": 5}, "ca_cong_setting_ccti_min": {"3": 4},
      "cct": [[i % 4, 3 * i] for i in range(70)]}
CC_CLASS, SET = 0x21, 0x02
SW_CONG_SETTING, CA_CONG_SETTING, CC_TABLE = 0x14, 0x16, 0x17  # attribute ids (ib_types.h)


@pytest.fixture(scope="module")
def cc_programmed(tmp_path_factory):
    """OpenSM run once (-o) on ibsim with the exported opensm.conf of a scenario with congestion
    control on; ibsim dumps every MAD it receives (-v -v -v), OpenSM logs verbosely (-D 0x07:
    errors, info and the CC manager's per-MAD lines). Yields (scenario, OpenSM's standard
    output, its log, ibsim's log, an HCA's SL2VL rows and P_Key table after the sweep)."""
    folder = tmp_path_factory.mktemp("ibsim-cc")
    scenario = qoslab.Scenario(**{**SCENARIO, "congestion_control": CC})
    net, conf = export_to_ibsim(folder, scenario)
    fabric = Fabric(folder)
    try:
        fabric.start_ibsim(net, "-v", "-v", "-v")
        stdout = fabric.run("opensm", "-o", "-F", str(conf), "-f",
                            str(folder / "opensm.log"), "-s", "0", "-D", "0x07", timeout=120)
        _, hosts = lids(fabric.run("ibnetdiscover"))
        sl2vl = sl2vl_rows(fabric.run("smpquery", "sl2vl", str(hosts["H0"]), "1"))
        pkeys = [int(k, 16) for k in re.findall(r"0x([0-9a-f]{4})", fabric.run("smpquery", "pkeys", str(hosts["H0"]), "1"))]
        yield (scenario, stdout, (folder / "opensm.log").read_text(), (folder / "ibsim.log").read_text(), sl2vl, pkeys)
    finally:
        fabric.close()


def cc_mads(ibsim_log: str) -> list[tuple[bytes, str]]:
    """Every congestion-control Set MAD ibsim received, as (the 256 bytes, the node it reached):
    ibsim -v -v -v prints each packet as 16 rows of 8 hex words, then where it went."""
    found = []
    for dump, node in re.findall(r"--- packet ---\n((?:[0-9a-f]{4}(?: [0-9a-f]{4}){7}\n){16})"
                                 r"(?:.*\n)*?.*reached host (\S+) port", ibsim_log):
        mad = bytes.fromhex(dump.replace(" ", "").replace("\n", ""))
        if mad[1] == CC_CLASS and mad[3] == SET:
            found.append((mad, node))
    return found


def u16(mad: bytes, at: int) -> int:
    return int.from_bytes(mad[at:at + 2], "big")


def test_opensm_reads_the_exported_cc_lines_without_complaint(cc_programmed):
    _, stdout, log, _, _, _ = cc_programmed
    loaded = dict(re.findall(r"Loading Cached Option:(\S+) = (.*)", stdout))
    assert loaded["congestion_control"] == "TRUE"
    # OpenSM echoes each option whose value is not already its default: every one set here.
    for key in ("threshold", "packet_size", "marking_rate", "victim_mask", "control_map"):
        assert f"cc_sw_cong_setting_{key}" in loaded, stdout
    for key in ("port_control", "control_map", "ccti_timer", "ccti_increase", "trigger_threshold", "ccti_min"):
        assert f"cc_ca_cong_setting_{key}" in loaded, stdout
    # It echoes a long value cut (here at 100 characters); the MADs below carry the whole table.
    assert ",".join(f"{s}:{m}" for s, m in CC["cct"]).startswith(loaded["cc_cct"]) and len(loaded["cc_cct"]) > 50
    # What OpenSM prints for a cc line it refuses (checked on bad lines: "invalid CCT entry",
    # "invalid SL specified", "-E- Parsing error in field ...") goes to standard output; its CC
    # manager's own errors are ERR C101..C10B in the log.
    assert not re.search(r"invalid|Parsing error|-E-", stdout), stdout
    assert "ERR C1" not in log and "osm_congestion_control_bind: Binding to port GUID" in log, log[-3000:]


def test_opensm_sends_every_switch_and_hca_the_exported_settings(cc_programmed):
    scenario, _, _, ibsim_log, _, _ = cc_programmed
    cc = scenario.congestion_control
    mads = cc_mads(ibsim_log)
    by_attr: dict[int, list[tuple[bytes, str]]] = {}
    for mad, node in mads:
        by_attr.setdefault(u16(mad, 16), []).append((mad, node))
    # Management data starts at byte 64 (after the header, CC_Key and the log data), as OpenSM's
    # ib_cc_mad_t lays it out. SwitchCongestionSetting, to port 0 of every switch:
    switches = [(mad, node) for mad, node in by_attr[SW_CONG_SETTING]]
    assert sorted(node for _, node in switches) == sorted({node for _, node in switches}) and len(switches) == 6
    for mad, _ in switches:
        assert int.from_bytes(mad[64:68], "big") == cc.sw_cong_setting_control_map
        assert int.from_bytes(mad[68:100], "big") == cc.sw_cong_setting_victim_mask == 0b100110
        assert int.from_bytes(mad[100:132], "big") == cc.sw_cong_setting_credit_mask
        assert mad[132] >> 4 == cc.sw_cong_setting_threshold == 0xC
        assert mad[133] == cc.sw_cong_setting_packet_size == 8
        assert u16(mad, 138) == cc.sw_cong_setting_marking_rate == 3
    # CACongestionSetting, to every HCA port: port control, control map, and for each SL it names
    # (timer, increase, trigger threshold, min) at 68 + 8 x SL.
    cas = by_attr[CA_CONG_SETTING]
    assert len({node for _, node in cas}) == len(cas) == 16
    for mad, _ in cas:
        assert u16(mad, 64) == cc.ca_cong_setting_port_control == 1
        assert u16(mad, 66) == cc.ca_cong_setting_control_map == 0b1011
        for sl in cc.controlled_sls():
            at = 68 + 8 * sl
            assert (u16(mad, at), mad[at + 2], mad[at + 3], mad[at + 4]) == (
                cc.ca_cong_setting_ccti_timer[sl], cc.ca_cong_setting_ccti_increase[sl],
                cc.ca_cong_setting_trigger_threshold[sl], cc.ca_cong_setting_ccti_min[sl]), sl
    # CongestionControlTable, to every HCA port in two blocks (attribute modifier 0 and 1): CCTI_Limit
    # = entries - 1, then 64 shift:multiplier words a block (bits 15..14 and 13..0).
    blocks: dict[int, set[str]] = {}
    table: dict[int, list[tuple[int, int]]] = {}
    for mad, node in by_attr[CC_TABLE]:
        index = int.from_bytes(mad[20:24], "big")
        blocks.setdefault(index, set()).add(node)
        assert u16(mad, 64) == len(CC["cct"]) - 1
        words = [u16(mad, 68 + 2 * j) for j in range(64)]
        entries = [(w >> 14, w & 0x3FFF) for w in words]
        assert table.setdefault(index, entries) == entries  # the same block to every HCA
    assert sorted(blocks) == [0, 1] and all(len(nodes) == 16 for nodes in blocks.values())
    sent = table[0] + table[1]
    assert sent[:70] == [tuple(e) for e in cc.cct] and set(sent[70:]) == {(0, 0)}


def test_ibsim_has_no_congestion_control_agent(cc_programmed):
    """ibsim (0.10 here; the same in its 0.12 source) implements no congestion-control class: it
    picks a MAD's handler by `mgmt_class & 0xf`, so class 0x21 lands on the SMA's handlers for
    the same attribute ids, and for that class it copies no MAD data in or out. The switches'
    SwitchCongestionSetting (0x14) reaches GUIDInfo, which refuses a Set: status 0x8 (method not
    supported), and OpenSM marks the switches CC-unavailable, logging it only at the verbose
    level. The HCAs' CACongestionSetting (0x16) and CongestionControlTable (0x17) reach P_KeyTable
    and SL2VLTable Sets, which answer status 0 (OpenSM counts them as programmed) and write
    whatever ibsim's stack buffer holds into the port's P_Key and SL2VL tables. So on ibsim CC
    can be checked as far as the MADs OpenSM sends (the test above), not as an HCA's or a
    switch's state; and CC on ibsim spoils the QoS tables the other tests read."""
    scenario, _, log, _, sl2vl, pkeys = cc_programmed
    statuses = re.findall(r"cc_rcv_mad: Processing received MAD status (0x[0-9a-f]+) for attr ID (\d+) mod (0x[0-9a-f]+) "
                          r"node (0x[0-9a-f]+) port (\d+)", log)
    switch = {node for status, attr, _, node, _ in statuses if int(attr) == SW_CONG_SETTING}
    assert len(switch) == 6
    assert {status for status, attr, *_ in statuses if int(attr) == SW_CONG_SETTING} == {"0x8"}
    for attr, count in ((CA_CONG_SETTING, 16), (CC_TABLE, 32)):
        answered = [status for status, a, *_ in statuses if int(a) == attr]
        assert answered == ["0x0"] * count, (attr, answered)
    assert sl2vl != [list(scenario.port_qos("ca")["sl2vl"])]  # the QoS export's table, overwritten
    assert 0xFFFF not in pkeys  # the default partition's key, overwritten
