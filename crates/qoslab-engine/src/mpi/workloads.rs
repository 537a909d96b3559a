//! Workload generators: each job's rank programs, produced one iteration at a time.
//!
//! The micro-benchmarks of Savoie et al., a timed collective loop, ping-pong, and replayed traces
//! live here; GPCNeT's canaries and congestors in `gpcnet.rs`, application skeletons in
//! `skeletons/`.
//! Python validates the parameters and resolves their defaults; the engine re-checks them with
//! `deny_unknown_fields` so it is safe to drive directly.

use super::program::{sendrecv, CollectiveKind, Group, Op};
use crate::units::us_to_ps;
use rand::seq::SliceRandom;
use rand_pcg::Pcg64Mcg;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use std::collections::HashMap;

/// A job's rank programs.
pub trait Program: Send {
    /// Iterations per job run.
    fn iterations(&self) -> u32;
    /// Appends rank `rank`'s ops for iteration `iter` to an empty `out`; the iteration ends when
    /// the rank has run them all.
    fn iteration(&mut self, rank: u32, iter: u32, out: &mut Vec<Op>);
    /// Whether iteration `iter` is recorded (iterations.parquet, the summary's iteration
    /// figures). A benchmark's untimed iterations (GPCNeT's warm-ups) are not: at thousands of
    /// ranks their rows would outweigh the timed ones.
    fn recorded(&self, _iter: u32) -> bool {
        true
    }
}

/// Everything a generator may depend on besides its parameters.
pub struct JobShape {
    pub size: u32,
    /// Ranks per host: ranks 0..k-1 on the job's first host, and so on.
    pub ranks_per_node: u32,
    /// A random stream of the job's own (seeded from the scenario seed and job index).
    pub rng: Pcg64Mcg,
    /// A random stream keyed by the scenario seed and the job's *name*: the same whether the job
    /// runs alone (where it is job 0) or beside others (GPCNeT's rings, isolated and congested).
    pub named_rng: Pcg64Mcg,
}

pub fn params<T: DeserializeOwned>(kind: &str, v: &serde_json::Value) -> Result<T, String> {
    serde_json::from_value(v.clone()).map_err(|e| format!("workload {kind:?}: {e}"))
}

fn compute(out: &mut Vec<Op>, us: f64) {
    if us > 0.0 {
        out.push(Op::Compute { ps: us_to_ps(us) });
    }
}

/// Builds the generator for a workload kind, or None if the kind is not one of this module's.
pub fn build(kind: &str, p: &serde_json::Value, shape: JobShape) -> Option<Result<Box<dyn Program>, String>> {
    fn boxed<T: Program + 'static>(r: Result<T, String>) -> Result<Box<dyn Program>, String> {
        r.map(|g| Box::new(g) as Box<dyn Program>)
    }
    Some(match kind {
        "ping-pong" => boxed(params::<PingPong>(kind, p).and_then(|g| g.check(&shape))),
        "flood-pairs" => boxed(params::<FloodPairsParams>(kind, p).map(|p| FloodPairs { p, size: shape.size })),
        "nearest-neighbor" => {
            boxed(params::<NearestNeighborParams>(kind, p).and_then(|g| NearestNeighbor::new(g, shape.size)))
        }
        "all-to-all" => boxed(params::<Collective>(kind, p).map(|c| c.with(CollectiveKind::Alltoall, shape.size))),
        "random-pairs" => boxed(params::<RandomPairsParams>(kind, p).map(|g| RandomPairs::new(g, shape))),
        "collective-loop" => boxed(params::<CollectiveLoopParams>(kind, p).and_then(|g| g.build(shape.size))),
        _ => return super::gpcnet::build(kind, p, &shape),
    })
}

/// Ranks 0 and 1 bounce a message; the others only mark iterations.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PingPong {
    bytes: u64,
    iterations: u32,
}

impl PingPong {
    fn check(self, shape: &JobShape) -> Result<PingPong, String> {
        if shape.size < 2 {
            return Err("workload \"ping-pong\" needs at least 2 ranks".into());
        }
        Ok(self)
    }
}

impl Program for PingPong {
    fn iterations(&self) -> u32 {
        self.iterations
    }
    fn iteration(&mut self, rank: u32, _iter: u32, out: &mut Vec<Op>) {
        let send = Op::isend(1 - rank.min(1), self.bytes, 0);
        let recv = Op::irecv(1 - rank.min(1), 0);
        match rank {
            0 => out.extend([send, Op::WaitAll, recv, Op::WaitAll]),
            1 => out.extend([recv, Op::WaitAll, send, Op::WaitAll]),
            _ => {}
        }
    }
}

/// Savoie et al.'s Flood-Pairs: rank r and r + p/2 stream `messages` messages at each other per
/// iteration, all in flight at once (a bandwidth-bound neighbour). With an odd job the last rank
/// has no partner and idles.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FloodPairsParams {
    bytes: u64,
    messages: u32,
    iterations: u32,
}

pub struct FloodPairs {
    p: FloodPairsParams,
    size: u32,
}

impl Program for FloodPairs {
    fn iterations(&self) -> u32 {
        self.p.iterations
    }
    fn iteration(&mut self, rank: u32, _iter: u32, out: &mut Vec<Op>) {
        let half = self.size / 2;
        if rank >= 2 * half {
            return;
        }
        let partner = if rank < half { rank + half } else { rank - half };
        out.extend((0..self.p.messages).map(|_| Op::irecv(partner, 0)));
        out.extend((0..self.p.messages).map(|_| Op::isend(partner, self.p.bytes, 0)));
        out.push(Op::WaitAll);
    }
}

/// MPI_Dims_create: a balanced factorisation of `p` into `d` factors, largest first.
pub fn dims_create(p: u32, d: usize) -> Vec<u32> {
    let mut dims = vec![1u32; d];
    let mut n = p;
    let mut factors = Vec::new();
    let mut f = 2;
    while f * f <= n {
        while n.is_multiple_of(f) {
            factors.push(f);
            n /= f;
        }
        f += 1;
    }
    if n > 1 {
        factors.push(n);
    }
    // Largest prime factors first, each onto the currently smallest dimension.
    for f in factors.into_iter().rev() {
        let i = (0..d).min_by_key(|&i| dims[i]).unwrap();
        dims[i] *= f;
    }
    dims.sort_unstable_by(|a, b| b.cmp(a));
    dims
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NearestNeighborParams {
    dims: u32,
    bytes: u64,
    iterations: u32,
    compute_us: f64,
}

/// Halo exchange on a periodic d-dimensional process grid (MPI_Dims_create shape): every
/// iteration computes, then swaps `bytes` with both neighbours in every dimension.
pub struct NearestNeighbor {
    p: NearestNeighborParams,
    grid: Vec<u32>,
}

impl NearestNeighbor {
    fn new(p: NearestNeighborParams, size: u32) -> Result<NearestNeighbor, String> {
        if !(1..=4).contains(&p.dims) {
            return Err("workload \"nearest-neighbor\": dims must be 1, 2, 3 or 4".into());
        }
        let grid = dims_create(size, p.dims as usize);
        Ok(NearestNeighbor { p, grid })
    }
}

/// Neighbours of `rank` on a periodic row-major grid, both directions of every dimension with
/// more than one rank (a dimension of 2 has the same rank both ways: it gets both messages).
pub fn grid_neighbors(grid: &[u32], rank: u32) -> Vec<(u32, u32)> {
    let mut out = Vec::new();
    let mut stride = 1;
    for &n in grid.iter().rev() {
        let coord = (rank / stride) % n;
        if n > 1 {
            let up = rank - coord * stride + ((coord + 1) % n) * stride;
            let down = rank - coord * stride + ((coord + n - 1) % n) * stride;
            out.push((up, down));
        }
        stride *= n;
    }
    out
}

/// Posts every receive, then every send, then waits: one halo exchange.
pub fn halo(out: &mut Vec<Op>, neighbors: &[(u32, u32)], bytes: u64, tag: u32) {
    for (d, &(up, down)) in neighbors.iter().enumerate() {
        out.push(Op::irecv(down, tag + 2 * d as u32));
        out.push(Op::irecv(up, tag + 2 * d as u32 + 1));
    }
    for (d, &(up, down)) in neighbors.iter().enumerate() {
        out.push(Op::isend(up, bytes, tag + 2 * d as u32));
        out.push(Op::isend(down, bytes, tag + 2 * d as u32 + 1));
    }
    out.push(Op::WaitAll);
}

impl Program for NearestNeighbor {
    fn iterations(&self) -> u32 {
        self.p.iterations
    }
    fn iteration(&mut self, rank: u32, _iter: u32, out: &mut Vec<Op>) {
        compute(out, self.p.compute_us);
        halo(out, &grid_neighbors(&self.grid, rank), self.p.bytes, 0);
    }
}

/// Parameters of a workload that is one collective per iteration.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Collective {
    bytes: u64,
    iterations: u32,
    #[serde(default)]
    compute_us: f64,
}

impl Collective {
    fn with(self, kind: CollectiveKind, size: u32) -> CollectiveLoop {
        CollectiveLoop {
            kind,
            bytes: self.bytes,
            iterations: self.iterations,
            compute_us: self.compute_us,
            barrier: false,
            size,
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CollectiveLoopParams {
    collective: String,
    bytes: u64,
    iterations: u32,
    compute_us: f64,
    #[serde(default)]
    barrier: bool,
}

impl CollectiveLoopParams {
    fn build(self, size: u32) -> Result<CollectiveLoop, String> {
        let kind = match self.collective.as_str() {
            "barrier" => CollectiveKind::Barrier,
            "bcast" => CollectiveKind::Bcast,
            "reduce" => CollectiveKind::Reduce,
            "allreduce" => CollectiveKind::Allreduce,
            "alltoall" => CollectiveKind::Alltoall,
            "allgather" => CollectiveKind::Allgather,
            other => return Err(format!("workload \"collective-loop\": unknown collective {other:?}")),
        };
        Ok(CollectiveLoop {
            kind,
            bytes: self.bytes,
            iterations: self.iterations,
            compute_us: self.compute_us,
            barrier: self.barrier,
            size,
        })
    }
}

/// One collective over the whole job per iteration (after optional compute), each timed: the
/// all-to-all micro-benchmark, GPCNeT's allreduce canary and alltoall congestor, and the
/// tail-latency study's 1000-iteration collective loop. With `barrier`, an untimed barrier comes
/// first in each iteration, as the OSU collective benchmarks separate their iterations: without
/// one, a rooted collective (bcast, reduce) pipelines, the root racing iterations ahead, and an
/// iteration's time is no longer the collective's latency.
pub struct CollectiveLoop {
    kind: CollectiveKind,
    bytes: u64,
    iterations: u32,
    compute_us: f64,
    barrier: bool,
    size: u32,
}

impl Program for CollectiveLoop {
    fn iterations(&self) -> u32 {
        self.iterations
    }
    fn iteration(&mut self, _rank: u32, _iter: u32, out: &mut Vec<Op>) {
        compute(out, self.compute_us);
        if self.barrier {
            out.push(Op::Collective { kind: CollectiveKind::Barrier, bytes: 0, group: Group::world(self.size) });
            out.push(Op::StartTimer);
        }
        out.push(Op::Collective { kind: self.kind, bytes: self.bytes, group: Group::world(self.size) });
    }
}

/// A random perfect matching of the job's ranks, redrawn every iteration from the job's stream
/// (the same on every rank, computed once per iteration and shared).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RandomPairsParams {
    bytes: u64,
    iterations: u32,
    compute_us: f64,
}

pub struct RandomPairs {
    p: RandomPairsParams,
    pairings: SharedDraws,
}

impl RandomPairs {
    fn new(p: RandomPairsParams, shape: JobShape) -> RandomPairs {
        RandomPairs { p, pairings: SharedDraws::new(shape) }
    }
}

impl Program for RandomPairs {
    fn iterations(&self) -> u32 {
        self.p.iterations
    }
    fn iteration(&mut self, rank: u32, iter: u32, out: &mut Vec<Op>) {
        compute(out, self.p.compute_us);
        let order = self.pairings.permutation(iter);
        let pos = order.iter().position(|&r| r == rank).unwrap() as u32;
        let partner = pos ^ 1;
        // With an odd job the last rank of the shuffled order sits this iteration out.
        if (partner as usize) < order.len() {
            sendrecv(out, order[partner as usize], order[partner as usize], self.p.bytes, 0);
        }
    }
}

/// Per-iteration random permutations of a job's ranks, drawn once per iteration in iteration
/// order (so the draws do not depend on which rank asks first) and dropped once far behind. A
/// restarted job asks for its iterations again from 0: they are drawn again from the start, so
/// every run of the job pairs its ranks alike, however many iterations it has.
pub struct SharedDraws {
    size: u32,
    start: Pcg64Mcg,
    rng: Pcg64Mcg,
    drawn: u32,
    cache: HashMap<u32, Vec<u32>>,
}

impl SharedDraws {
    pub fn new(shape: JobShape) -> SharedDraws {
        SharedDraws { size: shape.size, start: shape.rng.clone(), rng: shape.rng, drawn: 0, cache: HashMap::new() }
    }

    pub fn permutation(&mut self, iter: u32) -> &[u32] {
        if iter < self.drawn && !self.cache.contains_key(&iter) {
            // Dropped: a new run of the job. Its draws are the first run's, made again.
            (self.rng, self.drawn) = (self.start.clone(), 0);
            self.cache.clear();
        }
        while self.drawn <= iter {
            let mut order: Vec<u32> = (0..self.size).collect();
            order.shuffle(&mut self.rng);
            self.cache.insert(self.drawn, order);
            self.drawn += 1;
            // Ranks drift apart by at most a few iterations; keep a generous window.
            if self.drawn > 64 {
                self.cache.remove(&(self.drawn - 65));
            }
        }
        self.cache.get(&iter).map(|v| v.as_slice()).expect("iteration within the kept window")
    }
}

/// A replayed trace: every rank's ops as recorded, split into iterations at IterationEnd
/// markers (a trace without markers is one iteration).
pub struct Trace {
    ops: Vec<Vec<Op>>,
    /// Per rank, where each iteration starts in `ops`, plus the end.
    bounds: Vec<Vec<usize>>,
    iterations: u32,
}

impl Trace {
    pub fn new(ops: Vec<Vec<Op>>) -> Result<Trace, String> {
        let mut bounds = Vec::with_capacity(ops.len());
        for rank_ops in &ops {
            let mut b = vec![0];
            for (i, op) in rank_ops.iter().enumerate() {
                if *op == Op::IterationEnd {
                    b.push(i + 1);
                }
            }
            // Ops after the last marker are one more iteration; so is an empty program (a rank
            // whose calls all carry no traffic), which would otherwise have none.
            if *b.last().unwrap() != rank_ops.len() || b.len() == 1 {
                b.push(rank_ops.len());
            }
            bounds.push(b);
        }
        let iterations = bounds.first().map_or(0, |b| b.len() as u32 - 1);
        if let Some(r) = bounds.iter().position(|b| b.len() as u32 - 1 != iterations) {
            return Err(format!(
                "rank {r} has {} iterations but rank 0 has {iterations}: every rank needs the same iteration markers",
                bounds[r].len() - 1
            ));
        }
        Ok(Trace { ops, bounds, iterations: iterations.max(1) })
    }
}

impl Program for Trace {
    fn iterations(&self) -> u32 {
        self.iterations
    }
    fn iteration(&mut self, rank: u32, iter: u32, out: &mut Vec<Op>) {
        let b = &self.bounds[rank as usize];
        if let (Some(&start), Some(&end)) = (b.get(iter as usize), b.get(iter as usize + 1)) {
            out.extend(self.ops[rank as usize][start..end].iter().filter(|op| **op != Op::IterationEnd));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dims_create_is_balanced_like_mpi() {
        assert_eq!(dims_create(256, 2), vec![16, 16]);
        assert_eq!(dims_create(256, 3), vec![8, 8, 4]);
        assert_eq!(dims_create(12, 2), vec![4, 3]);
        assert_eq!(dims_create(7, 3), vec![7, 1, 1]);
        assert_eq!(dims_create(1024, 4), vec![8, 8, 4, 4]);
    }

    #[test]
    fn grid_neighbors_wrap_around() {
        // 4 x 4 grid, rank 5 = (1, 1): right 6, left 4, down 9, up 1.
        let n = grid_neighbors(&[4, 4], 5);
        assert_eq!(n, vec![(6, 4), (9, 1)]);
        let n = grid_neighbors(&[4, 4], 0);
        assert_eq!(n, vec![(1, 3), (4, 12)]);
    }

    #[test]
    fn a_trace_rank_without_ops_has_one_empty_iteration() {
        let mut t = Trace::new(vec![vec![], vec![Op::Compute { ps: 5 }]]).unwrap();
        assert_eq!(t.iterations(), 1);
        let mut out = Vec::new();
        t.iteration(0, 0, &mut out);
        assert!(out.is_empty());
        t.iteration(1, 0, &mut out);
        assert_eq!(out, vec![Op::Compute { ps: 5 }]);
    }

    #[test]
    fn random_pairs_is_a_matching_on_every_rank() {
        use crate::traffic::stream_rng;
        let shape = JobShape { size: 9, ranks_per_node: 1, rng: stream_rng(1, 50, 0), named_rng: stream_rng(1, 51, 0) };
        let mut g = RandomPairs::new(RandomPairsParams { bytes: 8, iterations: 3, compute_us: 0.0 }, shape);
        for iter in 0..3 {
            let mut partner = [None; 9];
            for r in 0..9 {
                let mut out = Vec::new();
                g.iteration(r, iter, &mut out);
                if let Some(Op::Isend { peer, .. }) = out.iter().find(|o| matches!(o, Op::Isend { .. })) {
                    partner[r as usize] = Some(*peer);
                }
            }
            assert_eq!(partner.iter().filter(|p| p.is_none()).count(), 1);
            for (r, p) in partner.iter().enumerate() {
                if let Some(p) = p {
                    assert_eq!(partner[*p as usize], Some(r as u32));
                }
            }
        }
    }

    #[test]
    fn a_restarted_job_draws_its_iterations_again_beyond_the_kept_window() {
        // 100 iterations, more than the 64 kept: a restart asks for iteration 0 again (it panicked).
        use crate::traffic::stream_rng;
        let shape = JobShape { size: 6, ranks_per_node: 1, rng: stream_rng(1, 50, 0), named_rng: stream_rng(1, 51, 0) };
        let mut draws = SharedDraws::new(shape);
        let first: Vec<Vec<u32>> = (0..100).map(|i| draws.permutation(i).to_vec()).collect();
        let again: Vec<Vec<u32>> = (0..100).map(|i| draws.permutation(i).to_vec()).collect();
        assert_eq!(first, again);
        assert_ne!(first[0], first[1], "each iteration draws its own pairing");
    }
}
