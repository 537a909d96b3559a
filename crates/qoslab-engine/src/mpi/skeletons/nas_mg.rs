//! NAS MG: V-cycle multigrid, 3-D ghost exchanges axis by axis at every level.

use super::common::{check_compute, collective, compute, div_ceil, post_axis, wait_if_any, Grid, NasClass, NasParams};
use crate::mpi::program::{CollectiveKind, Group, Op};
use crate::mpi::workloads::{dims_create, Program};

/// NAS MG (NPB 3.4, mg.f): V-cycle multigrid on a periodic N^3 grid over a `dims_create(P, 3)`
/// process grid. Every smoothing/restriction/residual step ends with `comm3`: ghost exchange
/// axis by axis (x, then y, then z, waiting in between), both neighbours per axis; the faces
/// include the ghost layers of the axes already exchanged: x face ly*lz, y face (lx+2)*lz,
/// z face (lx+2)*(ly+2) doubles, with (lx, ly, lz) the local extents at that level (2^k / dims,
/// at least 1). Per iteration, with L = log2 N: restriction down levels L-1..1 (one comm3 each),
/// psinv at level 1, then per level 2..L-1 resid + psinv (two each), resid + psinv at L, and the
/// main loop's resid at L: 3L - 1 comm3 calls, faces shrinking 4x per level down and growing
/// back up; then norm2u3's two allreduces (sum and max, 8 B). Coarse levels smaller than the
/// process grid keep one point per rank (NPB instead idles ranks there).
/// N per class: S 32, W 128, A 256, B 256, C 512, D 1024; NITER: S/W/A 4, B/C 20, D 50.
///
/// Parameters: `class`, `iterations`, `compute_us` per iteration (spread over the comm3 calls in
/// proportion to their level's points).
pub(super) struct NasMg {
    p: NasParams,
    grid: Grid,
    /// The level of each comm3 call of an iteration, in order.
    levels: Vec<u32>,
    /// Compute before each comm3 call.
    work_us: Vec<f64>,
}

fn mg_n(class: NasClass) -> u64 {
    match class {
        NasClass::S => 32,
        NasClass::W => 128,
        NasClass::A | NasClass::B => 256,
        NasClass::C => 512,
        NasClass::D => 1024,
    }
}

fn mg_levels(top: u32) -> Vec<u32> {
    let mut levels: Vec<u32> = (1..top).rev().collect();
    levels.push(1);
    for k in 2..top {
        levels.extend([k, k]);
    }
    levels.extend([top, top, top]);
    levels
}

impl NasMg {
    pub(super) fn new(p: NasParams, size: u32) -> Result<NasMg, String> {
        check_compute("nas-mg", p.compute_us)?;
        let top = mg_n(p.class).trailing_zeros();
        let levels = mg_levels(top);
        let weight = |k: u32| 8f64.powi(k as i32 - top as i32);
        let total: f64 = levels.iter().map(|&k| weight(k)).sum();
        let work_us = levels.iter().map(|&k| p.compute_us * weight(k) / total).collect();
        Ok(NasMg { p, grid: Grid::new(dims_create(size, 3)), levels, work_us })
    }

    /// Local extents (x, y, z) at level k.
    fn extents(&self, k: u32) -> (u64, u64, u64) {
        let n = 1u64 << k;
        let e = |d: usize| div_ceil(n, self.grid.dims[d] as u64).max(1);
        (e(2), e(1), e(0))
    }

    /// Face bytes (x, y, z) of a comm3 at level k.
    fn faces(&self, k: u32) -> [u64; 3] {
        let (lx, ly, lz) = self.extents(k);
        [ly * lz * 8, (lx + 2) * lz * 8, (lx + 2) * (ly + 2) * 8]
    }
}

impl Program for NasMg {
    fn iterations(&self) -> u32 {
        self.p.iterations
    }
    fn iteration(&mut self, rank: u32, iter: u32, out: &mut Vec<Op>) {
        for (call, &k) in self.levels.iter().enumerate() {
            compute(out, self.work_us[call]);
            let faces = self.faces(k);
            // x is the fastest grid dimension (2), z the slowest (0).
            for (axis, d) in [2usize, 1, 0].into_iter().enumerate() {
                let before = out.len();
                let b = faces[axis];
                post_axis(out, &self.grid, rank, d, true, (b, b), iter, call as u32 * 3 + axis as u32, 0);
                wait_if_any(out, before);
            }
        }
        let world = Group::world(self.grid.strides[0] * self.grid.dims[0]);
        collective(out, CollectiveKind::Allreduce, 8, world);
        collective(out, CollectiveKind::Allreduce, 8, world);
    }
}

#[cfg(test)]
mod tests {
    use crate::mpi::program::CollectiveKind::*;
    use crate::mpi::skeletons::tests::{config, totals};

    #[test]
    fn nas_mg_bytes() {
        // Class S (N = 32, L = 5) on 64 ranks (4 x 4 x 4): levels [4,3,2,1, 1, 2,2,3,3,4,4, 5,5,5].
        let (b, m, c) = totals(&config("nas-mg"), 64, 0);
        let levels = [4, 3, 2, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 5];
        let per_rank: u64 = levels
            .iter()
            .map(|&k| {
                let l = ((1u64 << k) / 4).max(1);
                2 * 8 * (l * l + (l + 2) * l + (l + 2) * (l + 2))
            })
            .sum();
        assert_eq!(b, 64 * per_rank);
        assert_eq!(m, 64 * 14 * 6);
        assert_eq!(c, vec![(Allreduce, 8, 64); 2]);
    }
}
