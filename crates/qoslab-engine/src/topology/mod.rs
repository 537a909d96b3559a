//! The fabric graph: nodes (hosts first, then switches), their ports, and which port each is cabled to.

pub mod dragonfly;
pub mod explicit;
pub mod xgft;

use crate::config::{ConfigError, TopologyConfig};

/// Marks "no port" / "no node".
pub const NONE: u32 = u32::MAX;

/// An immutable description of the cabling. Ports are numbered globally; a node's ports are
/// contiguous. Every cabled port is both a sender (output) and a receiver (input).
#[derive(Debug, Clone)]
pub struct Graph {
    pub hosts: u32,
    pub switches: u32,
    /// `port_base[n]..port_base[n + 1]` are node n's ports.
    pub port_base: Vec<u32>,
    pub port_node: Vec<u32>,
    /// The port at the other end of the cable, or NONE.
    pub port_peer: Vec<u32>,
    pub node_names: Vec<String>,
}

impl Graph {
    pub fn nodes(&self) -> u32 {
        self.hosts + self.switches
    }

    pub fn ports(&self) -> u32 {
        self.port_node.len() as u32
    }

    #[inline]
    pub fn is_host(&self, node: u32) -> bool {
        node < self.hosts
    }

    /// The single HCA port of a host.
    #[inline]
    pub fn host_port(&self, host: u32) -> u32 {
        self.port_base[host as usize]
    }

    /// A port's number within its node (0-based).
    #[inline]
    pub fn local_port(&self, port: u32) -> u32 {
        port - self.port_base[self.port_node[port as usize] as usize]
    }

    pub fn radix(&self, node: u32) -> u32 {
        self.port_base[node as usize + 1] - self.port_base[node as usize]
    }

    /// Number of cables (each carries one link direction per way).
    pub fn links(&self) -> u32 {
        self.port_peer.iter().filter(|&&p| p != NONE).count() as u32 / 2
    }
}

/// The node of every port, from the first port of each node (`port_base`, ending with the total).
pub fn port_nodes(port_base: &[u32]) -> Vec<u32> {
    let mut port_node = vec![0u32; *port_base.last().unwrap_or(&0) as usize];
    for (n, ports) in port_base.windows(2).enumerate() {
        port_node[ports[0] as usize..ports[1] as usize].fill(n as u32);
    }
    port_node
}

/// A built topology: the graph plus what its routing needs to know about its structure.
pub enum Topology {
    Xgft(xgft::Xgft),
    Explicit(explicit::Explicit),
    DragonflyPlus(dragonfly::DragonflyPlus),
}

impl Topology {
    pub fn build(cfg: &TopologyConfig) -> Result<Topology, ConfigError> {
        match cfg {
            TopologyConfig::SingleSwitch { hosts } => {
                if *hosts < 2 {
                    return Err(ConfigError::new("topology.hosts", "expected at least 2 hosts"));
                }
                // A single switch is the one-level XGFT(1; hosts; 1).
                Ok(Topology::Xgft(xgft::Xgft::build(&[*hosts], &[1], "topology.hosts")?))
            }
            TopologyConfig::Xgft { m, w } => Ok(Topology::Xgft(xgft::Xgft::build(m, w, "topology")?)),
            TopologyConfig::DragonflyPlus {
                groups,
                leaves_per_group,
                spines_per_group,
                hosts_per_leaf,
                global_links_per_spine,
            } => Ok(Topology::DragonflyPlus(dragonfly::DragonflyPlus::build(
                *groups,
                *leaves_per_group,
                *spines_per_group,
                *hosts_per_leaf,
                *global_links_per_spine,
            )?)),
            TopologyConfig::Graph { host_names, switch_names, switch_ports, cables, cable_gbps } => {
                Ok(Topology::Explicit(explicit::Explicit::build(
                    host_names,
                    switch_names,
                    switch_ports,
                    cables,
                    cable_gbps,
                )?))
            }
        }
    }

    pub fn graph(&self) -> &Graph {
        match self {
            Topology::Xgft(x) => &x.graph,
            Topology::Explicit(e) => &e.graph,
            Topology::DragonflyPlus(d) => &d.graph,
        }
    }

    /// Per-port link rates when links differ (an imported fabric); None when every link runs at
    /// `fabric.link_gbps`.
    pub fn port_gbps(&self) -> Option<&[f64]> {
        match self {
            Topology::Xgft(_) | Topology::DragonflyPlus(_) => None,
            Topology::Explicit(e) => Some(&e.port_gbps),
        }
    }

    pub fn describe(&self) -> serde_json::Value {
        match self {
            Topology::Xgft(x) => x.describe(),
            Topology::Explicit(e) => e.describe(),
            Topology::DragonflyPlus(d) => d.describe(),
        }
    }
}
