//! Helpers shared by the skeletons: message tags, compute and collective ops, parameter checks,
//! the row-major process grid and its halo exchange, the NAS problem classes and parameters.

use crate::mpi::program::{CollectiveKind, Group, Op};
use crate::units::us_to_ps;
use serde::Deserialize;

/// Tag of message `local` (< 32) of exchange phase `phase` of iteration `iter`. Both sides of a
/// message agree on the phase; adjacent phases and iterations never share a tag.
pub(super) fn tag(iter: u32, phase: u32, local: u32) -> u32 {
    debug_assert!(local < 32);
    ((iter & 1) << 30) | ((phase & ((1 << 25) - 1)) << 5) | local
}

pub(super) fn compute(out: &mut Vec<Op>, us: f64) {
    if us > 0.0 {
        out.push(Op::Compute { ps: us_to_ps(us) });
    }
}

pub(super) fn collective(out: &mut Vec<Op>, kind: CollectiveKind, bytes: u64, group: Group) {
    out.push(Op::Collective { kind, bytes, group });
}

pub(super) fn check_compute(kind: &str, us: f64) -> Result<(), String> {
    if us.is_finite() && us >= 0.0 {
        Ok(())
    } else {
        Err(format!("workload {kind:?}: compute_us must be a finite number >= 0"))
    }
}

pub(super) fn check_positive(kind: &str, name: &str, v: u32) -> Result<(), String> {
    if v >= 1 {
        Ok(())
    } else {
        Err(format!("workload {kind:?}: {name} must be at least 1"))
    }
}

pub(super) fn div_ceil(a: u64, b: u64) -> u64 {
    a.div_ceil(b.max(1))
}

/// A row-major process grid (the last dimension varies fastest).
#[derive(Debug, Clone)]
pub(super) struct Grid {
    pub(super) dims: Vec<u32>,
    pub(super) strides: Vec<u32>,
}

impl Grid {
    pub(super) fn new(dims: Vec<u32>) -> Grid {
        let mut strides = vec![1; dims.len()];
        for i in (0..dims.len().saturating_sub(1)).rev() {
            strides[i] = strides[i + 1] * dims[i + 1];
        }
        Grid { dims, strides }
    }

    pub(super) fn coord(&self, rank: u32, d: usize) -> u32 {
        (rank / self.strides[d]) % self.dims[d]
    }

    /// The rank `delta` steps along dimension `d`; None past the edge of a non-periodic grid.
    pub(super) fn shift(&self, rank: u32, d: usize, delta: i64, periodic: bool) -> Option<u32> {
        let n = self.dims[d] as i64;
        let c = self.coord(rank, d) as i64;
        let to = c + delta;
        let to = if periodic {
            to.rem_euclid(n)
        } else if (0..n).contains(&to) {
            to
        } else {
            return None;
        };
        Some((rank as i64 + (to - c) * self.strides[d] as i64) as u32)
    }

    /// The sub-communicator of the ranks that differ from the caller only along dimension `d`.
    pub(super) fn group(&self, d: usize) -> Group {
        Group { stride: self.strides[d], size: self.dims[d] }
    }
}

/// One exchange along dimension `d` of a grid: a message of `bytes` to each neighbour (both
/// directions), receives from both; no WaitAll. Dimensions of one rank are local copies (no
/// message); on a periodic dimension of 2 both messages go to the same rank (distinct tags).
/// Uses local tags `2 * slot` and `2 * slot + 1`.
#[allow(clippy::too_many_arguments)]
pub(super) fn post_axis(
    out: &mut Vec<Op>,
    grid: &Grid,
    rank: u32,
    d: usize,
    periodic: bool,
    bytes: (u64, u64),
    iter: u32,
    phase: u32,
    slot: u32,
) {
    if grid.dims[d] <= 1 {
        return;
    }
    let up = grid.shift(rank, d, 1, periodic);
    let down = grid.shift(rank, d, -1, periodic);
    // Tag 2*slot travels upwards (+d), tag 2*slot+1 downwards.
    if let Some(down) = down {
        out.push(Op::irecv(down, tag(iter, phase, 2 * slot)));
    }
    if let Some(up) = up {
        out.push(Op::irecv(up, tag(iter, phase, 2 * slot + 1)));
    }
    if let Some(up) = up {
        out.push(Op::isend(up, bytes.0, tag(iter, phase, 2 * slot)));
    }
    if let Some(down) = down {
        out.push(Op::isend(down, bytes.1, tag(iter, phase, 2 * slot + 1)));
    }
}

pub(super) fn wait_if_any(out: &mut Vec<Op>, before: usize) {
    if out.len() > before {
        out.push(Op::WaitAll);
    }
}

/// NAS Parallel Benchmarks problem classes (NPB 3.4 sizes).
#[derive(Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum NasClass {
    S,
    W,
    A,
    B,
    C,
    D,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct NasParams {
    pub(super) class: NasClass,
    pub(super) iterations: u32,
    pub(super) compute_us: f64,
}
