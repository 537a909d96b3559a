//! miniAMR (block-structured AMR): face exchanges with a moving refined layer, checksums, refinement.

use super::common::{check_compute, check_positive, collective, compute, post_axis, wait_if_any, Grid};
use crate::mpi::program::{CollectiveKind, Group, Op};
use crate::mpi::workloads::{dims_create, Program};
use serde::Deserialize;

/// miniAMR (Mantevo proxy app, block-structured AMR): every rank owns blocks_per_dim^3 blocks of
/// block_cells^3 cells on a non-periodic `dims_create(P, 3)` grid. Per time step,
/// `stages_per_step` stages each compute (stencil) and then exchange ghost faces with the face
/// neighbours, one direction at a time (x, y, z, waiting in between, as miniAMR's `comm`): one
/// message per neighbour and direction with (blocks_per_dim * block_cells)^2 * f cells of
/// `variables` doubles, f = 4 when both ranks are refined (four refined blocks per face) and 1
/// otherwise (refined/coarse faces carry the coarse amount). Every `checksum_every` stages a
/// checksum allreduce (`variables` doubles); every `refine_every` steps a refinement round:
/// neighbours exchange block refinement levels (blocks_per_dim^2 ints per face, all 6 faces at
/// once) and three 8 B allreduces decide and count (miniAMR's refine / load balance; block
/// migration is not modelled). Refinement follows a moving object: in refinement epoch
/// e = iter / refine_every the ranks at grid coordinate e mod dims[0] along the first dimension
/// are refined, so the large faces sweep through the job.
/// Pattern: Vaughan & Barrett, "Enabling Tractable Exploration of the Performance of Adaptive
/// Mesh Refinement" (2015) and miniAMR's reference code (Mantevo: `comm.c` bundles the faces
/// for one neighbour and direction, `check_sum.c`, `refine.c`); the defaults of the Python
/// model are miniAMR's (10^3-cell blocks, 40 variables, 20 stages per step, checksum every 5
/// stages, refinement every 5 steps).
///
/// Parameters: `block_cells`, `blocks_per_dim`, `variables`, `stages_per_step`,
/// `checksum_every` (stages), `refine_every` (steps), `iterations` (time steps), `compute_us`
/// per stage.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct MiniAmrParams {
    block_cells: u32,
    blocks_per_dim: u32,
    variables: u32,
    stages_per_step: u32,
    checksum_every: u32,
    refine_every: u32,
    iterations: u32,
    compute_us: f64,
}

pub(super) struct MiniAmr {
    p: MiniAmrParams,
    grid: Grid,
    world: Group,
}

impl MiniAmr {
    pub(super) fn new(p: MiniAmrParams, size: u32) -> Result<MiniAmr, String> {
        check_compute("miniamr", p.compute_us)?;
        check_positive("miniamr", "checksum_every", p.checksum_every)?;
        check_positive("miniamr", "refine_every", p.refine_every)?;
        Ok(MiniAmr { p, grid: Grid::new(dims_create(size, 3)), world: Group::world(size) })
    }

    fn refined(&self, rank: u32, iter: u32) -> bool {
        let epoch = iter / self.p.refine_every;
        self.grid.coord(rank, 0) == epoch % self.grid.dims[0]
    }

    fn face_bytes(&self, a: u32, b: u32, iter: u32) -> u64 {
        let side = self.p.blocks_per_dim as u64 * self.p.block_cells as u64;
        let f = if self.refined(a, iter) && self.refined(b, iter) { 4 } else { 1 };
        side * side * f * self.p.variables as u64 * 8
    }
}

impl Program for MiniAmr {
    fn iterations(&self) -> u32 {
        self.p.iterations
    }
    fn iteration(&mut self, rank: u32, iter: u32, out: &mut Vec<Op>) {
        let mut phase = 0;
        for stage in 0..self.p.stages_per_step {
            compute(out, self.p.compute_us);
            for d in 0..3 {
                let before = out.len();
                let up = self.grid.shift(rank, d, 1, false).map_or(0, |n| self.face_bytes(rank, n, iter));
                let down = self.grid.shift(rank, d, -1, false).map_or(0, |n| self.face_bytes(rank, n, iter));
                post_axis(out, &self.grid, rank, d, false, (up, down), iter, phase, 0);
                wait_if_any(out, before);
                phase += 1;
            }
            let global_stage = iter as u64 * self.p.stages_per_step as u64 + stage as u64 + 1;
            if global_stage.is_multiple_of(self.p.checksum_every as u64) {
                collective(out, CollectiveKind::Allreduce, self.p.variables as u64 * 8, self.world);
            }
        }
        if (iter + 1).is_multiple_of(self.p.refine_every) {
            let flags = (self.p.blocks_per_dim as u64).pow(2) * 4;
            let before = out.len();
            for d in 0..3 {
                post_axis(out, &self.grid, rank, d, false, (flags, flags), iter, phase, d as u32);
            }
            wait_if_any(out, before);
            for _ in 0..3 {
                collective(out, CollectiveKind::Allreduce, 8, self.world);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::mpi::program::CollectiveKind::*;
    use crate::mpi::skeletons::tests::{config, totals};

    #[test]
    fn miniamr_bytes() {
        // P = 8: 2 x 2 x 2 (non-periodic): every rank has one neighbour per dimension.
        // Iteration 0, epoch 0: ranks with coordinate 0 in dim 0 (ranks 0-3) are refined.
        // Face: (2*4)^2 = 64 cells x 4 variables x 8 B = 2048 B; x4 between refined ranks.
        let (b, m, c) = totals(&config("miniamr"), 8, 0);
        // Per stage: dim 0 faces join refined and coarse (8 messages of 2048); dims 1 and 2:
        // 8 messages each, half among refined ranks (x4).
        let stage = 8 * 2048 + 2 * (4 * 4 * 2048 + 4 * 2048);
        let refine = 8 * 3 * 4 * 4;
        assert_eq!(b, 3 * stage + refine);
        assert_eq!(m, 3 * 24 + 24);
        // Stages 1..3 of iteration 0: checksum after stage 2; refinement every step.
        assert_eq!(c, vec![(Allreduce, 32, 8), (Allreduce, 8, 8), (Allreduce, 8, 8), (Allreduce, 8, 8)]);
        // Epoch 1: the refined layer moved to coordinate 1; same total by symmetry.
        assert_eq!(totals(&config("miniamr"), 8, 1).0, 3 * stage + refine);
    }
}
