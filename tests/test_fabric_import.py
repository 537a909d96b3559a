"""Imported fabrics (ibnetdiscover and ibsim files), routing from ibroute dumps, opensm.conf in and
out, and the deployment export: parsing real-looking input, refusing bad input by line, and the
engine's timing on links of different rates against closed forms."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import qoslab
from qoslab.cli import app
from qoslab.deploy import export_opensm
from qoslab.errors import ScenarioError
from qoslab.io.ibnetdiscover import (
    FabricFileError,
    parse_fabric,
    write_ibnetdiscover,
    write_ibsim,
)
from qoslab.io.ibroute import RoutingFileError, parse_dumps, routing_table
from qoslab.io.opensm import OpenSmConfError, parse_opensm_conf, write_opensm_conf
from qoslab.scenario import Scenario
from typer.testing import CliRunner

# As real dumps come: tool noise on top, no blank lines between some records, tabs, trailing
# blanks, a self-cabled switch (ports 7 and 8), a degraded 4xDDR link, a dual-port HCA.
MESSY = textwrap.dedent('''\
    src/query_smp.c:195; umad (DR path slid 0; dlid 0; 0,1 Attr 0xff90:0) bad status 110; Connection timed out
    #
    # Topology file: generated on Mon Nov 23 07:34:40 2026
    #
    vendid=0x2c9
    devid=0xcf08
    switchguid=0x2c90300000001(2c90300000001)
    Switch\t8 "S-0002c90300000001"\t\t# "leaf-a SwitchIB" enhanced port 0 lid 1 lmc 0
    [1]\t"H-0002c90400000100"[1](2c90400000101) \t\t# "node001 HCA-1" lid 3 4xEDR
    [2]\t"H-0002c90400000200"[1](2c90400000201) \t\t# "node002 HCA-1" lid 4 4xDDR   
    [3]\t"H-0002c90400000200"[2](2c90400000202) \t\t# "node002 HCA-1" lid 5 4xEDR
    [5]\t"S-0002c90300000002"[5]\t\t# "leaf-b SwitchIB" lid 2 4xEDR
    [6]\t"S-0002c90300000002"[6]\t\t# "leaf-b SwitchIB" lid 2 4xEDR
    [7]\t"S-0002c90300000001"[8]\t\t# "leaf-a SwitchIB" lid 1 4xEDR
    [8]\t"S-0002c90300000001"[7]\t\t# "leaf-a SwitchIB" lid 1 4xEDR
    vendid=0x2c9
    switchguid=0x2c90300000002(2c90300000002)
    Switch\t8 "S-0002c90300000002"\t\t# "leaf-b SwitchIB" enhanced port 0 lid 2 lmc 0
    [1]\t"H-0002c90400000300"[1](2c90400000301) \t\t# "node010 HCA-1" lid 6 4xEDR
    [5]\t"S-0002c90300000001"[5]\t\t# "leaf-a SwitchIB" lid 1 4xEDR
    [6]\t"S-0002c90300000001"[6]\t\t# "leaf-a SwitchIB" lid 1 4xEDR

    caguid=0x2c90400000100
    Ca\t1 "H-0002c90400000100"\t\t# "node001 HCA-1"
    [1](2c90400000101) \t"S-0002c90300000001"[1]\t\t# lid 3 lmc 0 "leaf-a SwitchIB" lid 1 4xEDR
    caguid=0x2c90400000200
    Ca\t2 "H-0002c90400000200"\t\t# "node002 HCA-1"
    [1](2c90400000201) \t"S-0002c90300000001"[2]\t\t# lid 4 lmc 0 "leaf-a SwitchIB" lid 1 4xDDR
    [2](2c90400000202) \t"S-0002c90300000001"[3]\t\t# lid 5 lmc 0 "leaf-a SwitchIB" lid 1 4xEDR
    Ca\t1 "H-0002c90400000300"\t\t# "node010 HCA-1"
    [1](2c90400000301) \t"S-0002c90300000002"[1]\t\t# lid 6 lmc 0 "leaf-b SwitchIB" lid 2 4xEDR
''')


def test_a_messy_real_dump_reads_hosts_links_and_rates():
    fabric, warnings = parse_fabric(MESSY, "messy.topo")
    assert warnings == []
    hosts = fabric.endpoints()
    # Natural order; a dual-port HCA is one host per cabled port; names from the descriptions.
    assert [e.name for e in hosts] == ["node001", "node002/P1", "node002/P2", "node010"]
    topo = fabric.engine_topology(100.0)
    assert topo["switch_names"] == ["leaf-a SwitchIB", "leaf-b SwitchIB"]
    assert len(topo["cables"]) == 4 + 2 + 1  # host links, two parallel ISLs, the self cable
    rates = sorted(topo["cable_gbps"])
    assert rates[0] == pytest.approx(16.0) and rates[-1] == pytest.approx(100.0)
    assert fabric.nodes[0].port_guid(0) == 0x2C90300000001


def test_a_dump_written_back_reads_the_same(tmp_path):
    fabric, _ = parse_fabric(MESSY, "messy.topo")
    for text in (write_ibnetdiscover(fabric), write_ibsim(fabric)):
        again, warnings = parse_fabric(text, "again")
        assert warnings == []
        assert again.engine_topology(100.0) == fabric.engine_topology(100.0)


@pytest.mark.parametrize(
    "edit, line, words",
    [
        (lambda t: t.replace('"S-0002c90300000002"[5]', '"S-00000000000000ff"[5]'), 12, "no record"),
        (lambda t: t.replace('[6]\t"S-0002c90300000002"[6]', '[6]\t"S-0002c9'), 13, "no record"),
        (lambda t: t.replace('[8]\t"S-0002c90300000001"[7]', '[9]\t"S-0002c90300000001"[7]'), 15, "declares 8 ports"),
        (lambda t: t.split("caguid=0x2c90400000100")[0], 9, "no record"),  # truncated: the CAs are gone
    ],
)
def test_bad_dumps_name_the_line(edit, line, words):
    with pytest.raises(FabricFileError) as caught:
        parse_fabric(edit(MESSY), "bad.topo")
    assert caught.value.line == line and words in caught.value.message
    assert str(caught.value).startswith(f"bad.topo:{line}: ")


def test_an_imported_scenario_names_the_file_and_refuses_fat_tree_routing(tmp_path):
    (tmp_path / "fabric.topo").write_text(MESSY)
    scenario = tmp_path / "s.toml"
    scenario.write_text('[topology]\nkind = "ibnetdiscover"\npath = "fabric.topo"\n[routing]\nalgorithm = "dmodk"\n')
    with pytest.raises(ScenarioError, match="routing.algorithm: \"dmodk\" routing needs a fat tree"):
        qoslab.Scenario.from_toml(scenario)
    scenario.write_text('[topology]\nkind = "ibnetdiscover"\npath = "missing.topo"\n')
    with pytest.raises(ScenarioError, match=r"topology.path: .*missing.topo: file not found"):
        qoslab.Scenario.from_toml(scenario)
    scenario.write_text('[topology]\nkind = "ibnetdiscover"\npath = "fabric.topo"\n[[traffic]]\nload = 0.2\n')
    loaded = qoslab.Scenario.from_toml(scenario)
    assert loaded.routing.algorithm == "minhop" and loaded.host_count() == 4
    result = qoslab.simulate(loaded)
    assert result.summary["packets_delivered"] > 0


# host A --4xEDR (100 Gb/s)-- switch --1xEDR (25 Gb/s)-- host B
TWO_RATES = textwrap.dedent('''\
    Switch 4 "sw"
    [1] "A"[1] w=2 s=4 e=2
    [2] "B"[1] w=1 s=4 e=2
    Hca 1 "A"
    [1] "sw"[1] w=2 s=4 e=2
    Hca 1 "B"
    [1] "sw"[2] w=1 s=4 e=2
''')


def one_message_latency_ns(tmp_path: Path, src: int) -> float:
    (tmp_path / "two.net").write_text(TWO_RATES)
    scenario = qoslab.Scenario(
        topology={"kind": "ibnetdiscover", "path": str(tmp_path / "two.net")},
        traffic=[{"pattern": "permutation", "hosts": [src], "destinations": [1 - src], "load": 0.01,
                  "arrival": "periodic", "message_bytes": 4096}],
        run={"duration_us": 200, "warmup_us": 0, "messages": True},
    )
    messages = qoslab.simulate(scenario).messages.to_pylist()
    assert messages
    return messages[0]["delivered_ns"] - messages[0]["created_ns"]


def test_cut_through_between_links_of_different_rates_matches_the_closed_form(tmp_path):
    wire = 4096 + 26
    slow = wire * 8 / 25  # serialization on the 25 Gb/s link, in ns (the 100 Gb/s one: wire * 8 / 100)
    link, switch = 20, 100
    # Fast to slow: the slow link's serialization decides, started a cut-through delay in.
    assert one_message_latency_ns(tmp_path, 0) == pytest.approx(link + switch + slow + link, abs=0.01)
    # Slow to fast: the fast link cannot finish before the tail has arrived (plus one byte time).
    assert one_message_latency_ns(tmp_path, 1) == pytest.approx(link + slow + 8 / 100 + link, abs=0.01)



def two_switch_dump(first: str, middle: str, last: str) -> str:
    """host H0 --first-- switch SA --middle-- switch SB --last-- host H1, as ibnetdiscover prints it."""
    return textwrap.dedent(f'''\
        Switch\t2 "S-0002c90300000000"\t\t# "SA" base port 0 lid 0 lmc 0
        [1]\t"H-0002c90400000000"[1](2c90400000001) \t\t# "H0" lid 0 {first}
        [2]\t"S-0002c90300000100"[1]\t\t# "SB" lid 0 {middle}

        Switch\t2 "S-0002c90300000100"\t\t# "SB" base port 0 lid 0 lmc 0
        [1]\t"S-0002c90300000000"[2]\t\t# "SA" lid 0 {middle}
        [2]\t"H-0002c90400000100"[1](2c90400000101) \t\t# "H1" lid 0 {last}

        Ca\t1 "H-0002c90400000000"\t\t# "H0"
        [1](2c90400000001) \t"S-0002c90300000000"[1]\t\t# lid 0 lmc 0 "SA" lid 0 {first}

        Ca\t1 "H-0002c90400000100"\t\t# "H1"
        [1](2c90400000101) \t"S-0002c90300000100"[2]\t\t# lid 0 lmc 0 "SB" lid 0 {last}
    ''')


@pytest.mark.parametrize(
    "links, switch",
    [(("1xEDR", "4xEDR", "4xEDR"), 100), (("4xEDR", "4xHDR", "4xHDR"), 20)],
)
def test_a_packet_from_a_slow_link_is_not_delivered_before_its_tail_left_the_source(tmp_path, links, switch):
    # A slow first link paces the packet's tail over every later hop, however fast: the tail leaves
    # H0 at wire / first rate, and each switch sends it on one byte time (of its output) after it
    # arrived. Rebuilding the tail from the previous link's rate alone let the second switch finish
    # long before (review-ib finding 1: 589.76 ns and 264.88 ns against these 1379.20 and 389.84).
    (tmp_path / "fabric.topo").write_text(two_switch_dump(*links))
    gbps = {"1xEDR": 25, "4xEDR": 100, "4xHDR": 200}
    wire, link = 4096 + 26, 20
    source_tail = wire * 8 / gbps[links[0]]
    byte_times = 8 / gbps[links[1]] + 8 / gbps[links[2]]
    scenario = qoslab.Scenario(
        topology={"kind": "ibnetdiscover", "path": str(tmp_path / "fabric.topo")},
        fabric={"switch_latency_ns": switch},
        traffic=[{"pattern": "permutation", "hosts": [0], "destinations": [1], "load": 0.01,
                  "arrival": "periodic", "message_bytes": 4096}],
        run={"duration_us": 200, "warmup_us": 0, "messages": True},
    )
    messages = qoslab.simulate(scenario).messages.to_pylist()
    assert messages
    latency = messages[0]["delivered_ns"] - messages[0]["created_ns"]
    assert latency == pytest.approx(source_tail + 3 * link + byte_times, abs=0.01)
    assert latency >= source_tail + 3 * link  # the physical bound: 1379.04 and 389.76 ns


DUMP = textwrap.dedent('''\
    Unicast lids [0x0-0x4] of switch Lid 1 guid 0x0002c90300000001 (leaf-a SwitchIB):
      Lid  Out   Destination
           Port     Info 
    0x0001 000 : (Switch portguid 0x0002c90300000001: 'leaf-a SwitchIB')
    0x0003 001 : (Channel Adapter portguid 0x0002c90400000101: 'node001 HCA-1')
    0x0004 002 : (Channel Adapter portguid 0x0002c90400000201: 'node002 HCA-1')
    0x0005 003 : (Channel Adapter portguid 0x0002c90400000202: 'node002 HCA-1')
    0x0006 005 : (Channel Adapter portguid 0x0002c90400000301: 'node010 HCA-1')
    5 valid lids dumped 
    Unicast lids [0x0-0x6] of switch Lid 2 guid 0x0002c90300000002 (leaf-b SwitchIB):
      Lid  Out   Destination
           Port     Info 
    0x0003 006 : (Channel Adapter portguid 0x0002c90400000101: 'node001 HCA-1')
    0x0004 005 : (Channel Adapter portguid 0x0002c90400000201: 'node002 HCA-1')
    0x0005 006 : (Channel Adapter portguid 0x0002c90400000202: 'node002 HCA-1')
    0x0006 001 : (Channel Adapter portguid 0x0002c90400000301: 'node010 HCA-1')
    4 valid lids dumped 
''')


def test_ibroute_dumps_become_the_engine_table():
    fabric, _ = parse_fabric(MESSY, "messy.topo")
    table = routing_table(fabric, parse_dumps(DUMP, "lft.txt"))
    # hosts: node001, node002/P1, node002/P2, node010; switch 0 = leaf-a, 1 = leaf-b; ports from 0.
    assert table == [0, 1, 2, 4, 5, 4, 5, 0]


@pytest.mark.parametrize(
    "edit, line, words",
    [
        (lambda t: t.replace("0x0002c90400000301: 'node010 HCA-1')\n4", "0x0002c904000009ff: 'ghost')\n4"), 16,
         "not in the fabric"),
        (lambda t: t.replace("0x0004 002", "0x0004 009"), 6, "has data ports 1..8"),
        (lambda t: t.replace("0x0006 001", "0x0006 005"), 1, "routing loop"),
        (lambda t: t.replace("0x0003 001", "0x0003 004"), 1, "not cabled"),
        (lambda t: t.replace("4 valid lids dumped", ""), 10, "truncated"),
    ],
)
def test_bad_routing_dumps_name_the_line(edit, line, words):
    fabric, _ = parse_fabric(MESSY, "messy.topo")
    with pytest.raises(RoutingFileError) as caught:
        routing_table(fabric, parse_dumps(edit(DUMP), "lft.txt"))
    assert words in caught.value.message and caught.value.line == line, str(caught.value)


def test_opensm_conf_round_trips_and_reading_warns_as_opensm_parses():
    tables = {
        "ca": {"sl2vl": [0, 1, 2, 3] * 4, "vlarb_high": [(1, 64)], "vlarb_low": [(0, 64), (2, 192)], "high_limit": 4},
        "swe": {"sl2vl": [3, 2, 1, 0] * 4, "vlarb_high": [], "vlarb_low": [(0, 255), (0, 255), (1, 9)], "high_limit": 0},
    }
    text = write_opensm_conf(tables, 4, "/etc/opensm/qos-policy.conf")
    read = parse_opensm_conf(text)
    assert read.enabled and read.data_vls == 4 and read.warnings == []
    assert read.tables["ca"] == tables["ca"]
    assert read.tables["swe"]["vlarb_low"] == tables["swe"]["vlarb_low"]
    assert read.tables["swe"]["vlarb_high"] == [(0, 0)]  # the empty table, written as 0:0

    odd = parse_opensm_conf("qos TRUE\nmax_op_vls 3\nqos_ca_vlarb_low=0:64\nqos_swe_vlarb_low 0:010,15:300\n"
                            "qos_swe_sl2vl 0,1,2,9,0,1,2,3,0,1,2,3,0,1,2,3\n", "opensm.conf")
    assert odd.tables["swe"]["vlarb_low"] == [(0, 8), (0, 300 & 0xFF)]
    assert odd.tables["swe"]["sl2vl"][3] == 9 & 3
    text = "\n".join(odd.warnings)
    for words in ("opensm.conf:3", "not '='", "octal (8)", "VL 15 as VL 0", "8 bits (44)", "masks it to VL1"):
        assert words in text
    with pytest.raises(OpenSmConfError, match="opensm.conf:2: max_op_vls: expected 1..5, got 7"):
        parse_opensm_conf("qos TRUE\nmax_op_vls 7\n", "opensm.conf")


def test_unset_per_type_options_fall_back_as_opensm_s_qos_build_config_does(tmp_path):
    # `opensm -c` writes -1 for an unset high_limit: the global qos_high_limit applies, then 0.
    read = parse_opensm_conf("qos TRUE\nmax_op_vls 4\nqos_high_limit 4\nqos_ca_high_limit -1\nqos_vlarb_high 0:4\n",
                             "hl2.conf")
    assert read.tables["ca"]["high_limit"] == 4 and read.tables["swe"]["high_limit"] == 4
    assert read.warnings == []
    unset = parse_opensm_conf("qos TRUE\nqos_high_limit -1\nqos_ca_high_limit -3\nqos_swe_high_limit 6\n")
    assert unset.tables["ca"]["high_limit"] == 0 and unset.tables["swe"]["high_limit"] == 6
    # A string option is unset only as (null); an empty one is a table of its own (as OpenSM keeps it).
    text = ("qos TRUE\nqos_vlarb_high 0:4\nqos_sl2vl 0,1,0,1,0,1,0,1,0,1,0,1,0,1,0,1\nqos_vlarb_low 0:64,1:64\n"
            "qos_ca_vlarb_high (null)\nqos_ca_sl2vl (null)\nqos_ca_vlarb_low (null)\n"
            "qos_swe_vlarb_high\nqos_swe_sl2vl \nqos_swe_vlarb_low ''\nqos_swe_high_limit\n")
    read = parse_opensm_conf(text, "e.conf")
    assert read.tables["ca"]["vlarb_high"] == [(0, 4)] and read.tables["ca"]["sl2vl"] == [0, 1] * 8
    assert read.tables["ca"]["vlarb_low"] == [(0, 64), (1, 64)]
    assert read.tables["swe"]["vlarb_high"] == [] and read.tables["swe"]["vlarb_low"] == []
    assert read.tables["swe"]["sl2vl"] == [0] * 16 and read.tables["swe"]["high_limit"] == 0
    warned = "\n".join(read.warnings)
    for words in ("e.conf:8: qos_swe_vlarb_high is empty", "e.conf:9: qos_swe_sl2vl is empty: OpenSM maps every SL",
                  "e.conf:11: qos_swe_high_limit '': OpenSM reads it as 0"):
        assert words in warned
    conf = tmp_path / "hl2.conf"
    conf.write_text("qos TRUE\nqos_high_limit 4\nqos_ca_high_limit -1\nqos_vlarb_high 0:4\n")
    printed = CliRunner().invoke(app, ["import", "opensm", str(conf)])
    assert printed.exit_code == 0 and printed.stdout.count("high_limit = 4") == 2, printed.output


def test_opensm_numbers_are_read_as_c_reads_them_and_each_warning_said_once():
    # Python's int() took "6_4" as 64 and Arabic-Indic digits as 33, where OpenSM's strtoul reads
    # neither; and a global option's warning came once per port type.
    for entry in ("0:6_4", "1:\u0663\u0663"):
        with pytest.raises(OpenSmConfError, match="bad entry"):
            parse_opensm_conf(f"qos TRUE\nqos_vlarb_low {entry}\n", "a.conf")
    from qoslab.io.opensm import _strtoul

    assert [_strtoul(x) for x in ("-010", "-0x10", "+7", "0x1F", "017", "5")] == [-8, -16, 7, 31, 15, 5]
    read = parse_opensm_conf("qos TRUE\nmax_op_vls 5\nqos_vlarb_high -1:5\n", "d.conf")
    assert read.warnings[1:] == ["d.conf:3: qos_vlarb_high entry '-1:5': OpenSM stores VL -1 as VL 14"]


def test_tables_left_to_opensm_s_defaults_are_those_of_the_operated_vls(tmp_path):
    # With max_op_vls 3 (VL0-3), the defaulted high table still listed VL4-14 and the defaulted
    # SL2VL reached VL14: the printed scenario was refused by `check`. OpenSM's own template
    # (`opensm -c`) with max_op_vls 3 gave the same.
    # OpenSM masks each VLArb entry's VL as it masks SL2VL (osm_qos.c: vl &= vl_mask, mask 3 here).
    read = parse_opensm_conf("qos TRUE\nmax_op_vls 3\nqos_vlarb_low 0:64,1:64,2:64,3:64\n"
                             "qos_ca_vlarb_high 0:4,5:10\n", "o.conf")
    assert read.tables["swe"]["vlarb_high"] == [(0, 4)] + [(vl & 3, 0) for vl in range(1, 15)]
    assert read.tables["swe"]["sl2vl"] == [0, 1, 2, 3] * 3 + [0, 1, 2, 3]
    assert read.tables["ca"]["vlarb_high"] == [(0, 4), (1, 10)]
    assert read.warnings == ["o.conf:4: qos_ca_vlarb_high entry 5:10 is for VL5, beyond the operational VLs "
                             "(max_op_vls: VL0-3); OpenSM masks it to VL1"]
    conf = tmp_path / "o.conf"
    conf.write_text("qos TRUE\nmax_op_vls 3\nqos_vlarb_low 0:64,1:64,2:64,3:64\n")
    printed = CliRunner().invoke(app, ["import", "opensm", str(conf)])
    assert printed.exit_code == 0, printed.output
    scenario = tmp_path / "s.toml"
    scenario.write_text(printed.stdout + '[topology]\nkind = "single-switch"\nhosts = 4\n')
    checked = CliRunner().invoke(app, ["check", str(scenario)])
    assert checked.exit_code == 0, checked.output


def test_vlarb_entries_beyond_the_operational_vls_are_masked_as_opensm_programs_them():
    # Observed on OpenSM 3.3.23 + ibsim (VLArb capability 8), smpquery vlarb on an HCA and a switch
    # port (review-ib, imp.conf and def3.conf): the import had left 5:128 out of the set table
    # and cut the default low table to 0:0,1:4,2:4,3:4.
    imp = parse_opensm_conf("qos TRUE\nmax_op_vls 3\nqos_vlarb_high 0:0\nqos_vlarb_low 0:64,1:64,2:64,3:64,5:128\n"
                            "qos_sl2vl 0,1,2,3,4,5,6,7,0,1,2,3,4,5,6,7\nqos_high_limit 0\n", "imp.conf")
    for port in ("ca", "swe"):
        assert imp.tables[port]["vlarb_low"] == [(0, 64), (1, 64), (2, 64), (3, 64), (1, 128)]
    assert "imp.conf:4: qos_vlarb_low entry 5:128 is for VL5, beyond the operational VLs (max_op_vls: VL0-3); " \
           "OpenSM masks it to VL1" in imp.warnings
    default = parse_opensm_conf("qos TRUE\nmax_op_vls 3\n", "def3.conf")
    observed_low = [(0, 0), (1, 4), (2, 4), (3, 4), (0, 4), (1, 4), (2, 4), (3, 4)]  # ibsim holds 8 entries
    scenario = Scenario.from_dict({"topology": {"kind": "single-switch", "hosts": 2},
                                   "fabric": {"data_vls": default.data_vls, "vlarb_capacity": 8},
                                   "qos": default.scenario_qos()})
    for port in ("ca", "swe"):
        assert default.tables[port]["vlarb_low"][:8] == observed_low
        assert [tuple(e) for e in scenario.engine_port_qos(port)["vlarb_low"]] == observed_low
        assert [tuple(e) for e in scenario.engine_port_qos(port)["vlarb_high"]] == [(0, 4)] + [(vl & 3, 0) for vl in range(1, 8)]


def test_a_stock_opensm_conf_warns_that_most_ports_operate_8_of_its_15_vls():
    # `qos TRUE` alone: max_op_vls defaults to 5 (VL0-14), but on VLCap VL0-7 ports (ibsim, most
    # hardware) OpenSM runs 8 VLs and SL8-14 share VL0-6; the export warned, the import did not.
    read = parse_opensm_conf("qos TRUE\n", "def5.conf")
    assert read.data_vls == 15
    said = [w for w in read.warnings if w.startswith("def5.conf: max_op_vls unset (OpenSM's default, 5): read as "
                                                       "fabric.data_vls = 15 (VL0-14), but ")]
    assert len(said) == 1 and "VL8-14 lands on VL0-6" in said[0] and "fabric.data_vls = 8" in said[0], read.warnings
    assert not [w for w in parse_opensm_conf("qos TRUE\nmax_op_vls 4\n").warnings if "VLCap" in w]


def test_export_states_what_the_mpi_side_must_do_and_writes_job_environments(tmp_path):
    scenario = qoslab.Scenario(
        topology={"kind": "xgft", "m": [4, 2], "w": [1, 2]},
        qos={"vlarb_low": "0:254,0:254,1:9"},
        jobs=[
            {"name": "halo", "nodes": 4, "sl": 1, "workload": {"kind": "nearest-neighbor", "dims": 2, "iterations": 1}},
            {"name": "bulk", "nodes": 4, "sl": 0, "workload": {"kind": "all-to-all", "bytes": 4096, "iterations": 1},
             "sl_policy": {"kind": "latency-history", "sls": [0, 1], "thresholds": [2.0]}},
        ],
    )
    written = export_opensm(scenario, tmp_path).written
    names = {p.name for p in written}
    assert {"opensm.conf", "qos-policy.conf", "slurm-taskprolog.sh", "README.md", "halo.env", "bulk.env"} <= names
    conf = (tmp_path / "opensm.conf").read_text()
    assert "qos_swe_vlarb_low 0:254,0:254,1:9" in conf and "max_op_vls 3" in conf
    assert "export UCX_IB_SL=1" in (tmp_path / "env" / "halo.env").read_text()
    bulk = (tmp_path / "env" / "bulk.env").read_text()
    assert "MPI side" in bulk and "latency" in bulk
    assert "needs MPI-side support" in (tmp_path / "README.md").read_text() or "MPI-side" in bulk
    prolog = (tmp_path / "slurm-taskprolog.sh").read_text()
    assert "    'halo')" in prolog and "echo 'export UCX_IB_SL=1'" in prolog
    policy = (tmp_path / "qos-policy.conf").read_text()
    assert 'name: "halo"' in policy and "qos-level-name: sl1" in policy and policy.count("0x0002c904") == 8


def messy_scenario(tmp_path: Path, **keys) -> qoslab.Scenario:
    (tmp_path / "fabric.topo").write_text(MESSY)
    return qoslab.Scenario(topology={"kind": "ibnetdiscover", "path": str(tmp_path / "fabric.topo")}, **keys)


def test_hosts_by_name_on_an_imported_fabric_become_the_named_hosts_indices(tmp_path):
    # MESSY's hosts, in natural name order: node001, node002/P1, node002/P2, node010.
    traffic = messy_scenario(
        tmp_path,
        traffic=[{"pattern": "shift", "hosts": "node[001,010]", "destinations": ["node010", "node001"],
                  "shift": 0, "load": 0.05, "arrival": "periodic"}],
        run={"duration_us": 100, "warmup_us": 0, "messages": True},
    )
    assert traffic.host_names() == ["node001", "node002/P1", "node002/P2", "node010"]
    assert traffic.traffic[0].hosts == [0, 3] and traffic.traffic[0].destinations == [3, 0]
    assert traffic.resolved()["traffic"][0]["hosts"] == [0, 3]
    # Shift 0: the i-th sender sends to the i-th destination, node001 -> node010 and back.
    assert {(m["src"], m["dst"]) for m in qoslab.simulate(traffic).messages.to_pylist()} == {(0, 3), (3, 0)}

    job = messy_scenario(tmp_path, jobs=[{"placement": "hosts", "hosts": "node002/P[2,1]",
                                          "workload": {"kind": "all-to-all", "bytes": 4096, "iterations": 1}}],
                         run={"messages": True})
    assert job.placements() == [[2, 1]]  # hostlist order is rank order
    assert {(m["src"], m["dst"]) for m in qoslab.simulate(job).messages.to_pylist()} == {(2, 1), (1, 2)}
    # qoslab check names the placed hosts as the fabric does, beside their indices.
    from qoslab.cli_render import placement_rows

    assert [(row["hosts"], row["host_names"]) for row in placement_rows(job)] == [([2, 1], ["node002/P2", "node002/P1"])]
    from qoslab.cli_render import _cell

    assert _cell("host_names", ["node001", "node002"]) == "node[001-002]"
    assert _cell("host_names", ["node010,rack2 HCA-1", "node001"]) == "node010,rack2 HCA-1, node001"  # no hostlist


@pytest.mark.parametrize("hosts, message", [
    ("node003", r"traffic\[0\]\.hosts: host 'node003' is not in the fabric \(its hosts: .*node\[001,010\]"),
    ("node[1-", r"traffic\[0\]\.hosts: expected .*host names like \"node\[001-016\]\", got \"node\[1-\""),
    ("5", r"traffic\[0\]\.hosts: expected host indices as integers"),
    (["node001", "node001"], r"traffic\[0\]\.hosts: host 'node001' listed twice"),
    (["node001", 3], r"traffic\[0\]\.hosts: expected host indices .* or host names, not a mix"),
])
def test_bad_host_names_are_refused_naming_the_key(tmp_path, hosts, message):
    with pytest.raises(ScenarioError, match=message):
        messy_scenario(tmp_path, traffic=[{"hosts": hosts, "load": 0.1}])


def test_host_names_on_a_generated_topology_are_refused():
    with pytest.raises(ScenarioError, match=r"jobs\[0\]\.hosts: host names need a fabric whose hosts have names"):
        qoslab.Scenario(jobs=[{"placement": "hosts", "hosts": "node[1-4]",
                               "workload": {"kind": "all-to-all", "bytes": 4096, "iterations": 1}}])


def test_a_description_cannot_set_a_lid_or_a_link_option():
    # Descriptions are free text the cluster sets: "base port 0 lid 7" or "w=1" inside one is text.
    dump = MESSY.replace('"leaf-a SwitchIB" enhanced port 0 lid 1 lmc 0',
                         '"spine base port 0 lid 7" enhanced port 0 lid 1 lmc 0')
    fabric, _ = parse_fabric(dump, "described.topo")
    leaf = next(i for i, n in enumerate(fabric.nodes) if n.description == "spine base port 0 lid 7")
    assert fabric.nodes[leaf].lids[0] == 1  # the record's own "enhanced port 0 lid 1", not the description's
    dump = MESSY.replace('"leaf-b SwitchIB" enhanced port 0 lid 2 lmc 0', '"b" base port 0 lid 2 lmc 0') \
                .replace('Switch\t8 "S-0002c90300000001"\t\t# "leaf-a SwitchIB" enhanced port 0 lid 1 lmc 0',
                         'Switch\t8 "S-0002c90300000001"\t\t# "a base port 0 lid 7" base port 0 lid 48 lmc 0')
    fabric, _ = parse_fabric(dump, "described.topo")
    assert [n.lids[0] for n in fabric.nodes if n.kind == "switch"] == [48, 2]
    # Descriptions are printed raw, quotes included: the record's own tail is read from the end.
    dump = MESSY.replace('"leaf-a SwitchIB" enhanced port 0 lid 1 lmc 0',
                         '"lab" base port 0 lid 7 "x" enhanced port 0 lid 1 lmc 0')
    fabric, _ = parse_fabric(dump, "described.topo")
    assert [n.lids[0] for n in fabric.nodes if n.kind == "switch" and n.description == "lab"] == [1]
    ibsim = 'Switch\t2 "S-0000000000000001"\n[1]\t"H-0000000000000002"[1] w=2 s=4 e=2 # "w=1 s=1"\n' \
            'Hca\t1 "H-0000000000000002"\n[1]\t"S-0000000000000001"[1] w=2 s=4 e=2\n'
    fabric, _ = parse_fabric(ibsim, "net")
    assert {(c.width, c.speed) for c in fabric.cables} == {("4x", "EDR")}


def test_a_long_source_path_stays_inside_the_written_files_comments(tmp_path):
    fabric, _ = parse_fabric(MESSY, "messy.topo")
    fabric.source = "/data/" + "d" * 240 + '\ndo Unlink "S-0002c90300000001" #' + "é" * 100 + "/x.topo"
    net = write_ibsim(fabric)
    assert all(len(line.encode()) <= 255 for line in net.splitlines())
    header = net.split("\n\n", 1)[0].splitlines()
    assert len(header) > 2 and all(line.startswith("# ") for line in header)
    topo = write_ibnetdiscover(fabric)
    assert not any(line.startswith("do ") for line in topo.splitlines() + net.splitlines())
    again, _ = parse_fabric(net, "again")
    assert again.engine_topology(100.0) == fabric.engine_topology(100.0)


def test_a_link_width_outside_the_tables_is_an_unknown_link_type_not_a_crash():
    for width in ("3x", "0x", "16x", "99x"):
        dump = MESSY.replace("lid 4 4xDDR   ", f"lid 4 {width}DDR")
        fabric, warnings = parse_fabric(dump, "odd.topo")
        assert any(f"link type {width}DDR is unknown" in w for w in warnings), warnings


REAL_DUMPS = Path(__file__).resolve().parents[1].parent / "shared" / "real-data" / "ibnetdiscover"
needs_real_dumps = pytest.mark.skipif(not REAL_DUMPS.is_dir(), reason=f"{REAL_DUMPS} is not here (../shared/real-data)")


def lids_named_by_port_lines(text: str) -> dict[str, int]:
    """Each switch's LID as the other records' port lines give it ('... "S-<guid>"[p] ... lid N 4xQDR'):
    the dump's own cross-check of its switch records, by a plain scan."""
    import re

    found: dict[str, int] = {}
    for m in re.finditer(r'^\[\d+\].*?"(S-[0-9a-f]{16})"\[\d+\].*\blid (\d+) \S+$', text, re.MULTILINE):
        assert found.setdefault(m[1], int(m[2])) == int(m[2])
    return found


@needs_real_dumps
@pytest.mark.parametrize("name", ["psmn-x5-2020.topo", "nvidia-howto-2016.topo", "bee-cluster-2023.topo",
                                  "manpage-voltaire-2007.topo"])
def test_every_switch_of_a_real_dump_keeps_its_lid_base_or_enhanced_port_0(name):
    # psmn-x5-2020: 9 of its 11 switch records end "enhanced port 0 lid N lmc 0" (S-0008f10500108bba
    # is lid 7); nvidia-howto-2016's SX6012 "enhanced port 0 lid 174". Their LIDs had been lost.
    text = (REAL_DUMPS / name).read_text()
    fabric, _ = parse_fabric(text, name)
    expected = lids_named_by_port_lines(text)
    switches = {n.ident: n for n in fabric.nodes if n.kind == "switch"}
    assert set(expected) <= set(switches)
    assert {ident: switches[ident].lids.get(0) for ident in expected} == expected
    assert {ident: fabric.lid(i, 1) for i, n in enumerate(fabric.nodes) if (ident := n.ident) in expected} == expected


@needs_real_dumps
def test_numbered_lids_pass_over_every_lid_the_dump_gives():
    # nvidia-howto-2016 with the SX6012's LID unassigned (a dump taken before the SM ran): numbered
    # from 1 in node order it had got 2, r-ufm216's real LID, and compare-counters paired them.
    text = (REAL_DUMPS / "nvidia-howto-2016.topo").read_text()
    text = text.replace('"MF0;switch-de779e:SX6012/U1" enhanced port 0 lid 174 lmc 0',
                        '"MF0;switch-de779e:SX6012/U1" enhanced port 0 lid 0 lmc 0')
    fabric, _ = parse_fabric(text, "unassigned.topo")
    sx6012 = next(i for i, n in enumerate(fabric.nodes) if n.ident == "S-f4521403005764b0")
    keys = [(fabric.lid(i, p), p) for i, n in enumerate(fabric.nodes) for p in range(1, n.ports + 1)]
    assert len(keys) == len(set(keys))
    assert fabric.lid(sx6012, 1) == 4  # 1, 2 and 3 are r-ufm96's, r-ufm216's and r-ufm111's
    # A port with LMC 1 answers at two LIDs from its base: r-ufm111's 3 and 4.
    fabric, _ = parse_fabric(text.replace('# lid 3 lmc 0 "SwitchIB', '# lid 3 lmc 1 "SwitchIB'), "lmc.topo")
    assert fabric.lid(sx6012, 1) == 5


def full_form(text: str) -> str:
    """A dump as `ibnetdiscover -f` prints it: each port line's link type followed by the raw
    PortInfo codes " s=<speed> w=<width> v=<vlcap>[ e=<ext speed>]" (ibnetdiscover.c)."""
    import re

    from qoslab.io.fabric import IBSIM_SPEED, IBSIM_WIDTH

    def codes(m: re.Match[str]) -> str:
        s, e = IBSIM_SPEED[m[2]]
        return f"{m[0]} s={s} w={IBSIM_WIDTH[m[1]]} v=4" + (f" e={e}" if e else "")

    return re.sub(r"(\d+x)(SDR|DDR|QDR|FDR|EDR|HDR|NDR)(?=\s*$)", codes, text, flags=re.MULTILINE)


@needs_real_dumps
@pytest.mark.parametrize("name", ["nvidia-howto-2016.topo", "psmn-x5-2020.topo", "bee-cluster-2023.topo"])
def test_a_full_dump_keeps_every_link_rate(name):
    # `ibnetdiscover -f`: nvidia-howto-2016's EDR, FDR, QDR and SDR links had all read as unknown
    # and run at fabric.link_gbps (100 Gb/s), without a word.
    text = (REAL_DUMPS / name).read_text()
    full = full_form(text)
    assert full != text and " s=4 w=2 v=4" in full
    plain, _ = parse_fabric(text, name)
    fabric, warnings = parse_fabric(full, name)
    assert warnings == []
    rates = [(c.a, c.b, c.width, c.speed) for c in fabric.cables]
    assert rates == [(c.a, c.b, c.width, c.speed) for c in plain.cables] and None not in {r[2] for r in rates}


def test_xsigo_tails_and_a_missing_link_type():
    dump = MESSY.replace('# "node001 HCA-1" lid 3 4xEDR', '# "node001 HCA-1" lid 3 4xEDR s=4 w=2 v=4 e=2 slot 1') \
                .replace('# "node010 HCA-1" lid 6 4xEDR', '# "node010 HCA-1" lid 6 4xEDR (scp)')
    fabric, warnings = parse_fabric(dump, "xsigo.topo")
    assert warnings == [] and all(c.width for c in fabric.cables)
    fabric, warnings = parse_fabric(MESSY.replace('lid 2 4xEDR\n[6]', 'lid 2\n[6]'), "missing.topo")
    assert any("no link type" in w and "missing.topo:" in w for w in warnings), warnings


def record_lines(text: str) -> list[str]:
    """A dump's Switch, Ca and port lines, blanks collapsed, in order of the records."""
    import re

    return [re.sub(r"\s+", " ", line).strip() for line in text.splitlines() if re.match(r"(Switch|Ca|\[)", line)]


@needs_real_dumps
@pytest.mark.parametrize("name", ["psmn-x5-2020.topo", "nvidia-howto-2016.topo", "bee-cluster-2023.topo"])
def test_a_real_dump_written_back_keeps_its_descriptions_and_lids(name):
    # The export had written "lid 0" everywhere and host names for descriptions ("node019 HCA-1"
    # became "node019"), so a re-import fell back to numbered LIDs. Every record and port line
    # comes back as the dump has it (these dumps list each record's ports in order and their
    # cable ends agree).
    text = (REAL_DUMPS / name).read_text()
    fabric, _ = parse_fabric(text, name)
    written = write_ibnetdiscover(fabric)
    assert record_lines(written) == record_lines(text)
    again, warnings = parse_fabric(written, "again")
    assert warnings == []
    assert [(n.ident, n.description, n.lids, n.lmcs, n.enhanced_port0) for n in again.nodes] == \
           [(n.ident, n.description, n.lids, n.lmcs, n.enhanced_port0) for n in fabric.nodes]
    assert again.engine_topology(100.0) == fabric.engine_topology(100.0)


def test_a_generated_fabric_is_written_with_unassigned_lids():
    scenario = qoslab.Scenario(topology={"kind": "xgft", "m": [2, 2], "w": [1, 2]})
    written = write_ibnetdiscover(scenario.tool_fabric())
    assert "base port 0 lid 0 lmc 0" in written and "# lid 0 lmc 0" in written
    again, warnings = parse_fabric(written, "again")
    assert warnings == [] and all(not n.lids for n in again.nodes)
    assert {n.description for n in again.nodes} >= {"H0", "S1-0"}


def test_links_of_an_imported_fabric_number_ports_as_the_dump_does(tmp_path):
    # A host is its HCA port (node002's second port is 2), a switch port its number in the dump
    # (node002/P2 is cabled to leaf-a's port 3); the engine numbers them 0 and 2.
    scenario = messy_scenario(tmp_path, traffic=[{"load": 0.05}], run={"duration_us": 5, "warmup_us": 0})
    rows = {(r["src"], r["src_port"], r["dst"], r["dst_port"]) for r in qoslab.simulate(scenario).links.to_pylist()}
    assert ("node002/P2", 2, "leaf-a SwitchIB", 3) in rows and ("leaf-a SwitchIB", 3, "node002/P2", 2) in rows
    assert ("leaf-a SwitchIB", 7, "leaf-a SwitchIB", 8) in rows  # the self cable


@needs_real_dumps
def test_links_and_port_counters_of_a_real_dump_name_the_same_ports(tmp_path):
    # bee-cluster-2023's one 4xDDR cable joins port 11 of S-ec0d9a0300ec8480 to port 11 of
    # S-ec0d9a0300ec8200: port_counters.parquet said 11, links.parquet 10 (IB port - 1).
    scenario = qoslab.Scenario(topology={"kind": "ibnetdiscover", "path": str(REAL_DUMPS / "bee-cluster-2023.topo")},
                               traffic=[{"load": 0.01}], run={"duration_us": 2, "warmup_us": 0, "port_counters": True})
    result = qoslab.simulate(scenario)
    counted = {(r["node"], r["port"]): r["link_gbps"] for r in result.port_counters.to_pylist()}
    links = result.links.to_pylist()
    assert {(r["src"], r["src_port"]) for r in links} == {(r["dst"], r["dst_port"]) for r in links} == set(counted)
    ddr = [key for key, gbps in counted.items() if gbps == pytest.approx(16.0)]
    assert sorted(port for _, port in ddr) == [11, 11]
    assert {(r["src"], r["src_port"], r["dst"], r["dst_port"]) for r in links if (r["src"], r["src_port"]) in ddr} == \
           {(a[0], a[1], b[0], b[1]) for a in ddr for b in ddr if a != b}


@needs_real_dumps
def test_what_the_reader_read_past_is_warned_by_check_and_run(tmp_path):
    # The reader's warnings (here the man page's cable ends that disagree on their rate) were kept
    # and never shown: the scenario said nothing of the slower rate it took.
    path = tmp_path / "s.toml"
    path.write_text(f'[topology]\nkind = "ibnetdiscover"\npath = "{REAL_DUMPS / "manpage-voltaire-2007.topo"}"\n'
                    '[[traffic]]\nload = 0.1\n[run]\nduration_us = 2\nwarmup_us = 0\n')
    expected = "topology.path: " + str(REAL_DUMPS / "manpage-voltaire-2007.topo") + ":15: the two ends of this link " \
        "disagree (4xSDR here, 1xSDR at line 26); using the slower"
    assert expected in qoslab.Scenario.from_toml(path).warnings()
    for command in (["check", str(path)], ["run", str(path), "--out", str(tmp_path / "o")]):
        result = CliRunner().invoke(app, command)
        assert result.exit_code == 0 and expected in " ".join(result.stderr.split()), result.output


@needs_real_dumps
def test_a_control_character_inside_a_description_does_not_end_its_line():
    # A \r in a node description split the line there ("a port line before any Switch or Ca
    # record" at the wrong line); lines end at \n, as ibnetdiscover writes them. CRLF still reads.
    text = (REAL_DUMPS / "nvidia-howto-2016.topo").read_text()
    whole, _ = parse_fabric(text)
    odd = text.replace('"r-ufm96 HCA-1"', '"r-ufm96\rHCA-1"').replace('"r-ufm216 HCA-1"', '"r-ufm216\x0cHCA-1"')
    assert odd != text
    fabric, _ = parse_fabric(odd)
    assert len(fabric.endpoints()) == len(whole.endpoints())
    assert len(parse_fabric(text.replace("\n", "\r\n"))[0].endpoints()) == len(whole.endpoints())
