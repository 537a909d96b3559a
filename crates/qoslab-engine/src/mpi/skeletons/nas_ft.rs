//! NAS FT: 3-D FFT with global (or row and column) transposes and a checksum reduce.

use super::common::{check_compute, collective, compute, div_ceil, Grid, NasClass, NasParams};
use crate::mpi::program::{CollectiveKind, Group, Op};
use crate::mpi::workloads::{dims_create, Program};

/// NAS FT (NPB 3.4, ft.f): a 3-D FFT PDE solver. Per iteration: `evolve` (local), an inverse
/// 3-D FFT whose only communication is the global transpose (`transpose_x_yz`: one MPI_Alltoall
/// over all ranks, block = nx*ny*nz / P^2 complex doubles), and the checksum (MPI_Reduce of one
/// double complex, 16 B, to rank 0). With more ranks than nz NPB switches to its 2-D layout: two
/// transposes, alltoalls in the rows and columns of a `dims_create(P, 2)` grid with block =
/// total / (P * group size). NPB needs a power-of-two P; other sizes round blocks up.
/// Grid per class (nx x ny x nz): S 64^3, W 128x128x32, A 256x256x128, B 512x256x256, C 512^3,
/// D 2048x1024x1024; NITER: S/W/A 6, B/C 20, D 25 (the Python default for `iterations`).
///
/// Parameters: `class`, `iterations`, `compute_us` per iteration (half before, half after the
/// transpose).
pub(super) struct NasFt {
    p: NasParams,
    /// (group, block bytes) of each transpose.
    transposes: Vec<(Group, u64)>,
    size: u32,
}

fn ft_grid(class: NasClass) -> (u64, u64, u64) {
    match class {
        NasClass::S => (64, 64, 64),
        NasClass::W => (128, 128, 32),
        NasClass::A => (256, 256, 128),
        NasClass::B => (512, 256, 256),
        NasClass::C => (512, 512, 512),
        NasClass::D => (2048, 1024, 1024),
    }
}

impl NasFt {
    pub(super) fn new(p: NasParams, size: u32) -> Result<NasFt, String> {
        check_compute("nas-ft", p.compute_us)?;
        let (nx, ny, nz) = ft_grid(p.class);
        let total = nx * ny * nz * 16;
        let pp = size as u64;
        let transposes = if pp <= nz {
            vec![(Group::world(size), div_ceil(total, pp * pp))]
        } else {
            let grid = Grid::new(dims_create(size, 2));
            [grid.group(1), grid.group(0)].into_iter().map(|g| (g, div_ceil(total, pp * g.size as u64))).collect()
        };
        Ok(NasFt { p, transposes, size })
    }
}

impl Program for NasFt {
    fn iterations(&self) -> u32 {
        self.p.iterations
    }
    fn iteration(&mut self, _rank: u32, _iter: u32, out: &mut Vec<Op>) {
        compute(out, self.p.compute_us / 2.0);
        for &(g, block) in &self.transposes {
            collective(out, CollectiveKind::Alltoall, block, g);
        }
        compute(out, self.p.compute_us / 2.0);
        collective(out, CollectiveKind::Reduce, 16, Group::world(self.size));
    }
}

#[cfg(test)]
mod tests {
    use crate::mpi::program::CollectiveKind::*;
    use crate::mpi::skeletons::tests::{config, totals};

    #[test]
    fn nas_ft_bytes() {
        // Class S: 64^3 complex doubles = 4 MiB; 16 ranks: one world alltoall of 4 MiB / 256.
        let (_, _, c) = totals(&config("nas-ft"), 16, 0);
        assert_eq!(c, vec![(Alltoall, 16384, 16), (Reduce, 16, 16)]);
        // 128 ranks > nz = 64: the 2-D layout, 16 x 8 grid.
        let (_, _, c) = totals(&config("nas-ft"), 128, 0);
        let total = 64u64 * 64 * 64 * 16;
        assert_eq!(c, vec![(Alltoall, total / (128 * 8), 8), (Alltoall, total / (128 * 16), 16), (Reduce, 16, 128)]);
    }
}
