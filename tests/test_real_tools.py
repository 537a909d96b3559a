"""Round trip against the real InfiniBand tools: a qoslab fat tree exported to ibsim, routed and
QoS-programmed by the real OpenSM from `qoslab export opensm`, then read back with ibnetdiscover,
smpquery and ibroute; and congestion control exported, read by OpenSM and sent as the MADs ibsim
receives (ibsim has no congestion-control agent: see test_ibsim_has_no_congestion_control_agent).
`.ci/run` installs opensm, ibsim-utils and infiniband-diags; where they are
missing these tests skip, saying so. Every process a test starts is stopped by its pid."""

from __future__ import annotations

import ipaddress
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pyarrow.compute as pc
import pytest
import qoslab
from qoslab.deploy import export_opensm
from qoslab.io.ibnetdiscover import parse_fabric, write_ibsim
from qoslab.io.ibroute import read_dumps

UMAD2SIM = Path("/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so")
TOOLS = ("ibsim", "opensm", "ibnetdiscover", "smpquery", "ibroute")
missing = [t for t in TOOLS if shutil.which(t) is None and not Path(f"/usr/sbin/{t}").exists()]
pytestmark = pytest.mark.skipif(
    bool(missing) or not UMAD2SIM.exists(),
    reason=f"the real InfiniBand tools are not installed ({', '.join(missing) or UMAD2SIM}): "
           "apt-get install opensm ibsim-utils infiniband-diags",
)

SCENARIO = {
    "seed": 3,
    "fabric": {"data_vls": 4},
    "topology": {"kind": "xgft", "m": [4, 4], "w": [1, 2]},
    "qos": {
        "ca": {"vlarb_high": "1:64", "vlarb_low": "0:64,2:192,3:32", "high_limit": 4,
               "sl2vl": [0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3]},
        "swe": {"vlarb_high": "1:128", "vlarb_low": "0:32,2:255,2:255,3:16",
                "sl2vl": [0, 1, 2, 3, 3, 2, 1, 0, 0, 1, 2, 3, 3, 2, 1, 0]},
    },
    "jobs": [
        {"name": "a2a", "nodes": 8, "placement": "fragmented", "sl": 1,
         "workload": {"kind": "all-to-all", "bytes": 4096, "iterations": 1}},
        {"name": "pairs", "nodes": 8, "placement": "fragmented", "sl": 2,
         "workload": {"kind": "random-pairs", "iterations": 2}},
    ],
}


def tool(name: str) -> str:
    return shutil.which(name) or f"/usr/sbin/{name}"


class Fabric:
    """An ibsim fabric with OpenSM run once over it; tools run against it by LD_PRELOAD."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.env = {**os.environ, "LD_PRELOAD": str(UMAD2SIM), "OSM_TMP_DIR": str(folder),
                    "OSM_CACHE_DIR": str(folder)}
        self.procs: list[subprocess.Popen] = []

    def start_ibsim(self, net: Path, *flags: str) -> None:
        """`flags`: more of ibsim's options (-v -v -v: every MAD it receives dumped to ibsim.log)."""
        log = open(self.folder / "ibsim.log", "w")  # noqa: SIM115 - the daemon writes it for its lifetime
        proc = subprocess.Popen([tool("ibsim"), "-s", *flags, str(net)], stdin=subprocess.PIPE, stdout=log,
                                stderr=subprocess.STDOUT, cwd=self.folder, start_new_session=True)
        self.procs.append(proc)
        # ibsim listens once it has read the net file; a tool run before then cannot attach.
        for _ in range(100):
            if "sim>" in (self.folder / "ibsim.log").read_text():
                return
            if proc.poll() is not None:
                raise AssertionError(f"ibsim exited: {(self.folder / 'ibsim.log').read_text()}")
            time.sleep(0.05)
        raise AssertionError("ibsim did not start")

    def run(self, *args: str, timeout: float = 60) -> str:
        proc = subprocess.Popen([tool(args[0]), *args[1:]], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env=self.env, cwd=self.folder, text=True, start_new_session=True)
        self.procs.append(proc)
        try:
            out, err = proc.communicate(timeout=timeout)
        finally:
            self.stop(proc)
        assert proc.returncode == 0, f"{args}: exit {proc.returncode}: {err}"
        return out

    def start(self, *args: str) -> subprocess.Popen:
        """A tool left running (OpenSM as the subnet's master), stopped by close()."""
        proc = subprocess.Popen([tool(args[0]), *args[1:]], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                env=self.env, cwd=self.folder, start_new_session=True)
        self.procs.append(proc)
        return proc

    def stop(self, proc: subprocess.Popen) -> None:
        """Ends the process and its group: SIGTERM, then SIGKILL if it has not gone within 5 s
        (an OpenSM whose ibsim is gone can hang in its shutdown and outlive the tests)."""
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                pass
            try:
                proc.wait(timeout=5)
                return
            except subprocess.TimeoutExpired:
                continue

    def close(self) -> None:
        for proc in reversed(self.procs):
            self.stop(proc)


@pytest.fixture(scope="module", params=["ftree", "minhop"])
def routed(request, tmp_path_factory):
    """The scenario's fabric in ibsim, configured by OpenSM with the exported QoS and the given
    routing engine; yields (scenario, fabric handle, ibnetdiscover text, ibroute dump folder)."""
    folder = tmp_path_factory.mktemp(f"ibsim-{request.param}")
    scenario = qoslab.Scenario(**SCENARIO)
    net = folder / "fabric.net"
    net.write_text(write_ibsim(scenario.tool_fabric()))
    # As an administrator would: OpenSM's own template with the site's routing engine, the QoS
    # options merged into it by the export.
    template = folder / "template.conf"
    subprocess.run([tool("opensm"), "-c", str(template)], capture_output=True, timeout=60, check=False)
    base = re.sub(r"(?m)^routing_engine .*$", f"routing_engine {request.param}", template.read_text())
    assert f"routing_engine {request.param}" in base
    export_opensm(scenario, folder / "export", policy_file=str(folder / "export" / "qos-policy.conf"), base=base)
    conf = folder / "export" / "opensm.conf"
    fabric = Fabric(folder)
    try:
        fabric.start_ibsim(net)
        fabric.run("opensm", "-o", "-F", str(conf), "-f", str(folder / "opensm.log"), "-s", "0", timeout=120)
        log = (folder / "opensm.log").read_text()
        assert "osm_qos_parse_policy_file" in log and "syntax error" not in log.lower(), log[-2000:]
        topo = fabric.run("ibnetdiscover")
        dumps = folder / "ibroute"
        dumps.mkdir()
        for lid in sorted({int(x) for x in re.findall(r"base port 0 lid (\d+)", topo)}):
            (dumps / f"switch-lid{lid}.txt").write_text(fabric.run("ibroute", str(lid)))
        yield scenario, fabric, topo, dumps
    finally:
        fabric.close()


def cabling(fab) -> set[frozenset]:
    ends = set()
    for c in fab.cables:
        a = (fab.nodes[c.a[0]].guid, c.a[1])
        b = (fab.nodes[c.b[0]].guid, c.b[1])
        ends.add(frozenset([a, b, (c.width, c.speed)]))
    return ends


def test_ibnetdiscover_of_the_exported_fabric_imports_to_the_same_fabric(routed):
    scenario, _, topo, _ = routed
    mine = scenario.tool_fabric()
    seen, warnings = parse_fabric(topo, "ibnetdiscover")
    assert warnings == []
    assert cabling(seen) == cabling(mine)
    assert sorted((n.guid, n.description, n.ports) for n in seen.nodes) == \
        sorted((n.guid, n.description, n.ports) for n in mine.nodes)
    # And as a qoslab topology: the same hosts, in the same order, with the same engine cabling.
    saved = routed[1].folder / "discovered.topo"
    saved.write_text(topo)
    imported = qoslab.Scenario(topology={"kind": "ibnetdiscover", "path": str(saved)})
    assert imported.host_count() == scenario.host_count() == 16
    assert [e.name for e in imported.topology._fabric.endpoints()] == [f"H{i}" for i in range(16)]


def lids(topo: str) -> tuple[dict[str, int], dict[str, int]]:
    switch = {m[1]: int(m[2]) for m in re.finditer(r'Switch\s+\d+\s+"S-[0-9a-f]+"\s+# "([^"]+)" base port 0 lid (\d+)', topo)}
    hosts = {}
    for m in re.finditer(r'Ca\s+\d+\s+"H-[0-9a-f]+"\s+# "([^"]+)"\n\[1\]\([0-9a-f]+\)\s+"S-[0-9a-f]+"\[\d+\]\s+# lid (\d+)', topo):
        hosts[m[1]] = int(m[2])
    return switch, hosts


def sl2vl_rows(text: str) -> list[list[int]]:
    return [[int(v) for v in row.split("|")[1:-1]] for row in re.findall(r"ports: in\s+\d+, out\s+\d+: (\|.*\|)", text)]


def vlarb(text: str) -> dict[str, list[tuple[int, int]]]:
    tables = {}
    for name, block in re.findall(r"# (Low|High) priority VL Arbitration Table:\n(VL.*\nWEIGHT.*)", text):
        vl_row, weight_row = block.split("\n")
        vls = [int(v, 16) for v in vl_row.split("|")[1:-1]]
        weights = [int(w, 16) for w in weight_row.split("|")[1:-1]]
        tables[name.lower()] = [(v, w) for v, w in zip(vls, weights) if w > 0]
    return tables


def expected_vlarb(entries: list[tuple[int, int]], cap: int) -> list[tuple[int, int]]:
    return [(v, w) for v, w in list(entries)[:cap] if w > 0]


def test_opensm_programs_the_tables_qoslab_simulates(routed):
    scenario, fabric, topo, _ = routed
    switch_lids, host_lids = lids(topo)
    assert len(switch_lids) == 6 and len(host_lids) == 16
    ca, swe = scenario.port_qos("ca"), scenario.port_qos("swe")
    for host in ("H0", "H7", "H15"):
        out = fabric.run("smpquery", "sl2vl", str(host_lids[host]), "1")
        assert sl2vl_rows(out) == [list(ca["sl2vl"])]
        arb = vlarb(fabric.run("smpquery", "vlarb", str(host_lids[host]), "1"))
        cap = int(re.search(r"LowCap (\d+)", fabric.run("smpquery", "vlarb", str(host_lids[host]), "1"))[1])
        assert arb["low"] == expected_vlarb(ca["vlarb_low"], cap)
        assert arb["high"] == expected_vlarb(ca["vlarb_high"], cap)
    for name, port in (("S1-0", 1), ("S1-3", 6), ("S2-1", 2)):
        out = fabric.run("smpquery", "sl2vl", str(switch_lids[name]), str(port))
        rows = sl2vl_rows(out)
        assert rows and all(r == list(swe["sl2vl"]) for r in rows), out
        arb = vlarb(fabric.run("smpquery", "vlarb", str(switch_lids[name]), str(port)))
        assert arb["low"] == expected_vlarb(swe["vlarb_low"], 8)
        assert arb["high"] == expected_vlarb(swe["vlarb_high"], 8)


def dump_paths(scenario, dumps_folder: Path) -> dict[tuple[int, int], list[tuple[int, int]]]:
    """Walks the ibroute dumps themselves (not qoslab's table): host pair -> [(switch guid, port)]."""
    fab = scenario.tool_fabric()
    peer = {}
    for c in fab.cables:
        peer[c.a], peer[c.b] = c.b, c.a
    hosts = fab.endpoints()
    guid_of_host = {fab.nodes[e.node].port_guid(e.port): i for i, e in enumerate(hosts)}
    lft: dict[int, dict[int, int]] = {}
    lid_of: dict[int, int] = {}
    for d in read_dumps(dumps_folder):
        lft[d.guid] = {e.lid: e.port for e in d.entries}
        for e in d.entries:
            if e.guid in guid_of_host:
                lid_of[guid_of_host[e.guid]] = e.lid
    paths = {}
    for s, src in enumerate(hosts):
        for d in range(len(hosts)):
            if d == s:
                continue
            node, path = peer[(src.node, src.port)][0], []
            while fab.nodes[node].kind == "switch":
                port = lft[fab.nodes[node].guid][lid_of[d]]
                path.append((fab.nodes[node].guid, port))
                node = peer[(node, port)][0]
                assert len(path) < 10
            assert node == hosts[d].node
            paths[(s, d)] = path
    return paths


def test_ibroute_dumps_drive_an_lft_simulation_along_the_dumped_paths(routed):
    scenario, _, _, dumps = routed
    paths = dump_paths(scenario, dumps)
    lft = qoslab.Scenario(**{**SCENARIO, "routing": {"algorithm": "lft", "lft": str(dumps)}})
    tables = lft.forwarding_tables()
    fab = lft.tool_fabric()
    switches = fab.switch_indices()
    engine_switch = {fab.nodes[n].guid: i for i, n in enumerate(switches)}
    for (_, d), path in paths.items():
        for guid, port in path:
            assert tables[engine_switch[guid]][d] == port - 1
    # A shift permutation simulated with the dumps' tables loads exactly the dumped paths' links.
    shifted = qoslab.Scenario(**{**SCENARIO, "jobs": [], "routing": {"algorithm": "lft", "lft": str(dumps)},
                                 "traffic": [{"pattern": "shift", "shift": 5, "load": 0.2, "message_bytes": 4096}],
                                 "run": {"duration_us": 30, "warmup_us": 0}})
    links = qoslab.simulate(shifted).links
    used = links.filter(pc.greater(links["bytes"], 0))
    names = fab.switch_names()
    guid_by_name = {names[n]: fab.nodes[n].guid for n in switches}
    loaded = set()
    for row in used.select(["src", "src_port"]).to_pylist():
        if row["src"] in guid_by_name:
            loaded.add((guid_by_name[row["src"]], row["src_port"] + 1))
    expected = {hop for s in range(16) for hop in paths[(s, (s + 5) % 16)]}
    assert loaded == expected


# Job names OpenSM's qos-policy.conf syntax would break on unquoted (keywords, ',', '#', blanks) or
# a shell would run: the exported policy file must still load, and give each job its SL.
POLICY_JOBS = {
    "hostile": [("port-groups, #1 sl: 3", 1), ("a$(touch /tmp/x)", 2), ("plain", 0)],
    "no-jobs": [],
}


@pytest.fixture(scope="module", params=sorted(POLICY_JOBS))
def running_sm(request, tmp_path_factory):
    """OpenSM left running on an ibsim fabric with the exported opensm.conf and qos-policy.conf."""
    folder = tmp_path_factory.mktemp(f"sm-{request.param}")
    jobs = [{"name": name, "nodes": 4, "placement": "contiguous", "sl": sl,
             "workload": {"kind": "all-to-all", "bytes": 4096, "iterations": 1}} for name, sl in POLICY_JOBS[request.param]]
    scenario = qoslab.Scenario(**{**SCENARIO, "jobs": jobs})
    net = folder / "fabric.net"
    net.write_text(write_ibsim(scenario.tool_fabric()))
    export_opensm(scenario, folder / "export", policy_file=str(folder / "export" / "qos-policy.conf"))
    fabric = Fabric(folder)
    try:
        fabric.start_ibsim(net)
        log = folder / "opensm.log"
        # -d2: OpenSM flushes its log at each message, so "SUBNET UP" is seen when it happens.
        fabric.start("opensm", "-F", str(folder / "export" / "opensm.conf"), "-f", str(log), "-s", "0", "-d2")
        for _ in range(600):
            if log.exists() and "SUBNET UP" in log.read_text():
                break
            time.sleep(0.1)
        else:
            raise AssertionError(f"OpenSM did not bring the subnet up: {log.read_text()[-2000:] if log.exists() else ''}")
        yield scenario, fabric, log.read_text()
    finally:
        fabric.close()


def path_sl(fabric: Fabric, src_guid: int, dst_guid: int) -> int:
    """The SL the running SA gives in the PathRecord from one port GUID to another."""
    gid = lambda guid: ipaddress.IPv6Address((0xFE80 << 112) | guid).compressed
    out = fabric.run("saquery", "-p", "--sgid-to-dgid", f"{gid(src_guid)}-{gid(dst_guid)}")
    found = re.findall(r"\bsl\.+0x([0-9a-f]+)", out)
    assert len(found) == 1, out
    return int(found[0], 16)


def test_opensm_loads_the_exported_policy_and_its_path_records_give_each_job_its_sl(running_sm):
    scenario, fabric, log = running_sm
    assert "Loading QoS policy file" in log and "ERR AC" not in log, log[-3000:]
    fab = scenario.tool_fabric()
    guid = [fab.nodes[e.node].port_guid(e.port) for e in fab.endpoints()]
    jobs = scenario.resolved()["jobs"]
    for job in jobs:
        first, *rest = job["hosts"]
        assert path_sl(fabric, guid[first], guid[rest[-1]]) == job["sl"], job["name"]
        assert path_sl(fabric, guid[rest[0]], guid[first]) == job["sl"], job["name"]
    used = {h for job in jobs for h in job["hosts"]}
    outside = [h for h in range(len(guid)) if h not in used]
    # Between two jobs, or outside every job: the DEFAULT level, SL 0.
    if len(jobs) >= 2:
        assert path_sl(fabric, guid[jobs[0]["hosts"][0]], guid[jobs[1]["hosts"][0]]) == 0
    assert path_sl(fabric, guid[outside[0]], guid[outside[-1]]) == 0


def test_real_perfquery_output_reads_as_counter_dumps_of_the_discovered_fabric(routed):
    from qoslab.counters import parse_dump

    _, fabric, topo, _ = routed
    discovered, _ = parse_fabric(topo, "ibnetdiscover")
    switch_lids, host_lids = lids(topo)
    lid = switch_lids["S1-0"]
    text = "".join(fabric.run("perfquery", *flags, "-l", str(lid), "1-4")
                   for flags in ((), ("-x",), ("--vlxmitcounters",)))
    dump = parse_dump(text, "perfquery")
    assert set(dump.counters) == {(lid, p) for p in range(1, 5)}
    for counters in dump.counters.values():
        assert {"PortXmitData", "PortRcvData", "PortXmitPkts", "PortRcvPkts", "PortXmitWait"} <= set(counters)
    # The LIDs qoslab reads from the same fabric's ibnetdiscover dump address these counters.
    switch = next(i for i, n in enumerate(discovered.nodes) if n.description == "S1-0")
    assert discovered.lid(switch, 1) == lid
    host = next(i for i, n in enumerate(discovered.nodes) if n.description == "H0")
    assert discovered.lid(host, 1) == host_lids["H0"]


# Congestion control (issue 17): non-default values everywhere, and a CCT of 70 entries, so that
# OpenSM sends it in two 64-entry blocks.
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
    net = folder / "fabric.net"
    net.write_text(write_ibsim(scenario.tool_fabric()))
    export_opensm(scenario, folder / "export", policy_file=str(folder / "export" / "qos-policy.conf"))
    fabric = Fabric(folder)
    try:
        fabric.start_ibsim(net, "-v", "-v", "-v")
        stdout = fabric.run("opensm", "-o", "-F", str(folder / "export" / "opensm.conf"), "-f",
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
