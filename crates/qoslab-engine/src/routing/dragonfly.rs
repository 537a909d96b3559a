//! Dragonfly+ routing: minimal, Valiant (through a random intermediate group) and adaptive
//! (UGAL-L: minimal or Valiant chosen from local credit and queue state at the source spine
//! when every spine reaches the destination's group, else first at the source leaf; and the
//! least-loaded port among equivalent ones at every switch).
//!
//! Deadlock freedom. Minimal paths go up (leaf to spine), across (one global link) and down
//! (spine to leaf): no cycle on one VL. A non-minimal path turns down-then-up in its
//! intermediate group and crosses a second global link, which closes cycles; it therefore moves
//! to the second VL layer (phase 1) when it leaves the intermediate group's receiving switch
//! upwards or across: the up-link after the turn at a leaf, or the second global link directly
//! from the receiving spine. Phase-0 channels carry up -> global -> down; phase-1 channels carry
//! up -> global -> down to the destination only; so each layer is acyclic, and layer changes go
//! one way.

use super::{least_loaded, least_loaded_with_load, LoadView};
use crate::config::{FabricKind, RoutingAlgorithm, RoutingConfig};
use crate::topology::dragonfly::{DragonflyPlus, Role};
use rand::Rng;

/// Equivalent ports an adaptive choice compares, from a random starting one.
pub const ADAPTIVE_CHOICES: u32 = 2;

/// No intermediate group (a minimal path, or not decided yet).
pub const NO_VIA: u16 = u16::MAX;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Minimal,
    Valiant,
    Adaptive,
}

/// Where a packet goes from a switch, and its path state afterwards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hop {
    /// Local output port.
    pub port: u32,
    /// VL layer of this hop (and of the packet from now on).
    pub phase: u8,
    /// Intermediate group (NO_VIA for a minimal path).
    pub via: u16,
    /// This hop took the packet's source-group decision (minimal or not) under `Decision::Once`.
    pub decided: bool,
}

/// How a packet's minimal-or-not decision (UGAL, adaptive mode) is taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Per packet: at the source leaf (where it matters) and again at the source spine.
    PerPacket,
    /// Flowlets: once, at the packet's first decision point. `Some(via)`: the flow's active
    /// flowlet took that path (NO_VIA: minimal), so it is followed without comparing loads.
    Once(Option<u16>),
    /// Taken already, at an earlier switch (a flowlet packet).
    Done,
}

pub struct DragonflyRouter {
    pub mode: Mode,
    df: DragonflyPlus,
    /// UGAL's bias towards minimal paths, in credits (one MTU packet).
    pub ugal_threshold: i64,
}

impl DragonflyRouter {
    pub fn new(df: &DragonflyPlus, mode: Mode, packet_credits: u32) -> DragonflyRouter {
        DragonflyRouter { mode, df: df.clone(), ugal_threshold: packet_credits as i64 }
    }

    /// VL layers a deadlock-free path needs with this mode.
    pub fn layers_needed(&self) -> u8 {
        let algorithm = match self.mode {
            Mode::Minimal => RoutingAlgorithm::Minimal,
            Mode::Valiant => RoutingAlgorithm::Valiant,
            Mode::Adaptive => RoutingAlgorithm::Adaptive,
        };
        RoutingConfig::layers_needed(algorithm, FabricKind::DragonflyPlus { groups: self.df.groups })
    }

    /// Routes a packet for `dst` at switch number `switch`, arrived on local port `input`, with
    /// path state (`via`, `phase`). `load(local_port, phase)` is the adaptive cost of an output:
    /// queued requests plus occupied downstream buffer, in credits. `decision`: how adaptive
    /// routing takes its minimal-or-not decision for this packet.
    #[inline]
    #[allow(clippy::too_many_arguments)]
    pub fn route<R: Rng, L: LoadView>(
        &self,
        switch: u32,
        input: u32,
        dst: u32,
        via: u16,
        phase: u8,
        decision: Decision,
        rng: &mut R,
        mut load: L,
    ) -> Hop {
        let df = &self.df;
        let (group, role, index) = df.switch_place(switch);
        let place = df.host_place(dst);
        let (dst_group, dst_leaf) = (place.group, place.leaf as u32);
        let p = df.hosts_per_leaf;
        match role {
            Role::Leaf => {
                if group == dst_group && index == dst_leaf {
                    return Hop { port: place.port as u32, phase, via, decided: false };
                }
                let (mut via, mut phase) = (via, phase);
                if input < p && dst_group != group && self.mode == Mode::Valiant {
                    // Source leaf: an intermediate group uniformly among the others; drawing the
                    // destination's group means the minimal path. Under a group permutation the
                    // load is not even (a shift by one: the direct link a -> a+1 carries
                    // G / (g - 1), every other 2G / (g - 1), G a group's injection), but no link
                    // carries more than 2G / (g - 1): at least half the injection rate when
                    // global links match the hosts (s * h = l * p).
                    let r = rng.gen_range(0..df.groups - 1);
                    let i = r + (r >= group) as u32;
                    if i != dst_group {
                        via = i as u16;
                    }
                } else if input < p
                    && dst_group != group
                    && self.mode == Mode::Adaptive
                    && df.groups > 2
                    && decision != Decision::Done
                    // When every spine reaches the destination's group, both candidates would
                    // compare the same up-links: the source spine decides instead.
                    && df.spines_towards(group, dst_group).len() < df.spines as usize
                {
                    let once = matches!(decision, Decision::Once(_));
                    if let Decision::Once(Some(pinned)) = decision {
                        // The flow's flowlet: its path, whatever the loads now.
                        let to = if pinned == NO_VIA { dst_group } else { pinned as u32 };
                        let (port, _) = self.best_up(group, to, dst, rng, &mut load, 0);
                        return Hop { port, phase: 0, via: pinned, decided: true };
                    }
                    // Source leaf: a non-minimal candidate through a group other than ours and the
                    // destination's.
                    let r = rng.gen_range(0..df.groups - 2);
                    let (lo, hi) = (group.min(dst_group), group.max(dst_group));
                    let mut i = r;
                    if i >= lo {
                        i += 1;
                    }
                    if i >= hi {
                        i += 1;
                    }
                    {
                        // UGAL-L: a non-minimal path is about twice as long; take it only when
                        // the minimal first hop is loaded beyond twice the non-minimal one.
                        let (min_port, min_load) = self.best_up(group, dst_group, dst, rng, &mut load, 0);
                        let (non_port, non_load) = self.best_up(group, i, dst, rng, &mut load, 0);
                        if min_load <= 2 * non_load + self.ugal_threshold {
                            return Hop { port: min_port, phase: 0, via: NO_VIA, decided: once };
                        }
                        return Hop { port: non_port, phase: 0, via: i as u16, decided: once };
                    }
                } else if via != NO_VIA && phase == 0 && via as u32 == group {
                    // The down-then-up turn in the intermediate group: second layer from here.
                    phase = 1;
                }
                let target = if via != NO_VIA && phase == 0 { via as u32 } else { dst_group };
                if target == group {
                    // Inside the group: any spine reaches every leaf.
                    let spine = match self.mode {
                        Mode::Minimal => dst % df.spines,
                        Mode::Valiant => rng.gen_range(0..df.spines),
                        Mode::Adaptive => {
                            let start = rng.gen_range(0..df.spines);
                            least_loaded(
                                (0..df.spines.min(ADAPTIVE_CHOICES)).map(|k| p + wrap(start + k, df.spines)),
                                phase,
                                &mut load,
                            ) - p
                        }
                    };
                    return Hop { port: p + spine, phase, via, decided: false };
                }
                let (port, _) = self.best_up(group, target, dst, rng, &mut load, phase);
                Hop { port, phase, via, decided: false }
            }
            Role::Spine => {
                let from_global = input >= df.leaves;
                if from_global && !(via != NO_VIA && phase == 0 && via as u32 == group) {
                    debug_assert_eq!(
                        group, dst_group,
                        "a packet arrived in a group that is neither its intermediate nor its destination"
                    );
                    return Hop { port: dst_leaf, phase, via, decided: false };
                }
                if from_global {
                    // Arrived in the intermediate group: straight on if this spine has a link to
                    // the destination group, else down to a leaf to reach one that has.
                    if let Some(port) = self.global_from(group, index, dst_group, dst, rng, &mut load, 1) {
                        return Hop { port, phase: 1, via, decided: false };
                    }
                    let leaf = match self.mode {
                        Mode::Minimal => dst % df.leaves,
                        Mode::Valiant => rng.gen_range(0..df.leaves),
                        Mode::Adaptive => {
                            let start = rng.gen_range(0..df.leaves);
                            least_loaded(
                                (0..df.leaves.min(ADAPTIVE_CHOICES)).map(|k| wrap(start + k, df.leaves)),
                                0,
                                &mut load,
                            )
                        }
                    };
                    return Hop { port: leaf, phase: 0, via, decided: false };
                }
                let target = if via != NO_VIA && phase == 0 { via as u32 } else { dst_group };
                if target == group {
                    return Hop { port: dst_leaf, phase, via, decided: false };
                }
                let mut decided = false;
                if self.mode == Mode::Adaptive
                    && via == NO_VIA
                    && phase == 0
                    && df.groups > 2
                    && decision != Decision::Done
                {
                    // A minimal packet at its source group's spine: the global ports are where
                    // congestion between groups shows, so UGAL decides again here (the leaf only
                    // sees its up-links, the same ones for both paths when every spine reaches
                    // every group).
                    decided = matches!(decision, Decision::Once(_));
                    match decision {
                        Decision::Once(Some(NO_VIA)) => {} // the flowlet's minimal path, below
                        Decision::Once(Some(pinned)) if !df.ports_towards(group, index, pinned as u32).is_empty() => {
                            let port =
                                self.global_from(group, index, pinned as u32, dst, rng, &mut load, 0).expect("a port");
                            return Hop { port, phase: 0, via: pinned, decided };
                        }
                        // Per packet, a new flowlet, or a flowlet through a group this spine
                        // has no link to: compare loads.
                        _ => {
                            if let Some(hop) = self.ugal_at_spine(group, index, dst_group, rng, &mut load) {
                                return Hop { decided, ..hop };
                            }
                        }
                    }
                }
                match self.global_from(group, index, target, dst, rng, &mut load, phase) {
                    Some(port) => Hop { port, phase, via, decided },
                    // Leaves only send a packet to a spine with a link to its next group; this
                    // entry exists for forwarding tables, which need one for every destination.
                    None => Hop { port: dst % df.leaves, phase, via, decided: false },
                }
            }
        }
    }

    /// UGAL-L at a source-group spine: the least-loaded global port towards the destination's
    /// group against one towards a random other group this spine reaches; the non-minimal one
    /// when the minimal is loaded beyond twice it plus a packet. None: no link to the destination
    /// group here (a forwarding-table entry) or no other group reachable.
    fn ugal_at_spine<R: Rng, L: LoadView>(
        &self,
        group: u32,
        spine: u32,
        dst_group: u32,
        rng: &mut R,
        load: &mut L,
    ) -> Option<Hop> {
        let df = &self.df;
        let (min_port, min_load) = self.least_loaded_global(group, spine, dst_group, rng, load)?;
        let h = df.global_per_spine;
        let first = rng.gen_range(0..h);
        let via =
            (0..h).map(|k| df.port_group(group, spine, df.leaves + wrap(first + k, h))).find(|&g| g != dst_group)?;
        let (non_port, non_load) = self.least_loaded_global(group, spine, via, rng, load)?;
        if min_load <= 2 * non_load + self.ugal_threshold {
            return Some(Hop { port: min_port, phase: 0, via: NO_VIA, decided: false });
        }
        Some(Hop { port: non_port, phase: 0, via: via as u16, decided: false })
    }

    /// The least-loaded of (up to ADAPTIVE_CHOICES) global ports of a spine towards group `to`.
    fn least_loaded_global<R: Rng, L: LoadView>(
        &self,
        group: u32,
        spine: u32,
        to: u32,
        rng: &mut R,
        load: &mut L,
    ) -> Option<(u32, i64)> {
        let mine = self.df.ports_towards(group, spine, to);
        if mine.is_empty() {
            return None;
        }
        let start = rng.gen_range(0..mine.len());
        let n = mine.len();
        Some(least_loaded_with_load((0..n.min(ADAPTIVE_CHOICES as usize)).map(|k| mine[wrap(start + k, n)]), 0, load))
    }

    /// The leaf up-port towards a spine with a global link to group `to`, and its load: by
    /// destination for minimal routing, a link at random for Valiant (spines weighted by their
    /// links), the least-loaded spine for adaptive.
    fn best_up<R: Rng, L: LoadView>(
        &self,
        group: u32,
        to: u32,
        dst: u32,
        rng: &mut R,
        load: &mut L,
        phase: u8,
    ) -> (u32, i64) {
        let df = &self.df;
        let c = df.links_per_pair;
        let p = df.hosts_per_leaf;
        let port = match self.mode {
            Mode::Minimal => p + df.pair_link(group, to, dst % c).0,
            Mode::Valiant => p + df.pair_link(group, to, rng.gen_range(0..c)).0,
            Mode::Adaptive => {
                let spines = df.spines_towards(group, to);
                let start = rng.gen_range(0..spines.len());
                let n = spines.len();
                let candidates = (0..n.min(ADAPTIVE_CHOICES as usize)).map(|k| p + spines[wrap(start + k, n)]);
                return least_loaded_with_load(candidates, phase, load);
            }
        };
        (port, load.load(port, phase))
    }

    /// A global port of spine `spine` (index in `group`) towards group `to`, if it has one.
    #[allow(clippy::too_many_arguments)]
    fn global_from<R: Rng, L: LoadView>(
        &self,
        group: u32,
        spine: u32,
        to: u32,
        dst: u32,
        rng: &mut R,
        load: &mut L,
        phase: u8,
    ) -> Option<u32> {
        let df = &self.df;
        let mine = df.ports_towards(group, spine, to);
        if mine.is_empty() {
            return None;
        }
        Some(match self.mode {
            Mode::Minimal => {
                // The link the leaf aimed at (k = dst mod c) if it is here, else this spine's first.
                let (s, port) = df.pair_link(group, to, dst % df.links_per_pair);
                if s == spine {
                    port
                } else {
                    mine[0]
                }
            }
            Mode::Valiant => mine[rng.gen_range(0..mine.len())],
            Mode::Adaptive => {
                let start = rng.gen_range(0..mine.len());
                least_loaded(
                    (0..mine.len().min(ADAPTIVE_CHOICES as usize)).map(|k| mine[wrap(start + k, mine.len())]),
                    phase,
                    load,
                )
            }
        })
    }
}

/// `i mod n` for `i < 2n` (a rotation's start plus a step): a compare, not a division.
#[inline]
fn wrap<T: Copy + PartialOrd + std::ops::Sub<Output = T>>(i: T, n: T) -> T {
    if i >= n {
        i - n
    } else {
        i
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::Graph;
    use rand::SeedableRng;

    /// Follows a packet from `src` to `dst`; returns (switch hops, global links crossed, the
    /// phase of every hop) and checks the destination is reached.
    fn walk(df: &DragonflyPlus, router: &DragonflyRouter, src: u32, dst: u32, seed: u64) -> (u32, u32, Vec<u8>) {
        let g: &Graph = &df.graph;
        let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(seed);
        let mut port = g.port_peer[g.host_port(src) as usize];
        let (mut via, mut phase) = (NO_VIA, 0u8);
        let (mut hops, mut globals, mut phases) = (0, 0, Vec::new());
        loop {
            let node = g.port_node[port as usize];
            if g.is_host(node) {
                assert_eq!(node, dst);
                return (hops - 1, globals, phases);
            }
            let input = g.local_port(port);
            let hop = router.route(node - g.hosts, input, dst, via, phase, Decision::PerPacket, &mut rng, |_, _| 0);
            (via, phase) = (hop.via, hop.phase);
            phases.push(phase);
            let out = g.port_base[node as usize] + hop.port;
            let next = g.port_peer[out as usize];
            let (a, b) = (node - g.hosts, g.port_node[next as usize]);
            if !g.is_host(b) && df.switch_place(a).0 != df.switch_place(b - g.hosts).0 {
                globals += 1;
            }
            hops += 1;
            assert!(hops < 12, "routing loop");
            port = next;
        }
    }

    #[test]
    fn minimal_paths_have_the_topologys_hop_counts() {
        let df = DragonflyPlus::build(5, 3, 2, 2, 2).unwrap();
        let r = DragonflyRouter::new(&df, Mode::Minimal, 66);
        for s in 0..df.graph.hosts {
            for d in 0..df.graph.hosts {
                if s != d {
                    let (hops, globals, phases) = walk(&df, &r, s, d, 1);
                    assert_eq!(hops, df.minimal_switch_hops(s, d), "{s}->{d}");
                    assert_eq!(globals, (df.minimal_switch_hops(s, d) == 3) as u32);
                    assert!(phases.iter().all(|&p| p == 0));
                }
            }
        }
    }

    #[test]
    fn valiant_crosses_two_global_links_and_changes_layer_once() {
        let df = DragonflyPlus::build(5, 3, 2, 2, 2).unwrap();
        let r = DragonflyRouter::new(&df, Mode::Valiant, 66);
        assert_eq!(r.layers_needed(), 2);
        let mut minimal = 0;
        for seed in 0..20 {
            for (s, d) in [(0, 7), (1, 29), (13, 2), (6, 25)] {
                let (hops, globals, phases) = walk(&df, &r, s, d, seed);
                if globals == 1 {
                    // The destination's group was drawn: the minimal path, on layer 0.
                    assert_eq!(hops, 3);
                    assert!(phases.iter().all(|&p| p == 0));
                    minimal += 1;
                    continue;
                }
                assert_eq!(globals, 2, "{s}->{d}");
                // leaf-spine, global, [spine-leaf, leaf-spine], global, spine-leaf
                assert!(hops == 4 || hops == 6, "{hops} hops");
                let first_one = phases.iter().position(|&p| p == 1).expect("reaches layer 1");
                assert!(phases[first_one..].iter().all(|&p| p == 1), "{phases:?}");
            }
        }
        // One draw in four (the 4 other groups) is the destination's: 20 of 80 expected.
        assert!((8..=32).contains(&minimal), "{minimal} minimal of 80");
        // Inside a group, Valiant stays minimal.
        assert_eq!(walk(&df, &r, 0, 3, 1).1, 0);
    }
}
