//! An explicit cabling, as an imported fabric (ibnetdiscover, ibsim net file) gives it: any
//! graph, links of different rates, no structure routing could exploit.

use super::{Graph, NONE};
use crate::config::ConfigError;
use serde_json::json;

#[derive(Debug)]
pub struct Explicit {
    pub graph: Graph,
    /// Data rate of the link leaving each port (Gb/s); 0 for an uncabled port.
    pub port_gbps: Vec<f64>,
}

impl Explicit {
    pub fn build(
        host_names: &[String],
        switch_names: &[String],
        switch_ports: &[u32],
        cables: &[[u32; 4]],
        cable_gbps: &[f64],
    ) -> Result<Explicit, ConfigError> {
        let key = "topology";
        let hosts = host_names.len() as u32;
        let switches = switch_names.len() as u32;
        if hosts < 2 {
            return Err(ConfigError::new(format!("{key}.host_names"), "expected at least 2 hosts"));
        }
        if switch_ports.len() != switch_names.len() {
            return Err(ConfigError::new(format!("{key}.switch_ports"), "expected one port count per switch"));
        }
        if cable_gbps.len() != cables.len() {
            return Err(ConfigError::new(format!("{key}.cable_gbps"), "expected one rate per cable"));
        }
        let mut port_base = Vec::with_capacity((hosts + switches) as usize + 1);
        let mut next = 0u64;
        for _ in 0..hosts {
            port_base.push(next as u32);
            next += 1;
        }
        for (s, &radix) in switch_ports.iter().enumerate() {
            if radix == 0 || radix > 255 {
                return Err(ConfigError::new(format!("{key}.switch_ports[{s}]"), "expected 1..255 ports"));
            }
            port_base.push(next as u32);
            next += radix as u64;
        }
        if next > 1 << 28 {
            return Err(ConfigError::new(key, "too many ports"));
        }
        port_base.push(next as u32);
        let total = next as usize;
        let port_node = super::port_nodes(&port_base);
        let mut port_peer = vec![NONE; total];
        let mut port_gbps = vec![0.0; total];
        let nodes = hosts + switches;
        for (i, (c, &gbps)) in cables.iter().zip(cable_gbps).enumerate() {
            let ck = format!("{key}.cables[{i}]");
            if !(gbps > 0.0 && gbps.is_finite()) {
                return Err(ConfigError::new(format!("{key}.cable_gbps[{i}]"), "expected a positive rate"));
            }
            let mut ends = [0u32; 2];
            for (e, (node, port)) in [(c[0], c[1]), (c[2], c[3])].into_iter().enumerate() {
                if node >= nodes {
                    return Err(ConfigError::new(&ck, format!("node {node} does not exist (0..{})", nodes - 1)));
                }
                let radix = port_base[node as usize + 1] - port_base[node as usize];
                if port >= radix {
                    return Err(ConfigError::new(&ck, format!("node {node} has ports 0..{}, not {port}", radix - 1)));
                }
                ends[e] = port_base[node as usize] + port;
            }
            if c[0] < hosts && c[2] < hosts {
                return Err(ConfigError::new(&ck, "hosts cabled back to back are not modelled: a host needs a switch"));
            }
            if ends[0] == ends[1] {
                return Err(ConfigError::new(&ck, "a port cabled to itself"));
            }
            for &p in &ends {
                if port_peer[p as usize] != NONE {
                    return Err(ConfigError::new(
                        &ck,
                        format!(
                            "port {} of node {} is cabled twice",
                            p - port_base[port_node[p as usize] as usize],
                            port_node[p as usize]
                        ),
                    ));
                }
            }
            port_peer[ends[0] as usize] = ends[1];
            port_peer[ends[1] as usize] = ends[0];
            port_gbps[ends[0] as usize] = gbps;
            port_gbps[ends[1] as usize] = gbps;
        }
        if let Some(h) = (0..hosts).find(|&h| port_peer[port_base[h as usize] as usize] == NONE) {
            return Err(ConfigError::new(
                format!("{key}.host_names[{h}]"),
                format!("host {:?} is not cabled", host_names[h as usize]),
            ));
        }
        let node_names = host_names.iter().chain(switch_names).cloned().collect();
        let graph = Graph { hosts, switches, port_base, port_node, port_peer, node_names };
        Ok(Explicit { graph, port_gbps })
    }

    pub fn describe(&self) -> serde_json::Value {
        let cabled: Vec<f64> = self.port_gbps.iter().copied().filter(|&g| g > 0.0).collect();
        let min = cabled.iter().copied().fold(f64::INFINITY, f64::min);
        let max = cabled.iter().copied().fold(0.0, f64::max);
        json!({
            "kind": "graph",
            "hosts": self.graph.hosts,
            "switches": self.graph.switches,
            "links": self.graph.links(),
            "link_gbps_min": min,
            "link_gbps_max": max,
        })
    }
}
