//! The engine config: the fully resolved scenario Python hands over as JSON (no defaults here).

use crate::sim::attribution::ON_WIRE_MAX_PS;

/// One byte takes at least a picosecond (the engine's time step), so no packet leaves in zero time.
pub const MAX_LINK_GBPS: f64 = 8000.0;
/// 1 Mb/s: a 4 KiB packet then takes 33 ms, still far inside the event list's time range.
pub const MIN_GBPS: f64 = 0.001;
/// Latencies beyond a second are no fabric's, and keep every time far inside the event list's range.
pub const MAX_LATENCY_NS: f64 = 1e9;
/// 2^55 ps (about ten hours): half the event list's time range (`queue::MAX_EVENT_TIME`, 2^56 ps).
pub const MAX_DURATION_US: f64 = 36_028_797_018.0;
/// Packets the traffic tables may hold waiting at once (ids are 32-bit; a margin for MPI traffic).
pub const MAX_QUEUED_PACKETS: u64 = 1 << 31;
use serde::Deserialize;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EngineConfig {
    pub seed: u64,
    pub fabric: FabricConfig,
    pub topology: TopologyConfig,
    pub routing: RoutingConfig,
    pub qos: QosConfig,
    pub traffic: Vec<TrafficConfig>,
    pub run: RunConfig,
    /// MPI jobs; an open-loop-only scenario has none.
    #[serde(default)]
    pub jobs: Vec<JobConfig>,
    /// The MPI layer's parameters; required when there are jobs.
    #[serde(default)]
    pub mpi: Option<MpiConfig>,
    /// InfiniBand congestion control (config_cc.rs); absent: off.
    #[serde(default)]
    pub congestion_control: Option<crate::config_cc::CongestionControlConfig>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FabricConfig {
    pub link_gbps: f64,
    pub link_latency_ns: f64,
    pub switch_latency_ns: f64,
    pub mtu_bytes: u32,
    pub header_bytes: u32,
    pub data_vls: u8,
    /// Input buffer per (port, data VL), already divided: Python splits `fabric.port_buffer_bytes`
    /// among the data VLs (or passes an explicit per-VL override), so the rule has one owner.
    pub vl_buffer_bytes: u32,
    /// Send queues per SL in every HCA (QPs; which one a message joins: fabric/hca.rs).
    pub hca_send_queues_per_sl: u32,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "kind", deny_unknown_fields)]
pub enum TopologyConfig {
    #[serde(rename = "single-switch")]
    SingleSwitch { hosts: u32 },
    #[serde(rename = "xgft")]
    Xgft { m: Vec<u32>, w: Vec<u32> },
    /// An explicit cabling (an imported fabric): hosts have one port each (a multi-port HCA
    /// arrives as one host per cabled port), switch ports are numbered from 0 (IB port - 1).
    #[serde(rename = "graph")]
    Graph {
        host_names: Vec<String>,
        switch_names: Vec<String>,
        switch_ports: Vec<u32>,
        /// `[node_a, port_a, node_b, port_b]`: node ids count hosts first, then switches.
        cables: Vec<[u32; 4]>,
        /// Data rate of each cable, both directions.
        cable_gbps: Vec<f64>,
    },
    /// Groups of two-level leaf/spine fat trees; spines of different groups cabled all-to-all.
    #[serde(rename = "dragonfly-plus")]
    DragonflyPlus {
        groups: u32,
        leaves_per_group: u32,
        spines_per_group: u32,
        hosts_per_leaf: u32,
        global_links_per_spine: u32,
    },
}

#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum RoutingAlgorithm {
    Dmodk,
    Smodk,
    Random,
    Adaptive,
    /// Shortest paths balanced by route counts, as OpenSM's minhop engine does; any topology.
    Minhop,
    /// Linear forwarding tables given in `lft` (read from `ibroute` dumps by Python).
    Lft,
    /// Dragonfly+: shortest paths, the spine and global link picked by destination.
    Minimal,
    /// Dragonfly+: through a random intermediate group (Valiant); needs 2 VL layers.
    Valiant,
}

impl RoutingAlgorithm {
    /// The name a scenario gives it (`routing.algorithm`).
    pub fn name(self) -> &'static str {
        match self {
            RoutingAlgorithm::Dmodk => "dmodk",
            RoutingAlgorithm::Smodk => "smodk",
            RoutingAlgorithm::Random => "random",
            RoutingAlgorithm::Adaptive => "adaptive",
            RoutingAlgorithm::Minhop => "minhop",
            RoutingAlgorithm::Lft => "lft",
            RoutingAlgorithm::Minimal => "minimal",
            RoutingAlgorithm::Valiant => "valiant",
        }
    }
}

/// What the routing rules need to know of a topology: which family it is (a single switch is
/// the one-level fat tree) and, for a Dragonfly+, its number of groups.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FabricKind {
    FatTree,
    /// An explicit cabling (`graph`, an imported fabric).
    Imported,
    DragonflyPlus {
        groups: u32,
    },
}

impl TopologyConfig {
    pub fn fabric_kind(&self) -> FabricKind {
        match self {
            TopologyConfig::SingleSwitch { .. } | TopologyConfig::Xgft { .. } => FabricKind::FatTree,
            TopologyConfig::Graph { .. } => FabricKind::Imported,
            TopologyConfig::DragonflyPlus { groups, .. } => FabricKind::DragonflyPlus { groups: *groups },
        }
    }

    /// The scenario's `topology.kind` (a `graph` is what an `ibnetdiscover` topology becomes).
    pub fn kind_name(&self) -> &'static str {
        match self {
            TopologyConfig::SingleSwitch { .. } => "single-switch",
            TopologyConfig::Xgft { .. } => "xgft",
            TopologyConfig::Graph { .. } => "an imported fabric",
            TopologyConfig::DragonflyPlus { .. } => "dragonfly-plus",
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RoutingConfig {
    pub algorithm: RoutingAlgorithm,
    /// For `lft`: the output port (0-based) of switch s towards host d at `s * hosts + d` (the
    /// scenario's `routing.lft` names the dumps; resolved, it is their table).
    #[serde(default)]
    pub lft: Option<Vec<u16>>,
    /// VL layers routing uses to stay deadlock-free: a packet on layer k uses VL
    /// `sl2vl + k * (data_vls / vls)`, so QoS has `data_vls / vls` VLs.
    #[serde(default = "one_layer")]
    pub vls: u8,
    /// Dragonfly+ adaptive routing: a flow (source, destination) keeps the path of its last
    /// decision while its packets come less than this apart (flowlets); 0 decides per packet.
    #[serde(default)]
    pub flowlet_gap_us: f64,
}

fn one_layer() -> u8 {
    1
}

impl RoutingConfig {
    /// VL layers `algorithm` needs on `fabric` to be deadlock-free: 2 for Valiant and adaptive
    /// routing on a Dragonfly+ of 3 groups or more (their non-minimal paths turn down and up in
    /// an intermediate group), else 1. The one place this rule lives (the router asks it too).
    pub fn layers_needed(algorithm: RoutingAlgorithm, fabric: FabricKind) -> u8 {
        match (algorithm, fabric) {
            (RoutingAlgorithm::Valiant | RoutingAlgorithm::Adaptive, FabricKind::DragonflyPlus { groups })
                if groups >= 3 =>
            {
                2
            }
            _ => 1,
        }
    }

    /// The routing rules that depend on the kind of fabric: the algorithm suits the topology, it
    /// has the VL layers it needs, and flowlets only where they apply (adaptive routing on a
    /// Dragonfly+). `topology_name` is how the message names the topology.
    pub fn check_fits(&self, fabric: FabricKind, topology_name: &str) -> Result<(), ConfigError> {
        let algorithm = self.algorithm;
        let name = algorithm.name();
        let misfit = match (algorithm, fabric) {
            (RoutingAlgorithm::Minhop | RoutingAlgorithm::Lft, _) => None,
            (RoutingAlgorithm::Minimal | RoutingAlgorithm::Valiant, FabricKind::DragonflyPlus { .. }) => None,
            (RoutingAlgorithm::Minimal | RoutingAlgorithm::Valiant, _) => {
                Some(format!("\"{name}\" routing needs a dragonfly-plus topology"))
            }
            (RoutingAlgorithm::Adaptive, FabricKind::DragonflyPlus { .. }) => None,
            (_, FabricKind::FatTree) => None,
            (_, FabricKind::Imported) => Some(format!(
                "\"{name}\" routing needs a fat tree or a Dragonfly+; route an imported fabric with \"minhop\" or \"lft\""
            )),
            (_, FabricKind::DragonflyPlus { .. }) => Some(format!(
                "\"{name}\" routing needs a fat tree; route a Dragonfly+ with \"minimal\", \"valiant\", \"adaptive\", \"minhop\" or \"lft\""
            )),
        };
        if let Some(message) = misfit {
            return Err(ConfigError::new("routing.algorithm", message));
        }
        let needed = RoutingConfig::layers_needed(algorithm, fabric);
        if self.vls < needed {
            return Err(ConfigError::new(
                "routing.vls",
                format!(
                    "{name} routing needs {needed} VL layers to be deadlock-free (its non-minimal paths turn down \
                     and up in the intermediate group), got {}",
                    self.vls
                ),
            ));
        }
        let gap = self.flowlet_gap_us;
        if !(gap.is_finite() && gap >= 0.0) {
            return Err(ConfigError::new("routing.flowlet_gap_us", format!("expected a time >= 0 in µs, got {gap}")));
        }
        let dragonfly = matches!(fabric, FabricKind::DragonflyPlus { .. });
        if gap > 0.0 && !(dragonfly && algorithm == RoutingAlgorithm::Adaptive) {
            return Err(ConfigError::new(
                "routing.flowlet_gap_us",
                format!(
                    "flowlets apply to adaptive routing on a Dragonfly+ (routing.algorithm is \"{name}\" on \
                     {topology_name}); remove the key or set it to 0"
                ),
            ));
        }
        Ok(())
    }
}

/// QoS tables for one port type, in OpenSM's units (weights: 64 B; high_limit: 4 KiB).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PortQosConfig {
    pub sl2vl: Vec<u8>,
    pub vlarb_high: Vec<(u8, u8)>,
    pub vlarb_low: Vec<(u8, u8)>,
    pub high_limit: u8,
}

/// One SL2VL table for a single (input port, output port) pair of a switch.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sl2VlOverride {
    pub switch: u32,
    pub in_port: u32,
    pub out_port: u32,
    pub sl2vl: Vec<u8>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QosConfig {
    pub ca: PortQosConfig,
    pub swe: PortQosConfig,
    #[serde(default)]
    pub sl2vl_pairs: Vec<Sl2VlOverride>,
}

#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Pattern {
    Uniform,
    Permutation,
    Shift,
    Hotspot,
    Incast,
}

#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Arrival {
    Poisson,
    Periodic,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrafficConfig {
    pub pattern: Pattern,
    pub hosts: Vec<u32>,
    pub destinations: Vec<u32>,
    /// Offered load as a fraction of link capacity; `None` = saturating source.
    pub load: Option<f64>,
    pub message_bytes: u64,
    pub sl: u8,
    pub arrival: Arrival,
    pub shift: u32,
    pub hotspot_hosts: Vec<u32>,
    pub hotspot_fraction: f64,
    pub saturate_depth: u32,
    /// Open-loop sources: messages a sender may have in its HCA send queue; arrivals beyond are
    /// refused (counted, never created).
    pub max_queued_messages: u32,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunConfig {
    pub duration_us: f64,
    pub warmup_us: f64,
    pub messages: bool,
    /// Charge each wait at an output port to the class holding what it waits for (attribution.rs).
    #[serde(default)]
    pub interference: bool,
    /// Count, per port, the time it sat idle with packets stalled for credits (PortXmitWait).
    #[serde(default)]
    pub port_counters: bool,
}

/// One MPI job, placed: `hosts` lists its nodes, ranks fill them in order (`ranks_per_node` each).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobConfig {
    pub name: String,
    pub hosts: Vec<u32>,
    pub ranks_per_node: u32,
    pub sl: u8,
    pub restart: bool,
    /// `{"kind": ..., parameters...}`; each workload checks its own parameters.
    pub workload: serde_json::Value,
    pub collectives: CollectivesConfig,
    /// How each message's SL is chosen (mpi/sl_policy.rs); absent: every message at `sl`.
    #[serde(default)]
    pub sl_policy: SlPolicyConfig,
    /// Whether the job's iterations are recorded (ranks table, summary's iteration figures):
    /// background jobs of thousands of ranks would otherwise outweigh the measured ones.
    #[serde(default = "record_all")]
    pub record_iterations: bool,
}

fn record_all() -> bool {
    true
}

/// Which messages of the chosen ranks a rank-based policy prioritises.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum RankMatch {
    /// Sent by a chosen rank.
    Source,
    /// Sent to a chosen rank.
    Destination,
    /// Either end is a chosen rank.
    Either,
}

#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum SlowRankMetric {
    /// Least MPI wait: the ranks the others wait for.
    LeastWait,
    /// Most MPI wait.
    MostWait,
    /// Highest mean latency of the rank's delivered sends: the ranks whose messages arrive late.
    SlowestSends,
}

#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum SpreadBy {
    /// Per rank pair (both directions alike).
    Connection,
    /// Per destination rank.
    Destination,
    /// Round robin per sending rank, message by message.
    Message,
}

#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum LatencyDirection {
    /// More delay seen in the past: a higher tier.
    Promote,
    /// More delay seen in the past: a lower tier.
    Demote,
}

/// The per-job rule that picks each message's SL when a rank issues it.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(tag = "kind", deny_unknown_fields)]
pub enum SlPolicyConfig {
    /// Every message at the job's SL.
    #[default]
    #[serde(rename = "job")]
    Job,
    /// Messages of the listed ranks (local to the job) at `sl`, the rest at the job's SL.
    #[serde(rename = "ranks")]
    Ranks {
        ranks: Vec<u32>,
        sl: u8,
        #[serde(rename = "match")]
        matching: RankMatch,
    },
    /// As `Ranks`, the ranks picked by the engine after `after_iterations` iterations of the
    /// job's first run: the top ceil(fraction x ranks) by `metric`.
    #[serde(rename = "slowest-ranks")]
    SlowestRanks {
        fraction: f64,
        after_iterations: u32,
        metric: SlowRankMetric,
        sl: u8,
        #[serde(rename = "match")]
        matching: RankMatch,
    },
    /// Every message on one of `sls`.
    #[serde(rename = "spread")]
    Spread { sls: Vec<u8>, by: SpreadBy },
    /// A tier per message from the latency its sender saw to that destination before.
    #[serde(rename = "latency-history")]
    LatencyHistory {
        sls: Vec<u8>,
        thresholds: Vec<f64>,
        direction: LatencyDirection,
        history_messages: u32,
        high_bytes_cap: f64,
    },
}

impl SlPolicyConfig {
    /// The SLs this policy may give a message besides its job's own.
    pub fn sls(&self) -> Vec<u8> {
        match self {
            SlPolicyConfig::Job => Vec::new(),
            SlPolicyConfig::Ranks { sl, .. } | SlPolicyConfig::SlowestRanks { sl, .. } => vec![*sl],
            SlPolicyConfig::Spread { sls, .. } | SlPolicyConfig::LatencyHistory { sls, .. } => sls.clone(),
        }
    }

    /// The ranks a rank-based policy lists are ranks of its job (`size` ranks). The one place
    /// this rule lives: `EngineConfig::validate` and `SlPolicy::new` both ask it.
    pub fn check_ranks(&self, size: u64, key: &str) -> Result<(), ConfigError> {
        if let SlPolicyConfig::Ranks { ranks, .. } = self {
            if let Some(&r) = ranks.iter().find(|&&r| r as u64 >= size) {
                let range = if size > 0 { format!(" (0..{})", size - 1) } else { String::new() };
                return Err(ConfigError::new(
                    format!("{key}.ranks"),
                    format!("rank {r} is not in the job: it has {size} ranks{range}"),
                ));
            }
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CollectivesConfig {
    pub allreduce: String,
    pub alltoall: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MpiConfig {
    /// Messages up to this size go eagerly; larger ones use the rendezvous protocol.
    pub eager_threshold_bytes: u64,
    /// Payload of a protocol control message (RTS, CTS, get request).
    pub control_bytes: u64,
    pub shm_latency_ns: f64,
    pub shm_gbps: f64,
}

/// A configuration the engine cannot build, named by its scenario key.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{key}: {message}")]
pub struct ConfigError {
    pub key: String,
    pub message: String,
}

impl ConfigError {
    pub fn new(key: impl Into<String>, message: impl Into<String>) -> ConfigError {
        ConfigError { key: key.into(), message: message.into() }
    }
}

/// Send queues per SL an HCA may have: a message names its queue in a byte (`Message::lane`).
pub const MAX_HCA_SEND_QUEUES_PER_SL: u32 = 256;

impl EngineConfig {
    pub fn from_json(text: &str) -> Result<EngineConfig, ConfigError> {
        serde_json::from_str(text).map_err(|e| ConfigError::new("engine config", e.to_string()))
    }

    /// The SLs a message of this run can carry, one bit each: the traffic tables', the jobs' and
    /// their SL policies'. The HCAs get send queues (and congestion control flows) for these
    /// only; a CNP travels on the SL of the packet it answers. Service levels above 15 are
    /// refused by `validate`, before anything asks this.
    pub fn sls_in_use(&self) -> u16 {
        let traffic = self.traffic.iter().map(|t| t.sl);
        let jobs = self.jobs.iter().flat_map(|j| std::iter::once(j.sl).chain(j.sl_policy.sls()));
        traffic.chain(jobs).fold(0, |mask, sl| mask | 1u16 << (sl & 15))
    }

    /// Checks that need no fabric: value ranges the Python side should already have enforced,
    /// re-checked so the engine is safe to drive directly.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let f = &self.fabric;
        check_rate("fabric.link_gbps", f.link_gbps)?;
        check_latency("fabric.link_latency_ns", f.link_latency_ns)?;
        check_latency("fabric.switch_latency_ns", f.switch_latency_ns)?;
        if let Some(mpi) = &self.mpi {
            check_rate("mpi.shm_gbps", mpi.shm_gbps)?;
            check_latency("mpi.shm_latency_ns", mpi.shm_latency_ns)?;
        }
        if ![256, 512, 1024, 2048, 4096].contains(&f.mtu_bytes) {
            return Err(ConfigError::new("fabric.mtu_bytes", "expected 256, 512, 1024, 2048 or 4096"));
        }
        if ![1, 2, 4, 8, 15].contains(&f.data_vls) {
            return Err(ConfigError::new("fabric.data_vls", "expected 1, 2, 4, 8 or 15"));
        }
        if !(1..=MAX_HCA_SEND_QUEUES_PER_SL).contains(&f.hca_send_queues_per_sl) {
            return Err(ConfigError::new(
                "fabric.hca_send_queues_per_sl",
                format!("expected 1..{MAX_HCA_SEND_QUEUES_PER_SL}, got {}", f.hca_send_queues_per_sl),
            ));
        }
        // A packet's wire size is kept in 16 bits (`Packet::wire_bytes`).
        if f.header_bytes > 4096 {
            return Err(ConfigError::new(
                "fabric.header_bytes",
                format!("expected 0..4096 bytes, got {}", f.header_bytes),
            ));
        }
        let packet_credits = crate::units::credits_for(f.mtu_bytes + f.header_bytes);
        if f.vl_buffer_bytes / crate::units::CREDIT_BYTES < packet_credits {
            return Err(ConfigError::new(
                "fabric.vl_buffer_bytes",
                format!("must hold at least one MTU packet ({} bytes)", packet_credits * 64),
            ));
        }
        let layers = self.routing.vls;
        if layers == 0 {
            return Err(ConfigError::new("routing.vls", "expected at least 1 VL layer, got 0"));
        }
        if layers > f.data_vls {
            return Err(ConfigError::new(
                "routing.vls",
                format!(
                    "routing needs {layers} VL layers but fabric.data_vls = {}: set fabric.data_vls to at least {layers}",
                    f.data_vls
                ),
            ));
        }
        self.routing.check_fits(self.topology.fabric_kind(), self.topology.kind_name())?;
        // SL2VL gives a VL of the first routing layer; higher layers are copies of it.
        let qos_vls = f.data_vls / layers;
        for (name, q) in [("qos.ca", &self.qos.ca), ("qos.swe", &self.qos.swe)] {
            check_port_qos(name, q, f.data_vls, qos_vls, layers)?;
        }
        for (i, o) in self.qos.sl2vl_pairs.iter().enumerate() {
            check_sl2vl(&format!("qos.sl2vl_pairs[{i}].sl2vl"), &o.sl2vl, qos_vls, f.data_vls, layers)?;
        }
        for (i, t) in self.traffic.iter().enumerate() {
            let key = |k: &str| format!("traffic[{i}].{k}");
            if let Some(load) = t.load {
                if !(load > 0.0 && load <= 1.0) {
                    return Err(ConfigError::new(key("load"), "expected a fraction in (0, 1] or \"saturate\""));
                }
            }
            if t.message_bytes == 0 {
                return Err(ConfigError::new(key("message_bytes"), "expected at least 1 byte"));
            }
            if t.sl > 15 {
                return Err(ConfigError::new(key("sl"), "expected a service level 0..15"));
            }
            if t.hosts.is_empty() {
                return Err(ConfigError::new(key("hosts"), "expected at least one sending host"));
            }
            if t.destinations.is_empty() {
                return Err(ConfigError::new(key("destinations"), "expected at least one destination"));
            }
            if !(0.0..=1.0).contains(&t.hotspot_fraction) {
                return Err(ConfigError::new(key("hotspot_fraction"), "expected a fraction in [0, 1]"));
            }
            if t.load.is_none() && t.saturate_depth == 0 {
                return Err(ConfigError::new(key("saturate_depth"), "expected at least 1"));
            }
            if t.max_queued_messages == 0 {
                return Err(ConfigError::new(key("max_queued_messages"), "expected at least 1"));
            }
            // A message is cut into its packets when it is created, each numbered in 32 bits.
            let packets = t.message_bytes.div_ceil(f.mtu_bytes as u64);
            let queued = match t.load {
                // An open-loop source queues at most what arrives during the run.
                Some(load) => {
                    let wire = t.message_bytes as f64 + packets as f64 * f.header_bytes as f64;
                    let arrivals = self.run.duration_us * 1e6 * load / (wire * 8000.0 / f.link_gbps);
                    (t.max_queued_messages as u64).min((arrivals.ceil() as u64).saturating_add(1))
                }
                None => t.saturate_depth as u64,
            };
            let at_once = (t.hosts.len() as u64).saturating_mul(queued).saturating_mul(packets);
            if at_once > MAX_QUEUED_PACKETS {
                return Err(ConfigError::new(
                    key("message_bytes"),
                    format!(
                        "{} senders x {queued} queued messages x {packets} packets of {} bytes = {at_once} packets could \
                         wait at once, beyond the engine's {MAX_QUEUED_PACKETS}: use smaller messages or fewer queued \
                         ones ({})",
                        t.hosts.len(),
                        f.mtu_bytes,
                        if t.load.is_some() { "max_queued_messages" } else { "saturate_depth" }
                    ),
                ));
            }
        }
        for (i, job) in self.jobs.iter().enumerate() {
            let size = job.hosts.len() as u64 * job.ranks_per_node as u64;
            job.sl_policy.check_ranks(size, &format!("jobs[{i}].sl_policy"))?;
        }
        let r = &self.run;
        #[allow(clippy::neg_cmp_op_on_partial_ord)] // NaN fails it too, as it must
        if !(r.duration_us > 0.0) {
            return Err(ConfigError::new("run.duration_us", "expected a positive duration"));
        }
        if r.duration_us > MAX_DURATION_US {
            return Err(ConfigError::new(
                "run.duration_us",
                format!("at most {MAX_DURATION_US} (2^55 ps: the event list's time range, with room for what is in flight at the end)"),
            ));
        }
        if !(r.warmup_us >= 0.0 && r.warmup_us < r.duration_us) {
            return Err(ConfigError::new("run.warmup_us", "expected 0 <= warmup_us < duration_us"));
        }
        // Attribution packs a transmission's end beside its class (`PortVl::on_wire`); half the
        // range leaves room for the packets still on the wire when the run ends.
        let longest_us = ON_WIRE_MAX_PS / 2 / 1_000_000;
        if r.interference && r.duration_us >= longest_us as f64 {
            return Err(ConfigError::new(
                "run.duration_us",
                format!("below {longest_us} with run.interference (2^47 ps: attribution's time range)"),
            ));
        }
        Ok(())
    }
}

/// A data rate the engine's picosecond clock can time: a byte takes at least a picosecond, and a
/// full packet at most a few tens of milliseconds.
fn check_rate(key: &str, gbps: f64) -> Result<(), ConfigError> {
    if !(MIN_GBPS..=MAX_LINK_GBPS).contains(&gbps) {
        return Err(ConfigError::new(
            key,
            format!(
                "expected a rate from {MIN_GBPS} to {MAX_LINK_GBPS} Gb/s (above, a byte would take less than a \
                 picosecond, the engine's time step), got {gbps}"
            ),
        ));
    }
    Ok(())
}

fn check_latency(key: &str, ns: f64) -> Result<(), ConfigError> {
    if !(0.0..=MAX_LATENCY_NS).contains(&ns) {
        return Err(ConfigError::new(key, format!("expected 0 to {MAX_LATENCY_NS} ns (one second), got {ns}")));
    }
    Ok(())
}

fn check_sl2vl(key: &str, table: &[u8], qos_vls: u8, data_vls: u8, layers: u8) -> Result<(), ConfigError> {
    if table.len() != 16 {
        return Err(ConfigError::new(key, format!("expected 16 entries (SL0..SL15), got {}", table.len())));
    }
    let exist = if qos_vls < data_vls {
        format!(
            "routing.vls = {layers} leaves VL0..VL{} for QoS (fabric.data_vls = {data_vls}; the higher VLs are the \
             routing layers' copies, weighted like their QoS VL)",
            qos_vls - 1
        )
    } else {
        format!("only VL0..VL{} exist (fabric.data_vls = {data_vls})", data_vls - 1)
    };
    if let Some((sl, vl)) = table.iter().enumerate().find(|&(_, &vl)| vl >= qos_vls) {
        return Err(ConfigError::new(key, format!("SL{sl} maps to VL{vl}, but {exist}")));
    }
    Ok(())
}

fn check_port_qos(name: &str, q: &PortQosConfig, data_vls: u8, qos_vls: u8, layers: u8) -> Result<(), ConfigError> {
    check_sl2vl(&format!("{name}.sl2vl"), &q.sl2vl, qos_vls, data_vls, layers)?;
    for (table, entries) in [("vlarb_high", &q.vlarb_high), ("vlarb_low", &q.vlarb_low)] {
        if entries.len() > 64 {
            let each = if layers > 1 {
                format!(" ({} entries, one per routing layer ({layers}) each)", entries.len().div_ceil(layers as usize))
            } else {
                String::new()
            };
            return Err(ConfigError::new(
                format!("{name}.{table}"),
                format!("expected at most 64 entries, got {}{each}", entries.len()),
            ));
        }
        for &(vl, _) in entries.iter() {
            if vl >= data_vls {
                return Err(ConfigError::new(
                    format!("{name}.{table}"),
                    format!("entry for VL{vl}, but only VL0..VL{} exist", data_vls - 1),
                ));
            }
        }
    }
    Ok(())
}
