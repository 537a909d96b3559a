"""The resolved scenario the engine receives: its type, ``EngineConfig``, and its one producer,
``engine_config(scenario)``.

Two types stand on either side of validation. ``Scenario`` (scenario.py) is the file the user
wrote: optional keys, defaults, shorthands (host ranges and names, OpenSM strings, generic
``[qos]`` tables, a port buffer to divide). ``EngineConfig`` is what the engine is handed: every
key present, no default, no shorthand, plain JSON types, in the shape crates/qoslab-engine/src/
config.rs parses (docs/design/engine-boundary.md). The TypedDicts below mirror the Rust structs
key for key; keys that are left out unless set (so that run ids and golden inputs stay as they
were before the key existed) are ``NotRequired``.

Nothing here checks a value: the engine owns the rules on the resolved config, and Python asks
it through ``qoslab.simulate.check_engine_config`` (docs/design/engine-boundary.md, "Who checks
what"). simulate.py encodes it (``encode``) and is the one module that calls the engine.
"""

from typing import TYPE_CHECKING, Any, Literal, NotRequired, TypedDict, cast

from qoslab.host_lists import expand_hosts
from qoslab.scenario_qos import _json_qos

if TYPE_CHECKING:
    from qoslab.scenario import Scenario


class FabricConfig(TypedDict):
    link_gbps: float
    link_latency_ns: float
    switch_latency_ns: float
    mtu_bytes: int
    header_bytes: int
    data_vls: int
    vl_buffer_bytes: int  # the divided share of fabric.port_buffer_bytes (or the per-VL override)
    hca_send_queues_per_sl: int


class SingleSwitchConfig(TypedDict):
    kind: Literal["single-switch"]
    hosts: int


class XgftConfig(TypedDict):
    kind: Literal["xgft"]
    m: list[int]
    w: list[int]


class GraphConfig(TypedDict):
    """An imported fabric (ibnetdiscover): hosts first, then switches; ports from 0."""

    kind: Literal["graph"]
    host_names: list[str]
    switch_names: list[str]
    switch_ports: list[int]
    cables: list[list[int]]  # [node_a, port_a, node_b, port_b]
    cable_gbps: list[float]


class DragonflyPlusConfig(TypedDict):
    kind: Literal["dragonfly-plus"]
    groups: int
    leaves_per_group: int
    spines_per_group: int
    hosts_per_leaf: int
    global_links_per_spine: int


TopologyConfig = SingleSwitchConfig | XgftConfig | GraphConfig | DragonflyPlusConfig


class RoutingConfig(TypedDict):
    algorithm: str
    lft: NotRequired[list[int]]  # algorithm "lft": the ibroute dumps' table, switch * hosts + host
    vls: int
    flowlet_gap_us: NotRequired[float]  # left out when 0 (off)


class PortQosConfig(TypedDict):
    sl2vl: list[int]
    vlarb_high: list[list[int]]  # [vl, weight], every routing layer's VLs listed
    vlarb_low: list[list[int]]
    high_limit: int


class Sl2VlPairConfig(TypedDict):
    switch: int
    in_port: int
    out_port: int
    sl2vl: list[int]


class QosConfig(TypedDict):
    ca: PortQosConfig
    swe: PortQosConfig
    sl2vl_pairs: list[Sl2VlPairConfig]


class TrafficConfig(TypedDict):
    pattern: str
    hosts: list[int]
    destinations: list[int]
    load: float | None  # None: a saturating source
    message_bytes: int
    sl: int
    arrival: str
    shift: int
    hotspot_hosts: list[int]
    hotspot_fraction: float
    saturate_depth: int
    max_queued_messages: int


class RunConfig(TypedDict):
    duration_us: float
    warmup_us: float
    messages: bool
    interference: NotRequired[bool]  # left out when off
    port_counters: NotRequired[bool]  # left out when off


class CollectivesConfig(TypedDict):
    allreduce: str
    alltoall: str


class JobConfig(TypedDict):
    name: str
    hosts: list[int]  # placed, in rank order
    ranks_per_node: int
    sl: int
    restart: bool
    workload: dict[str, Any]  # {"kind": ..., parameters}: each workload checks its own in the engine
    collectives: CollectivesConfig
    sl_policy: dict[str, Any]  # {"kind": ..., parameters}
    record_iterations: bool


class MpiConfig(TypedDict):
    eager_threshold_bytes: int
    control_bytes: int
    shm_latency_ns: float
    shm_gbps: float


class CcSlConfig(TypedDict):
    enabled: bool  # in ca_cong_setting_control_map
    ccti_timer: int  # 1.024 µs units
    ccti_increase: int
    ccti_min: int
    trigger_threshold: int


class CongestionControlConfig(TypedDict):
    """config_cc.rs ``CongestionControlConfig``: present only when enabled."""

    threshold: int
    packet_size_credits: int
    marking_rate: int
    victim_ports: list[int]  # local switch ports (IB port - 1): Victim_Mask bit b is local port b - 1
    sl_based: bool
    sls: list[CcSlConfig]  # 16, SL0..SL15
    cct: list[list[int]]  # [shift, multiplier]
    trace: NotRequired[bool]  # run.cc_trace: left out when off (engine configs as before it existed)


class EngineConfig(TypedDict):
    """The resolved scenario, as the engine takes it (config.rs ``EngineConfig``)."""

    seed: int
    fabric: FabricConfig
    topology: TopologyConfig
    routing: RoutingConfig
    qos: QosConfig
    traffic: list[TrafficConfig]
    run: RunConfig
    jobs: list[JobConfig]
    mpi: MpiConfig
    congestion_control: NotRequired[CongestionControlConfig]  # left out when off: runs and golden inputs as before


def engine_topology(scenario: "Scenario") -> TopologyConfig:
    """The ``topology`` part (also what ``qoslab.simulate.cabling`` builds alone)."""
    from qoslab.scenario_network import Ibnetdiscover

    topology = scenario.topology
    if isinstance(topology, Ibnetdiscover):
        return cast(GraphConfig, topology.engine(float(scenario.fabric.link_gbps)))
    return cast(TopologyConfig, topology.engine())


def engine_routing(scenario: "Scenario") -> RoutingConfig:
    """The ``routing`` part (also what ``qoslab.simulate.cabling`` routes alone)."""
    r = scenario.routing
    if r.algorithm == "lft":
        assert r._table is not None, "read at validation"
        return {"algorithm": "lft", "lft": r._table, "vls": r.layers()}
    assert r.algorithm is not None, "resolved at validation"
    routing: RoutingConfig = {"algorithm": r.algorithm, "vls": r.layers()}
    if r.flowlet_gap_us:
        routing["flowlet_gap_us"] = float(r.flowlet_gap_us)
    return routing


def engine_congestion_control(scenario: "Scenario") -> CongestionControlConfig:
    """The ``congestion_control`` part of an enabled [congestion_control] table."""
    cc = scenario.congestion_control
    # A field whose control-map bit is clear is not sent: the switch keeps its reset value, 0
    # (threshold 0: no marking; no victim ports; every eligible packet marked).
    sets = cc.switch_fields_set()
    mask = cc.sw_cong_setting_victim_mask if sets["victim_mask"] else 0
    config: CongestionControlConfig = {
        "threshold": cc.sw_cong_setting_threshold if sets["threshold"] else 0,
        "packet_size_credits": cc.sw_cong_setting_packet_size if sets["threshold"] else 0,
        "marking_rate": cc.sw_cong_setting_marking_rate if sets["marking_rate"] else 0,
        # Bit 0 is switch port 0 (management), which carries no data here.
        "victim_ports": [bit - 1 for bit in range(1, 255) if mask >> bit & 1],
        "sl_based": bool(cc.ca_cong_setting_port_control & 1),
        "sls": [{"enabled": bool(cc.ca_cong_setting_control_map >> sl & 1),
                 "ccti_timer": cc.ca_cong_setting_ccti_timer[sl], "ccti_increase": cc.ca_cong_setting_ccti_increase[sl],
                 "ccti_min": cc.ca_cong_setting_ccti_min[sl],
                 "trigger_threshold": cc.ca_cong_setting_trigger_threshold[sl]} for sl in range(16)],
        "cct": [[shift, multiplier] for shift, multiplier in cc.cct],
    }
    if scenario.run.cc_trace:
        config["trace"] = True
    return config


def engine_config(scenario: "Scenario") -> EngineConfig:
    """The engine config of a validated scenario: every key present, no shorthand. The one place
    it is built; its JSON (``qoslab.simulate.encode``) is what golden inputs and runs hash."""
    hosts = scenario.host_count()
    f = scenario.fabric
    run_duration_us, run_warmup_us = scenario.run.resolved()
    run: RunConfig = {"duration_us": float(run_duration_us), "warmup_us": float(run_warmup_us),
                      "messages": scenario.run.messages}
    if scenario.run.interference:
        run["interference"] = True
    if scenario.run.port_counters:
        run["port_counters"] = True
    config: EngineConfig = {
        "seed": scenario.seed,
        "fabric": {
            "link_gbps": float(f.link_gbps),
            "link_latency_ns": float(f.link_latency_ns),
            "switch_latency_ns": float(f.switch_latency_ns),
            "mtu_bytes": f.mtu_bytes,
            "header_bytes": f.header_bytes,
            "data_vls": f.data_vls,
            "vl_buffer_bytes": f.buffer_per_vl(),  # the engine takes the divided share
            "hca_send_queues_per_sl": f.send_queues_per_sl(),
        },
        "topology": engine_topology(scenario),
        "routing": engine_routing(scenario),
        "qos": {
            "ca": cast(PortQosConfig, _json_qos(scenario.engine_port_qos("ca"))),
            "swe": cast(PortQosConfig, _json_qos(scenario.engine_port_qos("swe"))),
            "sl2vl_pairs": [
                {"switch": p.switch, "in_port": p.in_port, "out_port": p.out_port, "sl2vl": list(p.sl2vl)}
                for p in scenario.qos.sl2vl_pairs
            ],
        },
        "traffic": [
            {
                "pattern": t.pattern,
                "hosts": expand_hosts(t.hosts, hosts),
                "destinations": expand_hosts(t.destinations, hosts),
                "load": None if t.load == "saturate" else float(t.load),
                "message_bytes": t.message_bytes,
                "sl": t.sl,
                "arrival": t.arrival,
                "shift": scenario.traffic_shift(i),
                "hotspot_hosts": list(t.hotspot_hosts),
                "hotspot_fraction": float(t.hotspot_fraction),
                "saturate_depth": t.saturate_depth,
                "max_queued_messages": t.max_queued_messages,
            }
            for i, t in enumerate(scenario.traffic)
        ],
        "run": run,
        "jobs": [
            {
                "name": name,
                "hosts": placed,
                "ranks_per_node": job.ranks_per_node,
                "sl": job.sl,
                "restart": job.restart,
                "workload": job.workload.engine(),
                "collectives": {"allreduce": job.collectives.allreduce, "alltoall": job.collectives.alltoall},
                "sl_policy": job.sl_policy.engine(),
                "record_iterations": job.record_iterations,
            }
            for job, name, placed in zip(scenario.jobs, scenario.job_names(), scenario.placements())
        ],
        "mpi": cast(MpiConfig, scenario.mpi.engine()),
    }
    if scenario.congestion_control.enabled:
        config["congestion_control"] = engine_congestion_control(scenario)
    return config
