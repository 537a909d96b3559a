//! Dragonfly+ : groups of two-level leaf/spine fat trees, spines of different groups joined
//! all-to-all by global links.
//!
//! Numbering. Hosts are group-major: host d sits on leaf `(d / p) mod l` of group
//! `d / (l * p)`. Switches per group: leaves first, then spines. A leaf's ports 0..p go to its
//! hosts and p..p+s to spine 0..s (one cable each). A spine's ports 0..l go to leaf 0..l and
//! l..l+h are its global ports.
//!
//! Global cabling. A group has s * h global slots; slot i is port `l + i / s` of spine `i mod s`,
//! so consecutive slots sit on consecutive spines. Slots `r*c .. r*c + c` of group a lead to group
//! `(a + 1 + r) mod g`, where c = s*h / (g-1) is the number of links per group pair, and link k
//! of the pair (a, b) joins slot `r*c + k` of a to slot `r'*c + k` of b. The c links of one pair
//! therefore land on c consecutive spines at both ends.

use super::{Graph, NONE};
use crate::config::ConfigError;
use serde_json::json;

/// Role of a switch in its group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Leaf,
    Spine,
}

#[derive(Debug, Clone)]
pub struct DragonflyPlus {
    pub groups: u32,
    pub leaves: u32,
    pub spines: u32,
    pub hosts_per_leaf: u32,
    pub global_per_spine: u32,
    /// Global links between each pair of groups.
    pub links_per_pair: u32,
    pub graph: Graph,
    /// `pair_links[(a * g + b) * c + k]` = (spine index in group a, local port) of the k-th link
    /// from group a to group b; unused for a == b.
    pair_links: Vec<(u32, u32)>,
    /// Distinct spines of group a with links to group b: `pair_spines[pair_spine_at[a*g+b]..[a*g+b+1]]`.
    pair_spines: Vec<u32>,
    pair_spine_at: Vec<u32>,
    /// Global ports of spine j of group a towards group b: `spine_ports[spine_port_at[(a*g+b)*s+j]..]`.
    spine_ports: Vec<u32>,
    spine_port_at: Vec<u32>,
    /// Group that global port k of spine j of group a leads to, at `(a * s + j) * h + k`.
    port_group: Vec<u32>,
    /// Per host and per switch, where it sits: looked up, because routing asks on every hop and
    /// working it out takes several integer divisions.
    host_places: Vec<HostPlace>,
    switch_places: Vec<(u32, Role, u32)>,
}

/// A host's group, its leaf (index in the group) and its port on that leaf.
#[derive(Debug, Clone, Copy)]
pub struct HostPlace {
    pub group: u32,
    pub leaf: u16,
    pub port: u16,
}

impl DragonflyPlus {
    pub fn build(
        groups: u32,
        leaves: u32,
        spines: u32,
        hosts_per_leaf: u32,
        global_per_spine: u32,
    ) -> Result<Self, ConfigError> {
        let key = |k: &str| format!("topology.{k}");
        for (name, v) in [
            ("groups", groups),
            ("leaves_per_group", leaves),
            ("spines_per_group", spines),
            ("hosts_per_leaf", hosts_per_leaf),
        ] {
            if v == 0 {
                return Err(ConfigError::new(key(name), "expected at least 1"));
            }
        }
        if groups > u16::MAX as u32 {
            return Err(ConfigError::new(key("groups"), format!("at most {} groups", u16::MAX)));
        }
        if groups < 2 {
            return Err(ConfigError::new(
                key("groups"),
                "expected at least 2 groups (one group is a two-level fat tree: use xgft)",
            ));
        }
        if global_per_spine == 0 {
            return Err(ConfigError::new(
                key("global_links_per_spine"),
                "expected at least 1: groups need global links",
            ));
        }
        // Sizes checked in 64 bits before anything is built (a switch's ports, the ports of all).
        let (leaf_ports, spine_ports) =
            (hosts_per_leaf as u64 + spines as u64, leaves as u64 + global_per_spine as u64);
        for (name, ports, what) in
            [("hosts_per_leaf", leaf_ports, "a leaf"), ("global_links_per_spine", spine_ports, "a spine")]
        {
            if ports > u16::MAX as u64 {
                return Err(ConfigError::new(
                    key(name),
                    format!("{what} switch would have {ports} ports; at most {} are modelled", u16::MAX),
                ));
            }
        }
        let all_ports =
            groups as u64 * (leaves as u64 * (hosts_per_leaf as u64 * 2 + spines as u64) + spines as u64 * spine_ports);
        if all_ports > 1 << 28 {
            return Err(ConfigError::new("topology", format!("Dragonfly+ too large: {all_ports} ports")));
        }
        let slots = spines * global_per_spine;
        if !slots.is_multiple_of(groups - 1) || slots < groups - 1 {
            return Err(ConfigError::new(
                key("global_links_per_spine"),
                format!(
                    "{spines} spines x {global_per_spine} global links = {slots} links per group must split evenly over the {} other groups",
                    groups - 1
                ),
            ));
        }
        let c = slots / (groups - 1);
        let per_group_switches = leaves + spines;
        let hosts64 = groups as u64 * leaves as u64 * hosts_per_leaf as u64;
        if hosts64 > 1 << 24 {
            return Err(ConfigError::new("topology", format!("Dragonfly+ too large: {hosts64} hosts")));
        }
        let hosts = hosts64 as u32;
        let switches = groups * per_group_switches;
        let nodes = hosts + switches;
        let mut port_base = Vec::with_capacity(nodes as usize + 1);
        let mut next = 0u32;
        for _ in 0..hosts {
            port_base.push(next);
            next += 1;
        }
        for _ in 0..groups {
            for _ in 0..leaves {
                port_base.push(next);
                next += hosts_per_leaf + spines;
            }
            for _ in 0..spines {
                port_base.push(next);
                next += leaves + global_per_spine;
            }
        }
        port_base.push(next);
        let total_ports = next as usize;
        let port_node = super::port_nodes(&port_base);
        let leaf_node = |g: u32, i: u32| hosts + g * per_group_switches + i;
        let spine_node = |g: u32, j: u32| hosts + g * per_group_switches + leaves + j;
        let mut port_peer = vec![NONE; total_ports];
        let mut cable = |a: u32, b: u32| {
            port_peer[a as usize] = b;
            port_peer[b as usize] = a;
        };
        for g in 0..groups {
            for i in 0..leaves {
                let leaf = leaf_node(g, i);
                for k in 0..hosts_per_leaf {
                    let host = (g * leaves + i) * hosts_per_leaf + k;
                    cable(port_base[host as usize], port_base[leaf as usize] + k);
                }
                for j in 0..spines {
                    cable(port_base[leaf as usize] + hosts_per_leaf + j, port_base[spine_node(g, j) as usize] + i);
                }
            }
        }
        let slot = |i: u32| (i % spines, leaves + i / spines);
        let mut pair_links = vec![(NONE, NONE); (groups * groups * c) as usize];
        for a in 0..groups {
            for r in 0..groups - 1 {
                let b = (a + 1 + r) % groups;
                let r_back = (a + groups - b - 1) % groups;
                for k in 0..c {
                    let (sa, pa) = slot(r * c + k);
                    let (sb, pb) = slot(r_back * c + k);
                    pair_links[((a * groups + b) * c + k) as usize] = (sa, pa);
                    if a < b {
                        cable(port_base[spine_node(a, sa) as usize] + pa, port_base[spine_node(b, sb) as usize] + pb);
                    }
                }
            }
        }
        let mut node_names: Vec<String> = (0..hosts).map(|d| format!("H{d}")).collect();
        for g in 0..groups {
            node_names.extend((0..leaves).map(|i| format!("G{g}-L{i}")));
            node_names.extend((0..spines).map(|j| format!("G{g}-S{j}")));
        }
        // Per-pair indexes, so routing looks at each spine and port once, not at every link.
        let (mut pair_spines, mut pair_spine_at) = (Vec::new(), vec![0u32]);
        let (mut spine_ports, mut spine_port_at) = (Vec::new(), vec![0u32]);
        for a in 0..groups {
            for b in 0..groups {
                let links: Vec<(u32, u32)> = if a == b {
                    Vec::new()
                } else {
                    (0..c).map(|k| pair_links[((a * groups + b) * c + k) as usize]).collect()
                };
                for &(spine, _) in &links {
                    if !pair_spines[*pair_spine_at.last().unwrap() as usize..].contains(&spine) {
                        pair_spines.push(spine);
                    }
                }
                pair_spine_at.push(pair_spines.len() as u32);
                for j in 0..spines {
                    spine_ports.extend(links.iter().filter(|&&(sp, _)| sp == j).map(|&(_, port)| port));
                    spine_port_at.push(spine_ports.len() as u32);
                }
            }
        }
        let mut port_group = vec![NONE; (groups * spines * global_per_spine) as usize];
        for a in 0..groups {
            for b in 0..groups {
                for k in 0..if a == b { 0 } else { c } {
                    let (spine, port) = pair_links[((a * groups + b) * c + k) as usize];
                    port_group[((a * spines + spine) * global_per_spine + port - leaves) as usize] = b;
                }
            }
        }
        let graph = Graph { hosts, switches, port_base, port_node, port_peer, node_names };
        let host_places = (0..hosts)
            .map(|h| HostPlace {
                group: h / (leaves * hosts_per_leaf),
                leaf: ((h / hosts_per_leaf) % leaves) as u16,
                port: (h % hosts_per_leaf) as u16,
            })
            .collect();
        let switch_places = (0..switches)
            .map(|sw| {
                let (g, i) = (sw / per_group_switches, sw % per_group_switches);
                if i < leaves {
                    (g, Role::Leaf, i)
                } else {
                    (g, Role::Spine, i - leaves)
                }
            })
            .collect();
        Ok(DragonflyPlus {
            groups,
            leaves,
            spines,
            hosts_per_leaf,
            global_per_spine,
            links_per_pair: c,
            graph,
            pair_links,
            pair_spines,
            pair_spine_at,
            spine_ports,
            spine_port_at,
            port_group,
            host_places,
            switch_places,
        })
    }

    pub fn hosts_per_group(&self) -> u32 {
        self.leaves * self.hosts_per_leaf
    }

    #[inline]
    pub fn host_place(&self, host: u32) -> HostPlace {
        self.host_places[host as usize]
    }

    #[inline]
    pub fn group_of_host(&self, host: u32) -> u32 {
        self.host_places[host as usize].group
    }

    #[inline]
    pub fn leaf_of_host(&self, host: u32) -> u32 {
        self.host_places[host as usize].leaf as u32
    }

    /// (group, role, index within the role) of switch number `switch` (node id - hosts).
    #[inline]
    pub fn switch_place(&self, switch: u32) -> (u32, Role, u32) {
        self.switch_places[switch as usize]
    }

    /// The k-th global link from group a to group b: (spine index in a, spine's local port).
    #[inline]
    pub fn pair_link(&self, a: u32, b: u32, k: u32) -> (u32, u32) {
        self.pair_links[((a * self.groups + b) * self.links_per_pair + k) as usize]
    }

    /// Distinct spines (indices in group a) with a global link to group b.
    #[inline]
    pub fn spines_towards(&self, a: u32, b: u32) -> &[u32] {
        let i = (a * self.groups + b) as usize;
        &self.pair_spines[self.pair_spine_at[i] as usize..self.pair_spine_at[i + 1] as usize]
    }

    /// Local global ports of spine `spine` of group a towards group b (empty if none).
    #[inline]
    pub fn ports_towards(&self, a: u32, spine: u32, b: u32) -> &[u32] {
        let i = ((a * self.groups + b) * self.spines + spine) as usize;
        &self.spine_ports[self.spine_port_at[i] as usize..self.spine_port_at[i + 1] as usize]
    }

    /// The group global port `port` (local, `leaves..leaves + h`) of spine `spine` of group a reaches.
    #[inline]
    pub fn port_group(&self, a: u32, spine: u32, port: u32) -> u32 {
        self.port_group[((a * self.spines + spine) * self.global_per_spine + port - self.leaves) as usize]
    }

    /// Hops between switches on a minimal path: 0 on one leaf, 2 in one group, 3 across groups.
    pub fn minimal_switch_hops(&self, a: u32, b: u32) -> u32 {
        if a / self.hosts_per_leaf == b / self.hosts_per_leaf {
            0
        } else if self.group_of_host(a) == self.group_of_host(b) {
            2
        } else {
            3
        }
    }

    pub fn describe(&self) -> serde_json::Value {
        json!({
            "kind": "dragonfly-plus",
            "hosts": self.graph.hosts,
            "switches": self.graph.switches,
            "links": self.graph.links(),
            "groups": self.groups,
            "leaves_per_group": self.leaves,
            "spines_per_group": self.spines,
            "hosts_per_leaf": self.hosts_per_leaf,
            "hosts_per_group": self.hosts_per_group(),
            "global_links_per_spine": self.global_per_spine,
            "global_links_per_pair": self.links_per_pair,
            "leaf_radix": self.hosts_per_leaf + self.spines,
            "spine_radix": self.leaves + self.global_per_spine,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_port_is_cabled_once_and_pairs_get_c_links() {
        let d = DragonflyPlus::build(5, 2, 2, 2, 2).unwrap();
        let g = &d.graph;
        assert_eq!(g.hosts, 20);
        assert_eq!(d.links_per_pair, 1);
        for p in 0..g.ports() {
            let q = g.port_peer[p as usize];
            assert_ne!(q, NONE, "port {p} uncabled");
            assert_eq!(g.port_peer[q as usize], p);
        }
        // Global cables: per group s*h = 4, so 5*4/2 = 10 cables, one per group pair.
        let mut pairs = std::collections::HashMap::new();
        for a in 0..d.groups {
            for b in 0..d.groups {
                if a == b {
                    continue;
                }
                let (s, port) = d.pair_link(a, b, 0);
                let node = g.hosts + a * 4 + 2 + s;
                let peer = g.port_peer[(g.port_base[node as usize] + port) as usize];
                let (pg, role, _) = d.switch_place(g.port_node[peer as usize] - g.hosts);
                assert_eq!((pg, role), (b, Role::Spine));
                *pairs.entry((a.min(b), a.max(b))).or_insert(0) += 1;
            }
        }
        assert_eq!(pairs.len(), 10);
        assert!(pairs.values().all(|&n| n == 2)); // seen from both ends
    }

    /// Shortest switch paths between the leaves of hosts a and b, counted over the cabling (each
    /// cable a distinct path), by breadth-first search: independent of any routing.
    fn shortest_paths(d: &DragonflyPlus, a: u32, b: u32) -> (u32, u64) {
        let g = &d.graph;
        let leaf = |h: u32| g.port_node[g.port_peer[g.host_port(h) as usize] as usize];
        let (from, to) = (leaf(a), leaf(b));
        let mut dist = vec![u32::MAX; g.nodes() as usize];
        let mut count = vec![0u64; g.nodes() as usize];
        dist[from as usize] = 0;
        count[from as usize] = 1;
        let mut queue = std::collections::VecDeque::from([from]);
        while let Some(u) = queue.pop_front() {
            for p in g.port_base[u as usize]..g.port_base[u as usize + 1] {
                let v = g.port_node[g.port_peer[p as usize] as usize];
                if g.is_host(v) {
                    continue;
                }
                if dist[v as usize] == u32::MAX {
                    dist[v as usize] = dist[u as usize] + 1;
                    queue.push_back(v);
                }
                if dist[v as usize] == dist[u as usize] + 1 {
                    count[v as usize] += count[u as usize];
                }
            }
        }
        (dist[to as usize], count[to as usize])
    }

    #[test]
    fn hop_counts_and_path_diversity_match_the_formulas() {
        // Within a group: s paths of 2 hops (one per spine); between groups: c paths of 3 hops
        // (one per global link of the pair), c = s * h / (g - 1).
        for (g, l, s, p, h) in [(5, 3, 2, 2, 2), (4, 2, 3, 2, 2), (3, 4, 4, 2, 4)] {
            let d = DragonflyPlus::build(g, l, s, p, h).unwrap();
            let c = s * h / (g - 1);
            for a in 0..d.graph.hosts {
                for b in 0..d.graph.hosts {
                    let (hops, paths) = shortest_paths(&d, a, b);
                    let expected = if a / p == b / p {
                        (0, 1)
                    } else if d.group_of_host(a) == d.group_of_host(b) {
                        (2, s as u64)
                    } else {
                        (3, c as u64)
                    };
                    assert_eq!((hops, paths), expected, "{a}->{b} in ({g},{l},{s},{p},{h})");
                    assert_eq!(hops, d.minimal_switch_hops(a, b));
                }
            }
        }
    }

    #[test]
    fn global_links_that_do_not_split_evenly_are_refused() {
        let e = DragonflyPlus::build(4, 2, 2, 2, 2).err().unwrap();
        assert!(e.message.contains("split evenly"), "{}", e.message);
        assert!(DragonflyPlus::build(3, 2, 2, 2, 0).is_err());
        assert!(DragonflyPlus::build(1, 2, 2, 2, 2).is_err());
    }

    #[test]
    fn sizes_beyond_what_is_modelled_are_refused_before_anything_is_built() {
        // Each once wrapped a 32-bit port counter (a panic) or asked for gigabytes.
        for (sizes, key) in [
            ((2, 1, 1, 2, 1 << 31), "topology.global_links_per_spine"),
            ((3, 2, 2, 70_000, 2), "topology.hosts_per_leaf"),
            ((3, 1, 2, 1, 1 << 30), "topology.global_links_per_spine"),
            ((65_535, 1, 1, 1, 65_534), "topology"),
        ] {
            let (g, l, s, p, h) = sizes;
            let e = DragonflyPlus::build(g, l, s, p, h).err().unwrap();
            assert_eq!(e.key, key, "{}", e.message);
        }
    }
}
