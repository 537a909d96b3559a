//! Fat-tree routing: down ports are fixed by the destination; up ports by the algorithm.

use crate::config::RoutingAlgorithm;
use crate::topology::xgft::XgftSwitch;
use crate::topology::Topology;

/// Where a packet may leave a switch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// One port, no choice (down towards the destination, or an oblivious up choice).
    Port(u32),
    /// Any of `count` up ports starting at local port `first`: chosen per packet by the engine
    /// (uniformly at random, or adaptively from credits and queue state).
    AnyUp { first: u32, count: u32 },
}

pub struct Router {
    pub algorithm: RoutingAlgorithm,
    switches: Vec<XgftSwitch>,
}

impl Router {
    pub fn new(topology: &Topology, algorithm: RoutingAlgorithm) -> Router {
        match topology {
            Topology::Xgft(x) => Router { algorithm, switches: x.switches.clone() },
        }
    }

    /// Route at switch number `switch` (node id minus host count) for a packet from `src` to `dst`.
    #[inline]
    pub fn route(&self, switch: u32, src: u32, dst: u32) -> Route {
        let s = &self.switches[switch as usize];
        if dst.wrapping_sub(s.subtree_first) < s.subtree_hosts {
            return Route::Port((dst / s.hosts_per_down_port) % s.down_ports);
        }
        debug_assert!(s.up_ports > 0, "destination outside the top switch's subtree");
        match self.algorithm {
            // d-mod-k: consecutive destinations spread over consecutive up ports, so a shift
            // permutation is contention-free on a full fat tree (like OpenSM's ftree).
            RoutingAlgorithm::Dmodk => Route::Port(s.down_ports + (dst / s.up_divisor) % s.up_ports),
            RoutingAlgorithm::Smodk => Route::Port(s.down_ports + (src / s.up_divisor) % s.up_ports),
            RoutingAlgorithm::Random | RoutingAlgorithm::Adaptive => {
                if s.up_ports == 1 {
                    Route::Port(s.down_ports)
                } else {
                    Route::AnyUp { first: s.down_ports, count: s.up_ports }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::TopologyConfig;

    fn tree(m: Vec<u32>, w: Vec<u32>, alg: RoutingAlgorithm) -> (Topology, Router) {
        let t = Topology::build(&TopologyConfig::Xgft { m, w }).unwrap();
        let r = Router::new(&t, alg);
        (t, r)
    }

    /// Walks a packet from src to dst with oblivious routing; returns the links crossed.
    fn walk(t: &Topology, r: &Router, src: u32, dst: u32) -> Vec<u32> {
        let g = t.graph();
        let mut port = g.host_port(src);
        let mut path = vec![port];
        loop {
            let peer = g.port_peer[port as usize];
            let node = g.port_node[peer as usize];
            if g.is_host(node) {
                assert_eq!(node, dst);
                return path;
            }
            let Route::Port(local) = r.route(node - g.hosts, src, dst) else { panic!("oblivious") };
            port = g.port_base[node as usize] + local;
            path.push(port);
            assert!(path.len() < 16, "routing loop");
        }
    }

    #[test]
    fn every_pair_reaches_its_destination_on_a_shortest_path() {
        for alg in [RoutingAlgorithm::Dmodk, RoutingAlgorithm::Smodk] {
            let (t, r) = tree(vec![4, 3, 2], vec![1, 2, 3], alg);
            let Topology::Xgft(x) = &t;
            for s in 0..24 {
                for d in 0..24 {
                    if s != d {
                        assert_eq!(walk(&t, &r, s, d).len() as u32, 2 * x.common_level(s, d));
                    }
                }
            }
        }
    }

    #[test]
    fn dmodk_spreads_a_shift_permutation_over_distinct_up_links() {
        // On a full-bisection 2-level tree, shift by one leaf uses each up-link exactly once.
        let (t, r) = tree(vec![4, 4], vec![1, 4], RoutingAlgorithm::Dmodk);
        let mut used = std::collections::HashSet::new();
        for s in 0..16 {
            let path = walk(&t, &r, s, (s + 4) % 16);
            assert!(used.insert(path[1]), "up-link {} used twice", path[1]);
        }
    }
}
