//! Routing. Fat trees: down ports fixed by the destination, up ports by the algorithm. Any
//! topology: linear forwarding tables, given (from `ibroute` dumps) or computed like OpenSM's
//! minhop engine. Dragonfly+: minimal, Valiant and adaptive (dragonfly.rs).

pub mod dragonfly;

use crate::config::{ConfigError, FabricKind, RoutingAlgorithm, RoutingConfig};
use crate::topology::xgft::XgftSwitch;
use crate::topology::{Graph, Topology, NONE};
use rand::Rng;

/// Where a packet may leave a switch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// One port, no choice (down towards the destination, or an oblivious up choice).
    Port(u32),
    /// Any of `count` up ports starting at local port `first`: chosen per packet by the engine
    /// (uniformly at random, or adaptively from credits and queue state).
    AnyUp { first: u32, count: u32 },
}

/// A table entry for a destination the switch cannot reach.
pub const NO_ROUTE: u16 = u16::MAX;

/// What adaptive routing may know of congestion, on both fat trees and Dragonfly+ (UGAL): the
/// load of an output of the switch a packet is at, given as (local port, VL layer), in credits:
/// requests queued for it, plus its downstream buffer in use, plus one while it is sending.
pub trait LoadView {
    fn load(&mut self, local: u32, layer: u8) -> i64;
}

/// Any closure of (local port, VL layer) is a load view (tests, and oblivious table lookups).
impl<F: FnMut(u32, u8) -> i64> LoadView for F {
    #[inline(always)]
    fn load(&mut self, local: u32, layer: u8) -> i64 {
        self(local, layer)
    }
}

/// How a fat-tree switch picks among its up ports when the destination is outside its subtree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpChoice {
    /// d-mod-k: consecutive destinations spread over consecutive up ports, so a shift
    /// permutation is contention-free on a full fat tree (like OpenSM's ftree).
    Dmodk,
    /// s-mod-k: the same by source.
    Smodk,
    /// Uniformly at random, per packet.
    Random,
    /// The least-loaded up port (`LoadView`), ties broken from a random starting port.
    Adaptive,
}

/// The routing a fabric runs: one of three kinds of forwarding.
// One per run: the Dragonfly+ router stays inline, saving a pointer chase on each of its hops.
// An explicit tag: matched on every routed hop, it costs one load rather than a niche decode.
#[allow(clippy::large_enum_variant)]
#[repr(u8)]
pub enum Router {
    /// Linear forwarding tables (given, from `ibroute` dumps, or computed like OpenSM's minhop):
    /// output port of switch s towards host d at `s * hosts + d`.
    Tables { table: Vec<u16>, hosts: u32 },
    /// Up/down routing on a fat tree: down ports fixed by the destination, up ports by `up`.
    FatTree { up: UpChoice, switches: Vec<XgftSwitch> },
    /// Dragonfly+ minimal, Valiant and adaptive routing, with per-packet path state.
    Dragonfly(dragonfly::DragonflyRouter),
}

impl Router {
    /// `packet_credits`: credits of one MTU packet (adaptive Dragonfly+ routing's threshold).
    pub fn new(topology: &Topology, cfg: &RoutingConfig, packet_credits: u32) -> Result<Router, ConfigError> {
        let g = topology.graph();
        let algorithm = cfg.algorithm;
        let tables = |table: Vec<u16>| Router::Tables { table, hosts: g.hosts };
        let table_routing = matches!(algorithm, RoutingAlgorithm::Minhop | RoutingAlgorithm::Lft);
        // `route` looks entries up at switch * hosts + host in 32 bits.
        if table_routing && g.switches as u64 * g.hosts as u64 > u32::MAX as u64 {
            return Err(ConfigError::new(
                "routing.algorithm",
                format!(
                    "forwarding tables of {} switches x {} hosts exceed 2^32 entries; route this fabric otherwise",
                    g.switches, g.hosts
                ),
            ));
        }
        // Which algorithm suits which topology, VL layers, flowlets: the config's rules (also
        // checked by `EngineConfig::validate`), so that a routing built alone obeys them too.
        let (kind, name) = match topology {
            Topology::Xgft(_) => (FabricKind::FatTree, "xgft"),
            Topology::Explicit(_) => (FabricKind::Imported, "an imported fabric"),
            Topology::DragonflyPlus(d) => (FabricKind::DragonflyPlus { groups: d.groups }, "dragonfly-plus"),
        };
        cfg.check_fits(kind, name)?;
        let misfit = || {
            ConfigError::new("routing.algorithm", format!("{} routing does not suit this topology", algorithm.name()))
        };
        let router = match (algorithm, topology) {
            (RoutingAlgorithm::Minhop, _) => Ok(tables(minhop(g)?)),
            (RoutingAlgorithm::Lft, _) => {
                let table = cfg
                    .lft
                    .clone()
                    .ok_or_else(|| ConfigError::new("routing.lft", "the lft algorithm needs a forwarding table"))?;
                check_table(g, &table)?;
                Ok(tables(table))
            }
            (
                RoutingAlgorithm::Minimal | RoutingAlgorithm::Valiant | RoutingAlgorithm::Adaptive,
                Topology::DragonflyPlus(d),
            ) => {
                let mode = match algorithm {
                    RoutingAlgorithm::Minimal => dragonfly::Mode::Minimal,
                    RoutingAlgorithm::Valiant => dragonfly::Mode::Valiant,
                    _ => dragonfly::Mode::Adaptive,
                };
                Ok(Router::Dragonfly(dragonfly::DragonflyRouter::new(d, mode, packet_credits)))
            }
            (RoutingAlgorithm::Minimal | RoutingAlgorithm::Valiant, _) => Err(misfit()),
            (_, Topology::Xgft(x)) => {
                let up = match algorithm {
                    RoutingAlgorithm::Dmodk => UpChoice::Dmodk,
                    RoutingAlgorithm::Smodk => UpChoice::Smodk,
                    RoutingAlgorithm::Random => UpChoice::Random,
                    _ => UpChoice::Adaptive,
                };
                Ok(Router::FatTree { up, switches: x.switches.clone() })
            }
            (_, Topology::Explicit(_) | Topology::DragonflyPlus(_)) => Err(misfit()),
        }?;
        Ok(router)
    }

    /// The forwarding table entry of switch `switch` for host `dst`, for oblivious routing
    /// (table, minhop, dmodk, smodk); None where the choice is made per packet.
    pub fn table_entry(&self, switch: u32, dst: u32) -> Option<u32> {
        let per_destination = match self {
            Router::Dragonfly(d) => {
                // Minimal Dragonfly+ routing depends on the destination only.
                if d.mode != dragonfly::Mode::Minimal {
                    return None;
                }
                let mut rng = <rand_pcg::Pcg64Mcg as rand::SeedableRng>::seed_from_u64(0);
                let no_load = |_, _| 0;
                return Some(
                    d.route(switch, 0, dst, dragonfly::NO_VIA, 0, dragonfly::Decision::PerPacket, &mut rng, no_load)
                        .port,
                );
            }
            Router::Tables { .. } => true,
            Router::FatTree { up, .. } => *up == UpChoice::Dmodk,
        };
        match self.route(switch, 0, dst) {
            Route::Port(p) if per_destination && p != NO_ROUTE as u32 => Some(p),
            _ => None,
        }
    }

    /// Route at switch number `switch` (node id minus host count) for a packet from `src` to
    /// `dst`, on tables and fat trees (Dragonfly+ routes carry path state: `DragonflyRouter`).
    // Always inlined: the engine calls it per packet-hop from two places, and a call would
    // cost more than the lookup.
    #[inline(always)]
    pub fn route(&self, switch: u32, src: u32, dst: u32) -> Route {
        let (up, switches) = match self {
            Router::FatTree { up, switches } => (*up, switches),
            Router::Tables { table, hosts } => return Route::Port(table[(switch * hosts + dst) as usize] as u32),
            Router::Dragonfly(_) => unreachable!("Dragonfly+ routing goes through its own router"),
        };
        let s = &switches[switch as usize];
        if dst.wrapping_sub(s.subtree_first) < s.subtree_hosts {
            return Route::Port((dst / s.hosts_per_down_port) % s.down_ports);
        }
        debug_assert!(s.up_ports > 0, "destination outside the top switch's subtree");
        match up {
            UpChoice::Dmodk => Route::Port(s.down_ports + (dst / s.up_divisor) % s.up_ports),
            UpChoice::Smodk => Route::Port(s.down_ports + (src / s.up_divisor) % s.up_ports),
            UpChoice::Random | UpChoice::Adaptive if s.up_ports == 1 => Route::Port(s.down_ports),
            UpChoice::Random | UpChoice::Adaptive => Route::AnyUp { first: s.down_ports, count: s.up_ports },
        }
    }

    /// The per-packet choice among `count` up ports from local port `first` (`Route::AnyUp`):
    /// uniform, or the least loaded from a random starting port (ties keep the earlier one).
    #[inline(always)]
    pub fn choose_up<R: Rng>(&self, first: u32, count: u32, rng: &mut R, loads: &mut impl LoadView) -> u32 {
        let start = rng.gen_range(0..count);
        if !matches!(self, Router::FatTree { up: UpChoice::Adaptive, .. }) {
            return first + start;
        }
        least_loaded((0..count).map(|k| first + (start + k) % count), 0, loads)
    }
}

/// The first port of `ports` with the lowest load, and that load (callers rotate the order for
/// fair ties).
#[inline]
fn least_loaded_with_load<I: Iterator<Item = u32>, L: LoadView>(ports: I, phase: u8, load: &mut L) -> (u32, i64) {
    let mut best = (u32::MAX, i64::MAX);
    for port in ports {
        let l = load.load(port, phase);
        if l < best.1 {
            best = (port, l);
        }
    }
    best
}

#[inline]
fn least_loaded<I: Iterator<Item = u32>, L: LoadView>(ports: I, phase: u8, load: &mut L) -> u32 {
    least_loaded_with_load(ports, phase, load).0
}

/// The switch a host is cabled to.
fn attachment(g: &Graph, host: u32) -> u32 {
    g.port_node[g.port_peer[g.host_port(host) as usize] as usize]
}

/// Shortest paths, balanced as OpenSM's minhop engine balances them: at each switch, for each
/// destination in order, the least-used port among those on a shortest path (ties: lowest port).
fn minhop(g: &Graph) -> Result<Vec<u16>, ConfigError> {
    let (hosts, switches) = (g.hosts as usize, g.switches as usize);
    // Switch-to-switch hops from every switch that has hosts (hosts share their switch's BFS).
    let mut dist_from: Vec<Option<Vec<u32>>> = vec![None; switches];
    for h in 0..g.hosts {
        let a = (attachment(g, h) - g.hosts) as usize;
        if dist_from[a].is_none() {
            dist_from[a] = Some(bfs(g, a as u32));
        }
    }
    let first = (attachment(g, 0) - g.hosts) as usize;
    for h in 1..g.hosts {
        let a = attachment(g, h) - g.hosts;
        if dist_from[first].as_ref().unwrap()[a as usize] == NONE {
            return Err(ConfigError::new(
                "topology",
                format!(
                    "the fabric is not connected: no path from {:?} to {:?}",
                    g.node_names[0], g.node_names[h as usize]
                ),
            ));
        }
    }
    let mut table = vec![NO_ROUTE; switches * hosts];
    let mut used = vec![0u32; g.ports() as usize];
    for s in 0..switches {
        let node = g.hosts + s as u32;
        let (base, end) = (g.port_base[node as usize], g.port_base[node as usize + 1]);
        for d in 0..g.hosts {
            let host_port = g.host_port(d);
            let a = (attachment(g, d) - g.hosts) as usize;
            let dist = dist_from[a].as_ref().unwrap();
            if dist[s] == NONE {
                continue;
            }
            let mut best = NONE;
            for p in base..end {
                let peer = g.port_peer[p as usize];
                let on_path = if peer == NONE {
                    false
                } else if peer == host_port {
                    true
                } else {
                    let t = g.port_node[peer as usize];
                    !g.is_host(t) && dist[s] > 0 && dist[(t - g.hosts) as usize] == dist[s] - 1
                };
                if on_path && (best == NONE || used[p as usize] < used[best as usize]) {
                    best = p;
                }
                if peer == host_port {
                    best = p;
                    break;
                }
            }
            if best != NONE {
                used[best as usize] += 1;
                table[s * hosts + d as usize] = (best - base) as u16;
            }
        }
    }
    Ok(table)
}

/// Hops between switches from switch number `from` (NONE where unreachable).
fn bfs(g: &Graph, from: u32) -> Vec<u32> {
    let mut dist = vec![NONE; g.switches as usize];
    let mut queue = std::collections::VecDeque::from([from]);
    dist[from as usize] = 0;
    while let Some(s) = queue.pop_front() {
        let node = g.hosts + s;
        for p in g.port_base[node as usize]..g.port_base[node as usize + 1] {
            let peer = g.port_peer[p as usize];
            if peer == NONE {
                continue;
            }
            let t = g.port_node[peer as usize];
            if !g.is_host(t) && dist[(t - g.hosts) as usize] == NONE {
                dist[(t - g.hosts) as usize] = dist[s as usize] + 1;
                queue.push_back(t - g.hosts);
            }
        }
    }
    dist
}

/// A given table must take every host to every other host: ports that exist and are cabled, no
/// loops, no wrong deliveries. (Python checks the dumps first and names their lines; this guards
/// the engine's own invariant.)
fn check_table(g: &Graph, table: &[u16]) -> Result<(), ConfigError> {
    let key = "routing.lft";
    let (hosts, switches) = (g.hosts as usize, g.switches as usize);
    if table.len() != hosts * switches {
        return Err(ConfigError::new(
            key,
            format!("expected {} entries (switches x hosts), got {}", hosts * switches, table.len()),
        ));
    }
    // Marks, distinct for every destination: `good` = known to lead to d, `walk` = on the walk
    // from the current source.
    let mut mark = vec![u64::MAX; switches];
    for d in 0..g.hosts {
        let good = d as u64 * (hosts as u64 + 1);
        for src in 0..g.hosts {
            if src == d {
                continue;
            }
            let walk = good + 1 + src as u64;
            let mut s = attachment(g, src) - g.hosts;
            loop {
                let m = mark[s as usize];
                if m == good {
                    break;
                }
                if m == walk {
                    return Err(ConfigError::new(
                        key,
                        format!(
                            "a routing loop: from {:?} to {:?} the path returns to {:?}",
                            g.node_names[src as usize],
                            g.node_names[d as usize],
                            g.node_names[(g.hosts + s) as usize]
                        ),
                    ));
                }
                mark[s as usize] = walk;
                let node = g.hosts + s;
                let entry = table[s as usize * hosts + d as usize];
                let name = &g.node_names[node as usize];
                if entry == NO_ROUTE || entry as u32 >= g.radix(node) {
                    return Err(ConfigError::new(
                        key,
                        format!("switch {name:?} has no route to {:?}", g.node_names[d as usize]),
                    ));
                }
                let peer = g.port_peer[(g.port_base[node as usize] + entry as u32) as usize];
                if peer == NONE {
                    return Err(ConfigError::new(
                        key,
                        format!(
                            "switch {name:?} routes {:?} to port {}, which is not cabled",
                            g.node_names[d as usize],
                            entry as u32 + 1
                        ),
                    ));
                }
                let next = g.port_node[peer as usize];
                if g.is_host(next) {
                    if next != d {
                        return Err(ConfigError::new(
                            key,
                            format!(
                                "switch {name:?} delivers traffic for {:?} to {:?}",
                                g.node_names[d as usize], g.node_names[next as usize]
                            ),
                        ));
                    }
                    break;
                }
                s = next - g.hosts;
            }
            // Everything on this walk leads to d.
            let mut s = attachment(g, src) - g.hosts;
            while mark[s as usize] == walk {
                mark[s as usize] = good;
                let node = g.hosts + s;
                let entry = table[s as usize * hosts + d as usize] as u32;
                let next = g.port_node[g.port_peer[(g.port_base[node as usize] + entry) as usize] as usize];
                if g.is_host(next) {
                    break;
                }
                s = next - g.hosts;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::TopologyConfig;

    fn tree(m: Vec<u32>, w: Vec<u32>, alg: RoutingAlgorithm) -> (Topology, Router) {
        let t = Topology::build(&TopologyConfig::Xgft { m, w }).unwrap();
        let r = Router::new(&t, &RoutingConfig { algorithm: alg, lft: None, vls: 1, flowlet_gap_us: 0.0 }, 66).unwrap();
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
            let Topology::Xgft(x) = &t else { unreachable!() };
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

    #[test]
    fn minhop_takes_shortest_paths_and_balances_up_ports_like_dmodk() {
        let (t, r) = tree(vec![4, 4], vec![1, 4], RoutingAlgorithm::Minhop);
        let Topology::Xgft(x) = &t else { unreachable!() };
        for s in 0..16 {
            for d in 0..16 {
                if s != d {
                    assert_eq!(walk(&t, &r, s, d).len() as u32, 2 * x.common_level(s, d));
                }
            }
        }
        // Each leaf sends the 12 remote destinations over its 4 up ports, 3 each.
        let mut per_port = [0; 8];
        for d in 4..16 {
            let Route::Port(p) = r.route(0, 0, d) else { panic!() };
            per_port[p as usize] += 1;
        }
        assert_eq!(&per_port[4..], &[3, 3, 3, 3]);
    }

    #[test]
    fn a_given_table_with_a_loop_or_a_hole_is_refused() {
        let (t, minhop) = tree(vec![2, 2], vec![1, 2], RoutingAlgorithm::Minhop);
        let g = t.graph();
        let mut table: Vec<u16> = (0..g.switches)
            .flat_map(|s| (0..g.hosts).map(move |d| (s, d)))
            .map(|(s, d)| minhop.table_entry(s, d).unwrap() as u16)
            .collect();
        let ok =
            RoutingConfig { algorithm: RoutingAlgorithm::Lft, lft: Some(table.clone()), vls: 1, flowlet_gap_us: 0.0 };
        assert!(Router::new(&t, &ok, 66).is_ok());
        // Top switch S2-0 (switch 2) sends host 3 back down to leaf 0, whose table sends it up: a loop.
        table[2 * 4 + 3] = 0;
        table[3] = 2; // switch 0 (leaf 0), host 3
        let looped =
            RoutingConfig { algorithm: RoutingAlgorithm::Lft, lft: Some(table.clone()), vls: 1, flowlet_gap_us: 0.0 };
        let e = Router::new(&t, &looped, 66).err().expect("a loop");
        assert!(e.message.contains("loop"), "{}", e.message);
        table[3] = NO_ROUTE; // switch 0 (leaf 0), host 3
        let hole = RoutingConfig { algorithm: RoutingAlgorithm::Lft, lft: Some(table), vls: 1, flowlet_gap_us: 0.0 };
        assert!(Router::new(&t, &hole, 66).err().expect("a hole").message.contains("no route"));
    }
}
