"""Round trip against the real InfiniBand tools: a qoslab fat tree exported to ibsim, routed and
QoS-programmed by the real OpenSM from `qoslab export opensm`, then read back with ibnetdiscover,
smpquery and ibroute (congestion control: test_real_tools_cc.py). ib_harness.py runs the tools:
`.ci/run` installs opensm, ibsim-utils and infiniband-diags; where they are missing these tests
skip, saying so. Every process a test starts is stopped by its pid."""

from __future__ import annotations

import ipaddress
import re
import subprocess
import time
from pathlib import Path

import pyarrow.compute as pc
import pytest
import qoslab
from ib_harness import Fabric, export_to_ibsim, lids, requires_ib_tools, sl2vl_rows, tool
from qoslab.io.ibnetdiscover import parse_fabric
from qoslab.io.ibroute import read_dumps

pytestmark = requires_ib_tools

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


@pytest.fixture(scope="module", params=["ftree", "minhop"])
def routed(request, tmp_path_factory):
    """The scenario's fabric in ibsim, configured by OpenSM with the exported QoS and the given
    routing engine; yields (scenario, fabric handle, ibnetdiscover text, ibroute dump folder)."""
    folder = tmp_path_factory.mktemp(f"ibsim-{request.param}")
    scenario = qoslab.Scenario(**SCENARIO)
    # As an administrator would: OpenSM's own template with the site's routing engine, the QoS
    # options merged into it by the export.
    template = folder / "template.conf"
    subprocess.run([tool("opensm"), "-c", str(template)], capture_output=True, timeout=60, check=False)
    base = re.sub(r"(?m)^routing_engine .*$", f"routing_engine {request.param}", template.read_text())
    assert f"routing_engine {request.param}" in base
    net, conf = export_to_ibsim(folder, scenario, base=base)
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
    # `ibnetdiscover -f` appends the raw PortInfo codes to each port line: the same links and rates.
    full = routed[1].run("ibnetdiscover", "-f")
    assert re.search(r"x[A-Z]+ s=\d+ w=\d+ v=\d+", full), full[:2000]
    seen_full, warnings = parse_fabric(full, "ibnetdiscover -f")
    assert warnings == [] and cabling(seen_full) == cabling(mine)
    # And as a qoslab topology: the same hosts, in the same order, with the same engine cabling.
    saved = routed[1].folder / "discovered.topo"
    saved.write_text(topo)
    imported = qoslab.Scenario(topology={"kind": "ibnetdiscover", "path": str(saved)})
    assert imported.host_count() == scenario.host_count() == 16
    assert [e.name for e in imported.topology._fabric.endpoints()] == [f"H{i}" for i in range(16)]


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
    net, conf = export_to_ibsim(folder, scenario)
    fabric = Fabric(folder)
    try:
        fabric.start_ibsim(net)
        log = folder / "opensm.log"
        # -d2: OpenSM flushes its log at each message, so "SUBNET UP" is seen when it happens.
        fabric.start("opensm", "-F", str(conf), "-f", str(log), "-s", "0", "-d2")
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


REAL_DUMP = Path(__file__).resolve().parents[2] / "shared" / "real-data" / "ibnetdiscover" / "bee-cluster-2023.topo"


@pytest.mark.skipif(not REAL_DUMP.exists(), reason=f"{REAL_DUMP} is not here (../shared/real-data)")
def test_a_real_dumps_port_guids_survive_the_ibsim_export(tmp_path):
    """The exported qos-policy.conf names HCA port GUIDs; in this dump a port's GUID is its node's,
    which ibsim (port p: caguid + p) can only give when the net file's caguid is one lower."""
    from qoslab.io.ibnetdiscover import read_fabric, write_ibsim

    dump, _ = read_fabric(REAL_DUMP)
    net = tmp_path / "fabric.net"
    net.write_text(write_ibsim(dump))
    fabric = Fabric(tmp_path)
    try:
        fabric.start_ibsim(net)
        discovered, _ = parse_fabric(fabric.run("ibnetdiscover"), "ibnetdiscover")
    finally:
        fabric.close()
    guids = sorted(n.port_guid(1) for n in dump.nodes if n.kind == "ca")
    assert len(guids) == 96 and sorted(n.port_guid(1) for n in discovered.nodes if n.kind == "ca") == guids
