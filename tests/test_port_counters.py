"""Port counters as perfquery shows them (`run.port_counters`), checked against closed forms, and
real perfquery dumps read back and compared (`qoslab compare-counters`), bad dumps refused by
file and line."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
import qoslab
from qoslab.cli import app
from qoslab.counters import (
    TICK_BYTES,
    CounterDumpError,
    compare,
    parse_dump,
)
from qoslab.simulate import simulate
from typer.testing import CliRunner

HEADER = 26
RATE_BYTES_PER_NS = 100 / 8


def by_port(table, node, port):
    rows = [r for r in table.to_pylist() if r["node"] == node and r["port"] == port]
    assert len(rows) == 1
    return rows[0]


def test_a_lone_message_counts_its_octets_less_the_vcrc_in_four_byte_words():
    message = 10_000  # three packets: 4096 + 4096 + 1808
    scenario = qoslab.Scenario(
        topology={"kind": "single-switch", "hosts": 2},
        jobs=[{"placement": "hosts", "hosts": [0, 1], "workload": {"kind": "ping-pong", "bytes": message, "iterations": 1}}],
        mpi={"eager_threshold_bytes": 1 << 20},
        run={"port_counters": True},
    )
    table = simulate(scenario).port_counters
    packets = math.ceil(message / 4096)
    words = (message + packets * (HEADER - 2)) // 4
    h0, switch_in = by_port(table, "H0", 1), by_port(table, "S1-0", 1)
    # The ping and the pong: each host sends one message and receives one.
    assert (h0["PortXmitData"], h0["PortXmitPkts"]) == (words, packets)
    assert (h0["PortRcvData"], h0["PortRcvPkts"]) == (words, packets)
    assert (switch_in["PortRcvData"], switch_in["PortRcvPkts"]) == (words, packets)
    assert h0["PortXmitWait"] == 0 and h0["PortXmitDataVL0"] == words


def test_two_senders_into_one_port_each_wait_half_the_window():
    scenario = qoslab.Scenario(
        topology={"kind": "single-switch", "hosts": 4},
        traffic=[{"pattern": "incast", "hosts": [0, 1], "destinations": [3], "load": "saturate"}],
        run={"duration_us": 220, "warmup_us": 20, "port_counters": True},
    )
    table = simulate(scenario).port_counters
    window_ns, packet_ns = 200_000, (4096 + HEADER) / RATE_BYTES_PER_NS
    for host in ("H0", "H1"):
        row = by_port(table, host, 1)
        # The shared output carries one packet of each in turn, so each sender sits idle for credits
        # half the time: ticks of 8 bytes at 12.5 bytes/ns.
        waited_ns = row["PortXmitWait"] * TICK_BYTES / RATE_BYTES_PER_NS
        assert waited_ns == pytest.approx(window_ns / 2, abs=2 * packet_ns)
        assert row["PortVLXmitWait0"] == row["PortXmitWait"]
    out = by_port(table, "S1-0", 4)
    assert out["PortXmitWait"] == 0
    assert 4 * out["PortXmitData"] == pytest.approx(window_ns * RATE_BYTES_PER_NS, rel=0.01)


def test_the_text_form_reads_back_as_the_same_counters(tmp_path):
    scenario = qoslab.Scenario(
        topology={"kind": "xgft", "m": [4, 2], "w": [1, 2]},
        traffic=[{"load": 0.5}], run={"duration_us": 60, "warmup_us": 10, "port_counters": True})
    result = simulate(scenario)
    result.save(tmp_path)
    assert {"port_counters.parquet", "port_counters.txt"} <= set(result.written())
    dump = parse_dump((tmp_path / "port_counters.txt").read_text(), "port_counters.txt")
    for row in result.port_counters.to_pylist():
        read = dump.counters[(row["lid"], row["port"])]
        for name in ("PortXmitData", "PortRcvData", "PortXmitPkts", "PortRcvPkts", "PortXmitWait", "PortVLXmitWait1"):
            assert read[name] == row[name], name


def counters_run(tmp_path: Path) -> Path:
    path = tmp_path / "s.toml"
    path.write_text('[topology]\nkind = "single-switch"\nhosts = 4\n[[traffic]]\npattern = "incast"\nhosts = [0, 1]\n'
                    'destinations = [3]\nload = "saturate"\n[run]\nduration_us = 120\nwarmup_us = 20\nport_counters = true\n')
    out = tmp_path / "run"
    assert CliRunner().invoke(app, ["run", str(path), "--out", str(out)]).exit_code == 0
    return out


def scaled_dump(text: str, factor: int) -> str:
    return re.sub(r"(:\.+)(\d+)$", lambda m: m[1] + str(int(m[2]) * factor), text, flags=re.MULTILINE)


def test_compare_counters_sets_measured_beside_simulated(tmp_path):
    out = counters_run(tmp_path)
    text = (out / "port_counters.txt").read_text()
    # A "cluster" that did exactly what was simulated, over an interval 3x the window, 3x the counts.
    (tmp_path / "before.txt").write_text(scaled_dump(text, 0))
    (tmp_path / "after.txt").write_text(scaled_dump(text, 3))
    result = CliRunner().invoke(app, ["compare-counters", str(out), str(tmp_path / "before.txt"),
                                      str(tmp_path / "after.txt"), "--interval", "0.0003", "--out", str(tmp_path / "c")])
    assert result.exit_code == 0, result.output
    import pandas as pd

    table = pd.read_csv(tmp_path / "c" / "comparison.csv")
    assert (tmp_path / "c" / "comparison.png").exists()
    assert table["real_utilisation"].to_numpy() == pytest.approx(table["simulated_utilisation"].to_numpy(), abs=1e-6)
    assert table["real_wait"].to_numpy() == pytest.approx(table["simulated_wait"].to_numpy(), abs=1e-6)
    h0 = table[table["node"] == "H0"].iloc[0]
    assert h0["real_wait"] == pytest.approx(0.5, abs=0.01) and h0["real_utilisation"] == pytest.approx(0.5, abs=0.01)
    assert "above 100%" not in result.stderr
    # An interval a thousand times too short: measured utilisation beyond the link's, flagged.
    short = CliRunner().invoke(app, ["compare-counters", str(out), str(tmp_path / "before.txt"),
                                     str(tmp_path / "after.txt"), "--interval", "3e-7", "--out", str(tmp_path / "s")])
    assert short.exit_code == 0 and "measured above 100% of their link" in short.stderr, short.output


@pytest.mark.parametrize("mangle, words", [
    (lambda t: t.split("PortXmitWait:")[0], "without PortXmitWait: a truncated dump?"),
    (lambda t: t.replace("Lid 1 port 1", "Lid 77 port 1"), "Lid 77 port 1 is not a port of the simulated fabric"),
    (lambda t: t.replace("PortXmitData:....................", "PortXmitData:....................x", 1),
     "PortXmitData: expected a number"),
    (lambda t: "garbage line\n" + t, "expected perfquery output"),
    (lambda t: "", "no perfquery counter blocks"),
])
def test_bad_dumps_are_refused_by_file_and_line(tmp_path, mangle, words):
    out = counters_run(tmp_path)
    text = (out / "port_counters.txt").read_text()
    (tmp_path / "before.txt").write_text(scaled_dump(text, 0))
    (tmp_path / "after.txt").write_text(mangle(text))
    result = CliRunner().invoke(app, ["compare-counters", str(out), str(tmp_path / "before.txt"),
                                      str(tmp_path / "after.txt"), "--interval", "1", "--out", str(tmp_path / "c")])
    assert result.exit_code == 2, result.output
    assert words in result.output and "after.txt" in result.output and "Traceback" not in result.output


def test_counters_going_down_and_missing_inputs_are_errors(tmp_path):
    out = counters_run(tmp_path)
    text = (out / "port_counters.txt").read_text()
    (tmp_path / "before.txt").write_text(scaled_dump(text, 2))
    (tmp_path / "after.txt").write_text(text)
    runner = CliRunner()
    result = runner.invoke(app, ["compare-counters", str(out), str(tmp_path / "before.txt"), str(tmp_path / "after.txt"),
                                 "--interval", "1"])
    assert result.exit_code == 2 and "went down between the dumps" in result.output
    # Only the wait going down: it was taken as a negative measured wait, without a word.
    waits_down = re.sub(r"^(PortXmitWait:\.+)(\d+)$", lambda m: m[1] + str(int(m[2]) + 5), text, flags=re.MULTILINE)
    (tmp_path / "before.txt").write_text(waits_down)
    result = runner.invoke(app, ["compare-counters", str(out), str(tmp_path / "before.txt"), str(tmp_path / "after.txt"),
                                 "--interval", "1"])
    assert result.exit_code == 2 and "PortXmitWait went down between the dumps" in " ".join(result.output.split())
    result = runner.invoke(app, ["compare-counters", str(out), str(tmp_path / "after.txt"), str(tmp_path / "after.txt")])
    assert result.exit_code == 2 and "--interval" in result.output
    result = runner.invoke(app, ["compare-counters", str(tmp_path), str(tmp_path / "after.txt"),
                                 str(tmp_path / "after.txt"), "--interval", "1"])
    assert result.exit_code == 2 and "run.port_counters = true" in result.output


def test_compare_needs_a_port_in_both_dumps():
    from qoslab.counters import Dump

    with pytest.raises(CounterDumpError, match="no port appears in both"):
        import pyarrow as pa

        table = pa.table({"lid": [1], "port": [1], "node": ["H0"], "node_guid": ["0x1"], "link_gbps": [100.0],
                          "PortXmitData": [0], "PortXmitWait": [0]})
        compare(table, 1000.0, Dump("a", {(1, 1): {}}, {(1, 1): 1}), Dump("b", {}, {}), 1.0)


@pytest.mark.parametrize("summary", ['{"window_ns": null}', "[1, 2]", '{"window_ns": ["a", "b"]}',
                                     '{"window_ns": [5, 5]}', '{"window_ns": [10, 5]}'])
def test_a_run_summary_without_a_window_is_refused_by_name(tmp_path, summary):
    # Tracebacks (TypeError, ZeroDivisionError) before; [10, 5] gave a negative window silently.
    out = counters_run(tmp_path)
    text = (out / "port_counters.txt").read_text()
    (tmp_path / "d.txt").write_text(scaled_dump(text, 0))
    (out / "summary.json").write_text(summary)
    result = CliRunner().invoke(app, ["compare-counters", str(out), str(tmp_path / "d.txt"), str(tmp_path / "d.txt"),
                                      "--interval", "1", "--out", str(tmp_path / "c")])
    assert result.exit_code == 2 and "summary.json: window_ns: expected [start, end]" in result.stderr, result.output


def test_the_interval_is_a_required_option(tmp_path):
    # Its help said "[default: 0.0]", a value always refused.
    result = CliRunner().invoke(app, ["compare-counters", str(tmp_path), str(tmp_path), str(tmp_path)])
    assert result.exit_code == 2 and "--interval" in result.output
    assert "default: 0.0" not in CliRunner().invoke(app, ["compare-counters", "--help"]).output


REAL_DUMPS = Path(__file__).resolve().parents[1].parent / "shared" / "real-data" / "ibnetdiscover"
needs_real_dumps = pytest.mark.skipif(not REAL_DUMPS.is_dir(), reason=f"{REAL_DUMPS} is not here (../shared/real-data)")


def perfquery_block(lid: int, port: int, data: int) -> str:
    values = "".join(f"{name}:{'.' * (33 - len(name) - 1)}{data}\n"
                     for name in ("PortXmitData", "PortRcvData", "PortXmitPkts", "PortRcvPkts"))
    return (f"# Port extended counters: Lid {lid} port {port} (CapMask: 0x1300 CapMask2: 0x0000000)\n"
            f"PortSelect:......................{port}\nCounterSelect:...................0x0000\n{values}")


def compare_on_dump(tmp_path: Path, topo: str, lid: int, port: int):
    (tmp_path / "fabric.topo").write_text(topo)
    (tmp_path / "s.toml").write_text('[topology]\nkind = "ibnetdiscover"\npath = "fabric.topo"\n[[traffic]]\nload = 0.1\n'
                                     "[run]\nduration_us = 5\nwarmup_us = 0\nport_counters = true\n")
    runner = CliRunner()
    run = runner.invoke(app, ["run", str(tmp_path / "s.toml"), "--out", str(tmp_path / "run")])
    assert run.exit_code == 0, run.output
    (tmp_path / "t0.txt").write_text(perfquery_block(lid, port, 0))
    (tmp_path / "t1.txt").write_text(perfquery_block(lid, port, 1000))
    return runner.invoke(app, ["compare-counters", str(tmp_path / "run"), str(tmp_path / "t0.txt"),
                               str(tmp_path / "t1.txt"), "--interval", "1", "--out", str(tmp_path / "c")])


@needs_real_dumps
def test_a_real_dumps_switch_lid_pairs_perfquery_with_that_switch(tmp_path):
    # nvidia-howto-2016: the SX6012 is "enhanced port 0 lid 174"; its port 8 is r-ufm96's 4xSDR link.
    result = compare_on_dump(tmp_path, (REAL_DUMPS / "nvidia-howto-2016.topo").read_text(), 174, 8)
    assert result.exit_code == 0, result.output
    import pandas as pd

    row = pd.read_csv(tmp_path / "c" / "comparison.csv").iloc[0]
    assert (row["node_guid"], row["lid"], row["port"]) == ("0xf4521403005764b0", 174, 8)
    assert row["real_utilisation"] == pytest.approx(4000 / (8e9 / 8))  # 1000 words over 1 s of a 4xSDR link
    (tmp_path / "uncabled").mkdir()
    result = compare_on_dump(tmp_path / "uncabled", (REAL_DUMPS / "nvidia-howto-2016.topo").read_text(), 174, 4)
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "Lid 174 is MF0;switch-de779e:SX6012/U1 (0xf4521403005764b0), whose port 4 is not cabled" in \
        " ".join(result.output.split())


@needs_real_dumps
def test_a_lid_naming_two_simulated_ports_is_refused_naming_them(tmp_path):
    # The dump gives r-ufm96 r-ufm216's LID 2: a perfquery dump of Lid 2 port 1 may be either.
    topo = (REAL_DUMPS / "nvidia-howto-2016.topo").read_text().replace(
        '# lid 1 lmc 0 "MF0;switch-de779e:SX6012/U1"', '# lid 2 lmc 0 "MF0;switch-de779e:SX6012/U1"')
    result = compare_on_dump(tmp_path, topo, 2, 1)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and "t0.txt:1: Lid 2 port 1 names 2 ports" in result.output
    assert "0xe41d2d030061f957" in result.output and "0xe41d2d03005cf1f8" in result.output
    from qoslab.io.ibnetdiscover import parse_fabric

    _, warnings = parse_fabric(topo, "dup.topo")
    assert any("LID 2 is given at line" in w for w in warnings), warnings
