//! Extended generalized fat trees XGFT(h; m1..mh; w1..wh): k-ary n-trees and slimmed fat trees.
//!
//! A level-l node is labelled by the child digits above it (a_h..a_{l+1}) and the parent digits
//! below it (b_l..b_1). Host d has digits a_i = (d / M_{i-1}) mod m_i with M_i = m_1*..*m_i, so a
//! level-l switch's hosts are the contiguous range with d / M_l fixed. At a level-l switch, ports
//! 0..m_l go down (port = child's a_l digit) and ports m_l..m_l+w_{l+1} go up (port = m_l + b_{l+1}).

use super::{Graph, NONE};
use crate::config::ConfigError;
use serde_json::json;

/// What routing needs about one switch.
#[derive(Debug, Clone, Copy)]
pub struct XgftSwitch {
    pub level: u32,
    /// Hosts below this switch are `subtree_first .. subtree_first + subtree_hosts`.
    pub subtree_first: u32,
    pub subtree_hosts: u32,
    /// Host d leaves through down port (d / hosts_per_down_port) mod down_ports.
    pub hosts_per_down_port: u32,
    pub down_ports: u32,
    pub up_ports: u32,
    /// dmodk picks up port (d / up_divisor) mod up_ports (the product of w_1..w_l).
    pub up_divisor: u32,
}

#[derive(Debug)]
pub struct Xgft {
    pub m: Vec<u32>,
    pub w: Vec<u32>,
    pub graph: Graph,
    /// Indexed by switch number (node id - hosts).
    pub switches: Vec<XgftSwitch>,
    /// First switch number of each level 1..h (index l-1), plus the total at the end.
    pub level_first: Vec<u32>,
}

fn product(v: &[u32]) -> u64 {
    v.iter().map(|&x| x as u64).product()
}

impl Xgft {
    pub fn build(m: &[u32], w: &[u32], key: &str) -> Result<Xgft, ConfigError> {
        let h = m.len();
        if h == 0 {
            return Err(ConfigError::new(format!("{key}.m"), "expected at least one level"));
        }
        if w.len() != h {
            return Err(ConfigError::new(
                format!("{key}.w"),
                format!("expected {h} entries to match m (XGFT(h; m1..mh; w1..wh)), got {}", w.len()),
            ));
        }
        if let Some(i) = m.iter().position(|&x| x == 0) {
            return Err(ConfigError::new(format!("{key}.m"), format!("entry {i} is 0; every level needs children")));
        }
        if let Some(i) = w.iter().position(|&x| x == 0) {
            return Err(ConfigError::new(format!("{key}.w"), format!("entry {i} is 0; every level needs parents")));
        }
        if w[0] != 1 {
            return Err(ConfigError::new(
                format!("{key}.w"),
                "w[0] must be 1: hosts with several HCA ports are not modelled yet",
            ));
        }
        let hosts = product(m);
        // Switch counts per level: (N / M_l) * W_l.
        let mut level_counts = Vec::with_capacity(h);
        for l in 1..=h {
            level_counts.push(product(&m[l..]) * product(&w[..l]));
        }
        let switches: u64 = level_counts.iter().sum();
        let ports: u64 = hosts
            + (1..=h)
                .map(|l| level_counts[l - 1] * (m[l - 1] as u64 + w.get(l).copied().unwrap_or(0) as u64))
                .sum::<u64>();
        if hosts > 1 << 24 || switches > 1 << 22 || ports > (1 << 28) {
            return Err(ConfigError::new(key, format!("XGFT too large: {hosts} hosts, {switches} switches")));
        }
        if hosts < 2 {
            return Err(ConfigError::new(format!("{key}.m"), "the tree must have at least 2 hosts"));
        }
        let hosts = hosts as u32;

        // Node ids: hosts, then level 1 switches, level 2, ...
        let mut level_first = vec![0u32; h + 1];
        for l in 1..=h {
            level_first[l] = level_first[l - 1] + level_counts[l - 1] as u32;
        }
        let nodes = hosts + level_first[h];
        let mut port_base = Vec::with_capacity(nodes as usize + 1);
        let mut next = 0u32;
        for _ in 0..hosts {
            port_base.push(next);
            next += 1;
        }
        for l in 1..=h {
            let radix = m[l - 1] + w.get(l).copied().unwrap_or(0);
            for _ in 0..level_counts[l - 1] {
                port_base.push(next);
                next += radix;
            }
        }
        port_base.push(next);
        let total_ports = next as usize;
        let port_node = super::port_nodes(&port_base);
        let mut port_peer = vec![NONE; total_ports];
        let node_of = |level: usize, a: u64, b: u64| -> u32 {
            if level == 0 {
                a as u32
            } else {
                let w_l = product(&w[..level]);
                hosts + level_first[level - 1] + (a * w_l + b) as u32
            }
        };
        // Cable every level-l node to its w_{l+1} parents.
        for l in 0..h {
            let count = if l == 0 { hosts as u64 } else { level_counts[l - 1] };
            let w_l = product(&w[..l]);
            let down_ports_parent = m[l];
            for idx in 0..count {
                let (a, b) = (idx / w_l, idx % w_l);
                let child = node_of(l, a, b);
                let child_up_base = if l == 0 { 0 } else { m[l - 1] };
                for j in 0..w[l] as u64 {
                    let parent = node_of(l + 1, a / m[l] as u64, b + w_l * j);
                    let c = (a % m[l] as u64) as u32;
                    debug_assert!(c < down_ports_parent);
                    let cp = port_base[child as usize] + child_up_base + j as u32;
                    let pp = port_base[parent as usize] + c;
                    port_peer[cp as usize] = pp;
                    port_peer[pp as usize] = cp;
                }
            }
        }
        let mut node_names: Vec<String> = (0..hosts).map(|d| format!("H{d}")).collect();
        let mut switch_info = Vec::with_capacity(level_first[h] as usize);
        for l in 1..=h {
            let m_below = product(&m[..l]) as u32;
            let w_l = product(&w[..l]) as u32;
            for idx in 0..level_counts[l - 1] as u32 {
                node_names.push(format!("S{l}-{idx}"));
                let a = idx / w_l;
                switch_info.push(XgftSwitch {
                    level: l as u32,
                    subtree_first: a * m_below,
                    subtree_hosts: m_below,
                    hosts_per_down_port: product(&m[..l - 1]) as u32,
                    down_ports: m[l - 1],
                    up_ports: w.get(l).copied().unwrap_or(0),
                    up_divisor: w_l,
                });
            }
        }
        let graph = Graph { hosts, switches: level_first[h], port_base, port_node, port_peer, node_names };
        Ok(Xgft { m: m.to_vec(), w: w.to_vec(), graph, switches: switch_info, level_first })
    }

    /// Level of the nearest common ancestor of two hosts (0 when they are the same host).
    pub fn common_level(&self, a: u32, b: u32) -> u32 {
        let mut block = 1u64;
        let mut level = 0;
        while a as u64 / block != b as u64 / block {
            block *= self.m[level as usize] as u64;
            level += 1;
        }
        level
    }

    /// Fraction of link capacity per host at which uniform traffic saturates the tree's narrowest
    /// level: for each level l < h, the up-links leaving a level-l subtree (W_{l+1}) divided by the
    /// traffic that must leave it ((N - M_l) / (N - 1) of each of its M_l hosts' load).
    pub fn uniform_saturation_bound(&self) -> f64 {
        let n = self.graph.hosts as f64;
        let h = self.m.len();
        let mut bound: f64 = 1.0;
        for l in 1..h {
            let hosts_below = product(&self.m[..l]) as f64;
            let up_links = product(&self.w[..=l]) as f64;
            let leaving = (n - hosts_below) / (n - 1.0);
            bound = bound.min(up_links / hosts_below / leaving);
        }
        bound
    }

    pub fn describe(&self) -> serde_json::Value {
        let h = self.m.len();
        let levels: Vec<serde_json::Value> = (1..=h)
            .map(|l| {
                let up = self.w.get(l).copied().unwrap_or(0);
                json!({
                    "level": l,
                    "switches": self.level_first[l] - self.level_first[l - 1],
                    "down_ports": self.m[l - 1],
                    "up_ports": up,
                    "radix": self.m[l - 1] + up,
                    "hosts_below_each": product(&self.m[..l]),
                })
            })
            .collect();
        // Host pairs whose nearest common ancestor is at level l: 2l links, prod(w_2..w_l) shortest paths.
        let paths: Vec<serde_json::Value> = (1..=h)
            .map(|l| {
                json!({
                    "common_level": l,
                    "links": 2 * l,
                    "switch_hops": 2 * l - 1,
                    "shortest_paths": product(&self.w[1..l]),
                })
            })
            .collect();
        json!({
            "kind": "xgft",
            "shape": format!("XGFT({h}; {}; {})", join(&self.m), join(&self.w)),
            "hosts": self.graph.hosts,
            "switches": self.graph.switches,
            "links": self.graph.links(),
            "levels": levels,
            "paths": paths,
            "uniform_saturation_bound": self.uniform_saturation_bound(),
        })
    }
}

fn join(v: &[u32]) -> String {
    v.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slimmed_tree_from_the_seeds_has_the_expected_counts() {
        let x = Xgft::build(&[16, 16, 4], &[1, 4, 4], "t").unwrap();
        assert_eq!(x.graph.hosts, 1024);
        // Level switches: (N / M_l) * W_l = 64*1, 4*4, 1*16.
        assert_eq!(x.level_first, vec![0, 64, 80, 96]);
        // Links: 1024 host links + 64*4 + 16*4.
        assert_eq!(x.graph.links(), 1024 + 256 + 64);
        // Bound: level 2 subtrees have 16 up-links for 256 hosts, 768/1023 of traffic leaves.
        let expected = (16.0 / 256.0) / (768.0 / 1023.0);
        assert!((x.uniform_saturation_bound() - expected).abs() < 1e-12);
    }

    #[test]
    fn every_cable_is_symmetric_and_every_port_is_used() {
        let x = Xgft::build(&[4, 4, 4], &[1, 2, 2], "t").unwrap();
        let g = &x.graph;
        for p in 0..g.ports() {
            let q = g.port_peer[p as usize];
            assert_ne!(q, NONE, "port {p} uncabled");
            assert_eq!(g.port_peer[q as usize], p);
            assert_ne!(g.port_node[p as usize], g.port_node[q as usize]);
        }
    }

    #[test]
    fn down_ports_lead_to_the_subtree_they_claim() {
        let x = Xgft::build(&[3, 4, 2], &[1, 2, 3], "t").unwrap();
        let g = &x.graph;
        for (s, info) in x.switches.iter().enumerate() {
            let node = g.hosts + s as u32;
            for d in info.subtree_first..info.subtree_first + info.subtree_hosts {
                // Follow down ports until a host is reached; it must be d.
                let (mut n, mut inf) = (node, *info);
                loop {
                    let port = (d / inf.hosts_per_down_port) % inf.down_ports;
                    let peer = g.port_peer[(g.port_base[n as usize] + port) as usize];
                    n = g.port_node[peer as usize];
                    if g.is_host(n) {
                        break;
                    }
                    inf = x.switches[(n - g.hosts) as usize];
                }
                assert_eq!(n, d);
            }
        }
    }

    #[test]
    fn rejects_shapes_that_do_not_close() {
        assert!(Xgft::build(&[4, 4], &[1], "topology").unwrap_err().key.contains("topology.w"));
        assert!(Xgft::build(&[4, 0], &[1, 2], "topology").unwrap_err().key.contains("topology.m"));
        assert!(Xgft::build(&[4, 4], &[2, 2], "topology").is_err());
    }
}
