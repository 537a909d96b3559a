//! GPCNeT's canaries and congestors (netbench/GPCNET v1.3: network_load_test.c, random_ring.c,
//! collectives.c, congestors.c, subcomms.c), as GPCNeT runs them.
//!
//! - **Node slices.** At k ranks per node GPCNeT runs every test once per node slice, all slices
//!   at once: `node_slice_subcomms` builds k communicators, slice s holding local rank s of every
//!   node in node order. A slice here is `Group { stride: k, size: nodes }`; at one rank per node
//!   it is the whole job.
//! - **Rings.** Each slice draws its own random rings (GPCNeT seeds them per local rank), the
//!   same rings for the latency and the bandwidth test (GPCNeT reseeds at each test's first ring)
//!   and, since the draws come from the job's name-keyed stream, the same rings alone and shared
//!   (GPCNeT measures isolated and congested on identical rings).
//! - **Canary sequence** (`gpcnet-canaries`): the three network tests one after the other over
//!   the whole canary node set, each ring (or allreduce test) opened by GPCNeT's untimed global
//!   synchronisation and warm-up iterations. Only the timed iterations are recorded; their
//!   numbers count every iteration, and Python (workloads.py, `GpcnetCanaries.gpcnet_tests`)
//!   knows the same layout to tell the tests apart.
//!
//! Parameters have no defaults here: Python resolves them.

use super::program::{sendrecv, CollectiveKind, Group, Op};
use super::workloads::{params, JobShape, Program};
use crate::units::us_to_ps;
use rand::seq::SliceRandom;
use rand_pcg::Pcg64Mcg;
use serde::Deserialize;
use std::collections::VecDeque;

/// Builds the generator for a GPCNeT kind, or None if the kind is not one of GPCNeT's.
pub fn build(kind: &str, p: &serde_json::Value, shape: &JobShape) -> Option<Result<Box<dyn Program>, String>> {
    fn boxed<T: Program + 'static>(r: Result<T, String>) -> Result<Box<dyn Program>, String> {
        r.map(|g| Box::new(g) as Box<dyn Program>)
    }
    let slices = Slices::of(shape);
    Some(match kind {
        "gpcnet-rr-latency" | "gpcnet-rr-bandwidth" => {
            let with_sync = kind == "gpcnet-rr-bandwidth";
            boxed(params::<RandomRingParams>(kind, p).and_then(|g| RandomRing::new(kind, g, with_sync, slices, shape)))
        }
        "gpcnet-allreduce" => boxed(params::<LoopParams>(kind, p).map(|p| SliceAllreduce { p, slices })),
        "gpcnet-alltoall" => boxed(params::<LoopParams>(kind, p).map(|p| PairwiseAlltoall { p, slices })),
        "gpcnet-incast" => {
            boxed(params::<Rooted>(kind, p).map(|p| RootedPattern { p, style: Rooting::TwoSidedIncast, slices }))
        }
        "gpcnet-put-incast" => {
            boxed(params::<Rooted>(kind, p).map(|p| RootedPattern { p, style: Rooting::PutIncast, slices }))
        }
        "gpcnet-get-bcast" => {
            boxed(params::<Rooted>(kind, p).map(|p| RootedPattern { p, style: Rooting::GetBcast, slices }))
        }
        "gpcnet-canaries" => boxed(params::<CanaryParams>(kind, p).and_then(|p| Canaries::new(p, slices, shape))),
        _ => return None,
    })
}

/// A job's node slices: slice s is local rank s of every node (rank = node × k + s).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slices {
    pub per_node: u32,
    pub nodes: u32,
}

impl Slices {
    pub fn of(shape: &JobShape) -> Slices {
        let per_node = shape.ranks_per_node.max(1);
        Slices { per_node, nodes: shape.size / per_node }
    }

    /// The calling rank's slice as a sub-communicator (its position is its node).
    pub fn group(&self) -> Group {
        Group { stride: self.per_node, size: self.nodes }
    }

    fn slice(&self, rank: u32) -> u32 {
        rank % self.per_node
    }

    fn position(&self, rank: u32) -> u32 {
        rank / self.per_node
    }

    fn member(&self, slice: u32, position: u32) -> u32 {
        position * self.per_node + slice
    }
}

fn compute(out: &mut Vec<Op>, us: f64) {
    if us > 0.0 {
        out.push(Op::Compute { ps: us_to_ps(us) });
    }
}

/// One random ring per slice, drawn in ring order from the job's name-keyed stream (so the
/// draws never depend on which rank asks first). With a `window`, only the last rings are kept;
/// a restarted job asking for a dropped ring again has its rings drawn again from the start, so
/// every run of the job uses the same rings.
struct Rings {
    slices: Slices,
    start: Pcg64Mcg,
    rng: Pcg64Mcg,
    window: Option<usize>,
    first: u32,
    /// Per kept ring, per slice: the ring order of node positions and each position's index in it.
    kept: VecDeque<Vec<(Vec<u32>, Vec<u32>)>>,
}

impl Rings {
    fn new(slices: Slices, rng: Pcg64Mcg, window: Option<usize>) -> Rings {
        Rings { slices, start: rng.clone(), rng, window, first: 0, kept: VecDeque::new() }
    }

    /// (left, right) neighbours of `rank` on ring `ring` of its slice, as job ranks.
    fn neighbours(&mut self, ring: u32, rank: u32) -> (u32, u32) {
        if ring < self.first {
            (self.rng, self.first) = (self.start.clone(), 0);
            self.kept.clear();
        }
        while self.first + self.kept.len() as u32 <= ring {
            let n = self.slices.nodes;
            let draw = (0..self.slices.per_node)
                .map(|_| {
                    let mut order: Vec<u32> = (0..n).collect();
                    order.shuffle(&mut self.rng);
                    let mut index = vec![0; n as usize];
                    for (i, &p) in order.iter().enumerate() {
                        index[p as usize] = i as u32;
                    }
                    (order, index)
                })
                .collect();
            self.kept.push_back(draw);
            if self.window.is_some_and(|w| self.kept.len() > w) {
                self.kept.pop_front();
                self.first += 1;
            }
        }
        let (slice, position) = (self.slices.slice(rank), self.slices.position(rank));
        let (order, index) = &self.kept[(ring - self.first) as usize][slice as usize];
        let n = order.len();
        let i = index[position as usize] as usize;
        let (left, right) = (order[(i + n - 1) % n], order[(i + 1) % n]);
        (self.slices.member(slice, left), self.slices.member(slice, right))
    }
}

/// GPCNeT's ring exchange (random_ring.c, p2p_latency / p2p_neighbors): `outstanding`
/// receives from each neighbour, then as many sends to each, then wait for all.
fn ring_exchange(out: &mut Vec<Op>, left: u32, right: u32, bytes: u64, outstanding: u32) {
    for _ in 0..outstanding {
        out.push(Op::irecv(left, 0));
        out.push(Op::irecv(right, 1));
    }
    for _ in 0..outstanding {
        out.push(Op::isend(right, bytes, 0));
        out.push(Op::isend(left, bytes, 1));
    }
    out.push(Op::WaitAll);
}

fn at_least_two_nodes(kind: &str, slices: Slices) -> Result<(), String> {
    if slices.nodes < 2 {
        return Err(format!("workload {kind:?}: a ring needs at least 2 nodes, the job has {}", slices.nodes));
    }
    Ok(())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RandomRingParams {
    bytes: u64,
    iterations: u32,
    /// Messages in flight per direction (GPCNeT's bandwidth test uses 8).
    outstanding: u32,
    /// Iterations between re-shuffles of the ring (GPCNeT: 200 for latency, 8 for bandwidth).
    iterations_per_ring: u32,
}

/// GPCNeT's random-ring canaries on their own: ranks of each slice in a shuffled ring exchange
/// with both ring neighbours; the bandwidth test ends every iteration with a barrier of the slice
/// (p2p_neighbors' MPI_Barrier(comm)).
pub struct RandomRing {
    p: RandomRingParams,
    with_sync: bool,
    slices: Slices,
    rings: Rings,
}

impl RandomRing {
    fn new(
        kind: &str,
        p: RandomRingParams,
        with_sync: bool,
        slices: Slices,
        shape: &JobShape,
    ) -> Result<RandomRing, String> {
        at_least_two_nodes(kind, slices)?;
        // A ring per `iterations_per_ring` iterations, possibly very many; ranks drift apart by
        // at most a ring or two, so a generous window is kept.
        Ok(RandomRing { p, with_sync, slices, rings: Rings::new(slices, shape.named_rng.clone(), Some(64)) })
    }
}

impl Program for RandomRing {
    fn iterations(&self) -> u32 {
        self.p.iterations
    }
    fn iteration(&mut self, rank: u32, iter: u32, out: &mut Vec<Op>) {
        let (left, right) = self.rings.neighbours(iter / self.p.iterations_per_ring.max(1), rank);
        ring_exchange(out, left, right, self.p.bytes, self.p.outstanding);
        if self.with_sync {
            out.push(Op::Collective { kind: CollectiveKind::Barrier, bytes: 0, group: self.slices.group() });
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoopParams {
    bytes: u64,
    iterations: u32,
    #[serde(default)]
    compute_us: f64,
}

/// GPCNeT's "Multiple Allreduce" canary: an allreduce in every slice at once, one per iteration.
pub struct SliceAllreduce {
    p: LoopParams,
    slices: Slices,
}

impl Program for SliceAllreduce {
    fn iterations(&self) -> u32 {
        self.p.iterations
    }
    fn iteration(&mut self, _rank: u32, _iter: u32, out: &mut Vec<Op>) {
        compute(out, self.p.compute_us);
        out.push(Op::Collective { kind: CollectiveKind::Allreduce, bytes: self.p.bytes, group: self.slices.group() });
    }
}

/// The partner of position `me` in round `i` of GPCNeT's a2a_congestor (congestors.c): XOR in
/// a power-of-two group, else send to me + i and receive from me − i. Returns (to, from).
pub fn alltoall_partners(n: u32, me: u32, i: u32) -> (u32, u32) {
    if n.is_power_of_two() {
        (me ^ i, me ^ i)
    } else {
        ((me + i) % n, (me + n - i) % n)
    }
}

/// GPCNeT's alltoall congestor: not MPI_Alltoall but its own loop of MPI_Sendrecv of `bytes`
/// with every other member of the slice, one partner per round. (GPCNeT's round 0 is a rank's
/// exchange with itself, a local copy: left out.)
pub struct PairwiseAlltoall {
    p: LoopParams,
    slices: Slices,
}

impl Program for PairwiseAlltoall {
    fn iterations(&self) -> u32 {
        self.p.iterations
    }
    fn iteration(&mut self, rank: u32, _iter: u32, out: &mut Vec<Op>) {
        compute(out, self.p.compute_us);
        let s = self.slices;
        let (slice, me) = (s.slice(rank), s.position(rank));
        for i in 1..s.nodes {
            let (to, from) = alltoall_partners(s.nodes, me, i);
            sendrecv(out, s.member(slice, to), s.member(slice, from), self.p.bytes, 0);
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rooted {
    bytes: u64,
    iterations: u32,
    /// Messages per sender per iteration.
    messages: u32,
}

enum Rooting {
    TwoSidedIncast,
    PutIncast,
    GetBcast,
}

/// GPCNeT's rooted congestors: in every slice, every member but the first (the slice's rank on
/// the job's first node) sends to (or reads from) that first member.
struct RootedPattern {
    p: Rooted,
    style: Rooting,
    slices: Slices,
}

impl Program for RootedPattern {
    fn iterations(&self) -> u32 {
        self.p.iterations
    }
    fn iteration(&mut self, rank: u32, _iter: u32, out: &mut Vec<Op>) {
        let (bytes, n) = (self.p.bytes, self.p.messages);
        let s = self.slices;
        let (slice, me) = (s.slice(rank), s.position(rank));
        let root = s.member(slice, 0);
        let before = out.len();
        match (&self.style, me) {
            (Rooting::TwoSidedIncast, 0) => {
                for sender in 1..s.nodes {
                    out.extend((0..n).map(|_| Op::irecv(s.member(slice, sender), 0)));
                }
            }
            (Rooting::TwoSidedIncast, _) => out.extend((0..n).map(|_| Op::isend(root, bytes, 0))),
            // One-sided: the root's CPU takes no part.
            (Rooting::PutIncast, 0) | (Rooting::GetBcast, 0) => {}
            (Rooting::PutIncast, _) => out.extend((0..n).map(|_| Op::Put { peer: root, bytes })),
            (Rooting::GetBcast, _) => out.extend((0..n).map(|_| Op::Get { peer: root, bytes })),
        }
        if out.len() > before {
            out.push(Op::WaitAll);
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CanaryParams {
    latency_bytes: u64,
    latency_rings: u32,
    latency_iterations: u32,
    latency_warmup: u32,
    bandwidth_bytes: u64,
    bandwidth_outstanding: u32,
    bandwidth_rings: u32,
    bandwidth_iterations: u32,
    bandwidth_warmup: u32,
    allreduce_bytes: u64,
    allreduce_tests: u32,
    allreduce_iterations: u32,
    allreduce_warmup: u32,
}

/// The three network tests of network_load_test, in its order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CanaryTest {
    Latency,
    Bandwidth,
    Allreduce,
}

/// What one iteration of the canary sequence is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CanaryStep {
    /// GPCNeT's untimed synchronisation before a ring (a barrier of all canary ranks) or an
    /// allreduce test (its timeout check: an 8-byte allreduce of all canary ranks).
    Sync(CanaryTest, u32),
    /// An untimed warm-up iteration of ring (or allreduce test) `.1`.
    Warmup(CanaryTest, u32),
    /// A timed iteration of ring (or allreduce test) `.1`.
    Timed(CanaryTest, u32),
}

/// One ring or allreduce test: a sync iteration, then `warmup` warm-up iterations, then the
/// timed ones (up to the next block's start).
#[derive(Debug, Clone, Copy)]
struct Block {
    start: u32,
    test: CanaryTest,
    index: u32,
    warmup: u32,
}

/// GPCNeT's canary ("network test") ranks: RR Two-sided Lat, RR Two-sided BW+Sync and Multiple
/// Allreduce, one after the other over the whole canary node set (run_network_tests).
pub struct Canaries {
    p: CanaryParams,
    slices: Slices,
    blocks: Vec<Block>,
    total: u32,
    rings: Rings,
}

impl Canaries {
    fn new(p: CanaryParams, slices: Slices, shape: &JobShape) -> Result<Canaries, String> {
        at_least_two_nodes("gpcnet-canaries", slices)?;
        let mut blocks = Vec::new();
        let mut start = 0u64;
        let tests = [
            (CanaryTest::Latency, p.latency_rings, p.latency_warmup, p.latency_iterations),
            (CanaryTest::Bandwidth, p.bandwidth_rings, p.bandwidth_warmup, p.bandwidth_iterations),
            (CanaryTest::Allreduce, p.allreduce_tests, p.allreduce_warmup, p.allreduce_iterations),
        ];
        for (test, count, warmup, timed) in tests {
            for index in 0..count {
                blocks.push(Block { start: start as u32, test, index, warmup });
                start += 1 + warmup as u64 + timed as u64;
            }
        }
        if start > u32::MAX as u64 {
            return Err("workload \"gpcnet-canaries\": more than 2^32 - 1 iterations in all".into());
        }
        // Every ring is kept: the bandwidth test comes back to the latency test's rings.
        let rings = Rings::new(slices, shape.named_rng.clone(), None);
        Ok(Canaries { p, slices, blocks, total: start as u32, rings })
    }

    /// What iteration `iter` of the sequence is.
    pub fn step(&self, iter: u32) -> CanaryStep {
        let b = self.blocks[self.blocks.partition_point(|b| b.start <= iter) - 1];
        let offset = iter - b.start;
        if offset == 0 {
            CanaryStep::Sync(b.test, b.index)
        } else if offset <= b.warmup {
            CanaryStep::Warmup(b.test, b.index)
        } else {
            CanaryStep::Timed(b.test, b.index)
        }
    }
}

impl Program for Canaries {
    fn iterations(&self) -> u32 {
        self.total
    }
    fn recorded(&self, iter: u32) -> bool {
        matches!(self.step(iter), CanaryStep::Timed(..))
    }
    fn iteration(&mut self, rank: u32, iter: u32, out: &mut Vec<Op>) {
        let world = Group::world(self.slices.nodes * self.slices.per_node);
        let p = &self.p;
        match self.step(iter) {
            CanaryStep::Sync(CanaryTest::Allreduce, _) => {
                out.push(Op::Collective { kind: CollectiveKind::Allreduce, bytes: 8, group: world });
            }
            CanaryStep::Sync(_, _) => {
                out.push(Op::Collective { kind: CollectiveKind::Barrier, bytes: 0, group: world })
            }
            CanaryStep::Warmup(test, ring) | CanaryStep::Timed(test, ring) => match test {
                CanaryTest::Latency => {
                    let (left, right) = self.rings.neighbours(ring, rank);
                    ring_exchange(out, left, right, p.latency_bytes, 1);
                }
                CanaryTest::Bandwidth => {
                    let (left, right) = self.rings.neighbours(ring, rank);
                    ring_exchange(out, left, right, p.bandwidth_bytes, p.bandwidth_outstanding);
                    out.push(Op::Collective { kind: CollectiveKind::Barrier, bytes: 0, group: self.slices.group() });
                }
                CanaryTest::Allreduce => {
                    out.push(Op::Collective {
                        kind: CollectiveKind::Allreduce,
                        bytes: p.allreduce_bytes,
                        group: self.slices.group(),
                    });
                }
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::traffic::stream_rng;

    fn shape(nodes: u32, per_node: u32) -> JobShape {
        JobShape {
            size: nodes * per_node,
            ranks_per_node: per_node,
            rng: stream_rng(1, 50, 0),
            named_rng: stream_rng(1, 51, 7),
        }
    }

    fn ops(p: &mut dyn Program, rank: u32, iter: u32) -> Vec<Op> {
        let mut out = Vec::new();
        p.iteration(rank, iter, &mut out);
        out
    }

    fn sent(ops: &[Op]) -> Vec<(u32, u64)> {
        ops.iter()
            .filter_map(|o| match *o {
                Op::Isend { peer, bytes, .. } | Op::Put { peer, bytes } | Op::Get { peer, bytes } => {
                    Some((peer, bytes))
                }
                _ => None,
            })
            .collect()
    }

    #[test]
    fn slices_hold_one_rank_per_node() {
        let s = Slices::of(&shape(5, 3));
        assert_eq!((s.per_node, s.nodes), (3, 5));
        // Rank 7 is local rank 1 of node 2; its slice is ranks 1, 4, 7, 10, 13.
        assert_eq!((s.slice(7), s.position(7)), (1, 2));
        let g = s.group();
        assert_eq!((0..5).map(|p| g.member(7, p)).collect::<Vec<_>>(), vec![1, 4, 7, 10, 13]);
        assert_eq!((0..5).map(|p| s.member(1, p)).collect::<Vec<_>>(), vec![1, 4, 7, 10, 13]);
    }

    #[test]
    fn a_restarted_job_gets_its_dropped_rings_again() {
        // A window of 64 rings: a restart asks for ring 0 after ring 99 (it underflowed).
        let s = Slices::of(&shape(6, 1));
        let mut rings = Rings::new(s, stream_rng(3, 51, 0), Some(64));
        let first: Vec<(u32, u32)> = (0..100).map(|r| rings.neighbours(r, 0)).collect();
        let again: Vec<(u32, u32)> = (0..100).map(|r| rings.neighbours(r, 0)).collect();
        assert_eq!(first, again);
    }

    #[test]
    fn every_slice_rings_its_own_nodes() {
        // 6 nodes x 4 ranks: each slice's ring visits its 6 members once, never another slice's.
        let s = Slices::of(&shape(6, 4));
        let mut rings = Rings::new(s, stream_rng(3, 51, 0), None);
        for ring in 0..3 {
            for slice in 0..4 {
                let members: Vec<u32> = (0..6).map(|p| s.member(slice, p)).collect();
                let mut at = members[0];
                let mut seen = vec![];
                for _ in 0..6 {
                    let (left, right) = rings.neighbours(ring, at);
                    assert!(members.contains(&left) && members.contains(&right));
                    assert_eq!(rings.neighbours(ring, right).0, at, "right's left is me");
                    seen.push(at);
                    at = right;
                }
                assert_eq!(at, members[0]);
                seen.sort_unstable();
                assert_eq!(seen, members);
            }
        }
    }

    #[test]
    fn latency_and_bandwidth_iterations_move_what_gpcnet_moves() {
        // RR Two-sided Lat: 8 B to each ring neighbour (16 B per rank); BW+Sync: 8 x 128 KiB
        // each way (2 MiB per rank), then a barrier of the slice.
        let sh = shape(7, 2);
        let lat = RandomRingParams { bytes: 8, iterations: 10, outstanding: 1, iterations_per_ring: 200 };
        let mut g = RandomRing::new("gpcnet-rr-latency", lat, false, Slices::of(&sh), &sh).unwrap();
        let o = ops(&mut g, 3, 0);
        assert_eq!(sent(&o).iter().map(|s| s.1).sum::<u64>(), 16);
        let bw = RandomRingParams { bytes: 131072, iterations: 8, outstanding: 8, iterations_per_ring: 8 };
        let mut g = RandomRing::new("gpcnet-rr-bandwidth", bw, true, Slices::of(&sh), &sh).unwrap();
        let o = ops(&mut g, 3, 0);
        assert_eq!(sent(&o).iter().map(|s| s.1).sum::<u64>(), 2 * 8 * 131072);
        assert_eq!(
            *o.last().unwrap(),
            Op::Collective { kind: CollectiveKind::Barrier, bytes: 0, group: Group { stride: 2, size: 7 } }
        );
        // Peers are in the rank's own slice (odd ranks here).
        assert!(sent(&o).iter().all(|(peer, _)| peer % 2 == 1));
    }

    #[test]
    fn a_ring_needs_two_nodes() {
        let sh = shape(1, 4);
        let lat = RandomRingParams { bytes: 8, iterations: 10, outstanding: 1, iterations_per_ring: 200 };
        let err = RandomRing::new("gpcnet-rr-latency", lat, false, Slices::of(&sh), &sh).err().unwrap();
        assert!(err.contains("at least 2 nodes"), "{err}");
    }

    #[test]
    fn alltoall_congestor_meets_every_other_member_once() {
        for n in [2u32, 5, 8, 13] {
            for me in 0..n {
                let mut to: Vec<u32> = (1..n).map(|i| alltoall_partners(n, me, i).0).collect();
                let mut from: Vec<u32> = (1..n).map(|i| alltoall_partners(n, me, i).1).collect();
                to.sort_unstable();
                from.sort_unstable();
                let others: Vec<u32> = (0..n).filter(|&x| x != me).collect();
                assert_eq!((to, from), (others.clone(), others), "n={n} me={me}");
                // Round i pairs me with someone whose round-i partner is me.
                for i in 1..n {
                    let (t, _) = alltoall_partners(n, me, i);
                    assert_eq!(alltoall_partners(n, t, i).1, me);
                }
            }
        }
        // 4 KiB to each of the other 12 members of the slice: 48 KiB per rank per iteration.
        let sh = shape(13, 3);
        let mut g =
            PairwiseAlltoall { p: LoopParams { bytes: 4096, iterations: 1, compute_us: 0.0 }, slices: Slices::of(&sh) };
        let o = ops(&mut g, 4, 0);
        assert_eq!(sent(&o).len(), 12);
        assert_eq!(sent(&o).iter().map(|s| s.1).sum::<u64>(), 12 * 4096);
        assert!(sent(&o).iter().all(|(peer, _)| peer % 3 == 1));
    }

    #[test]
    fn rooted_congestors_have_one_root_per_slice_on_the_first_node() {
        let sh = shape(4, 3);
        let s = Slices::of(&sh);
        let p = || Rooted { bytes: 4096, iterations: 1, messages: 1 };
        let mut incast = RootedPattern { p: p(), style: Rooting::TwoSidedIncast, slices: s };
        // Ranks 0, 1, 2 (node 0) are roots of slices 0, 1, 2; each receives from 3 nodes.
        for root in 0..3 {
            let o = ops(&mut incast, root, 0);
            let from: Vec<u32> =
                o.iter().filter_map(|x| if let Op::Irecv { peer, .. } = x { Some(*peer) } else { None }).collect();
            assert_eq!(from, vec![root + 3, root + 6, root + 9]);
        }
        assert_eq!(sent(&ops(&mut incast, 10, 0)), vec![(1, 4096)]);
        let mut get = RootedPattern { p: p(), style: Rooting::GetBcast, slices: s };
        assert_eq!(ops(&mut get, 2, 0), vec![]);
        assert_eq!(sent(&ops(&mut get, 5, 0)), vec![(2, 4096)]);
        let mut put = RootedPattern { p: p(), style: Rooting::PutIncast, slices: s };
        assert_eq!(sent(&ops(&mut put, 11, 0)), vec![(2, 4096)]);
    }

    fn canary_params() -> CanaryParams {
        CanaryParams {
            latency_bytes: 8,
            latency_rings: 2,
            latency_iterations: 5,
            latency_warmup: 3,
            bandwidth_bytes: 131072,
            bandwidth_outstanding: 8,
            bandwidth_rings: 1,
            bandwidth_iterations: 8,
            bandwidth_warmup: 1,
            allreduce_bytes: 8,
            allreduce_tests: 2,
            allreduce_iterations: 4,
            allreduce_warmup: 1,
        }
    }

    #[test]
    fn the_canary_sequence_is_gpcnet_s_three_tests_in_order() {
        use CanaryStep::*;
        use CanaryTest::*;
        let sh = shape(5, 2);
        let mut c = Canaries::new(canary_params(), Slices::of(&sh), &sh).unwrap();
        // 2 latency rings of 1 + 3 + 5, a bandwidth ring of 1 + 1 + 8, 2 allreduce tests of 1 + 1 + 4.
        assert_eq!(c.iterations(), 2 * 9 + 10 + 2 * 6);
        let steps: Vec<CanaryStep> = (0..c.iterations()).map(|i| c.step(i)).collect();
        assert_eq!(steps[0], Sync(Latency, 0));
        assert_eq!(steps[1..4], [Warmup(Latency, 0); 3]);
        assert_eq!(steps[4..9], [Timed(Latency, 0); 5]);
        assert_eq!(steps[9], Sync(Latency, 1));
        assert_eq!(steps[18], Sync(Bandwidth, 0));
        assert_eq!(steps[19], Warmup(Bandwidth, 0));
        assert_eq!(steps[20..28], [Timed(Bandwidth, 0); 8]);
        assert_eq!(steps[28], Sync(Allreduce, 0));
        assert_eq!(steps[34], Sync(Allreduce, 1));
        assert_eq!(steps[39], Timed(Allreduce, 1));
        // Syncs are over all canary ranks, the tests over the rank's slice.
        let world = Group::world(10);
        assert_eq!(ops(&mut c, 3, 0), vec![Op::Collective { kind: CollectiveKind::Barrier, bytes: 0, group: world }]);
        assert_eq!(
            ops(&mut c, 3, 28),
            vec![Op::Collective { kind: CollectiveKind::Allreduce, bytes: 8, group: world }]
        );
        assert_eq!(
            ops(&mut c, 3, 30),
            vec![Op::Collective { kind: CollectiveKind::Allreduce, bytes: 8, group: Group { stride: 2, size: 5 } }]
        );
        assert_eq!(sent(&ops(&mut c, 3, 5)).iter().map(|s| s.1).sum::<u64>(), 16);
        assert_eq!(sent(&ops(&mut c, 3, 22)).iter().map(|s| s.1).sum::<u64>(), 2 * 8 * 131072);
    }

    #[test]
    fn latency_and_bandwidth_tests_use_the_same_rings() {
        // GPCNeT reseeds its ring shuffle at each test's first ring: ring r is the same ring.
        let sh = shape(8, 1);
        let mut c = Canaries::new(canary_params(), Slices::of(&sh), &sh).unwrap();
        for rank in 0..8 {
            let lat: Vec<u32> = sent(&ops(&mut c, rank, 4)).iter().map(|s| s.0).collect();
            let bw: Vec<u32> = sent(&ops(&mut c, rank, 20)).iter().map(|s| s.0).take(2).collect();
            assert_eq!(lat, bw);
        }
    }
}
