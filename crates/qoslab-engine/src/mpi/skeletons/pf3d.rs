//! pF3D (laser-plasma interaction): 2-D FFT alltoalls in x and y sub-communicators, z-plane exchange.

use super::common::{check_compute, collective, compute, div_ceil, post_axis, wait_if_any, Grid};
use crate::mpi::program::{CollectiveKind, Op};
use crate::mpi::workloads::{dims_create, Program};
use serde::Deserialize;

/// pF3D (laser-plasma interaction): light propagates along z through xy-planes distributed over
/// a `px x py` grid, z over `pz` ranks (`dims_create(P, 3)` = [pz, py, px]). Per step a forward
/// and an inverse 2-D FFT of the light field; each 2-D FFT transposes x into the x-row
/// sub-communicator (MPI_Alltoall), transforms, transposes back, then the same in the y-column:
/// 4 alltoalls per 2-D FFT, 8 per step, each rank's block = its share of the local field
/// (nx * ny * nz single-precision complex, 8 B) / group size. Then the z-advection exchanges one
/// xy-plane with the z neighbours (non-periodic: the laser enters at z = 0). Pattern: pF3D as
/// described by Bhatele, Mohror, Langer & Isaacs, "There goes the neighborhood: performance
/// degradation due to nearby jobs" (SC'13) and Langer et al.'s pF3D performance papers: 2-D FFTs
/// as MPI_Alltoall inside x and y sub-communicators, light advance by z-neighbour exchanges.
///
/// Parameters: `nx`, `ny`, `nz` (local cells per rank), `iterations`, `compute_us` per step
/// (half after the FFTs, half after the z exchange).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Pf3dParams {
    nx: u32,
    ny: u32,
    nz: u32,
    iterations: u32,
    compute_us: f64,
}

pub(super) struct Pf3d {
    p: Pf3dParams,
    grid: Grid,
}

/// Single-precision complex.
const COMPLEX_FLOAT: u64 = 8;

impl Pf3d {
    pub(super) fn new(p: Pf3dParams, size: u32) -> Result<Pf3d, String> {
        check_compute("pf3d", p.compute_us)?;
        Ok(Pf3d { grid: Grid::new(dims_create(size, 3)), p })
    }
    fn local_bytes(&self) -> u64 {
        self.p.nx as u64 * self.p.ny as u64 * self.p.nz as u64 * COMPLEX_FLOAT
    }
}

impl Program for Pf3d {
    fn iterations(&self) -> u32 {
        self.p.iterations
    }
    fn iteration(&mut self, rank: u32, iter: u32, out: &mut Vec<Op>) {
        let (x, y) = (self.grid.group(2), self.grid.group(1));
        let local = self.local_bytes();
        for _fft in 0..2 {
            for g in [x, y] {
                let block = div_ceil(local, g.size as u64);
                collective(out, CollectiveKind::Alltoall, block, g);
                collective(out, CollectiveKind::Alltoall, block, g);
            }
        }
        compute(out, self.p.compute_us / 2.0);
        let plane = self.p.nx as u64 * self.p.ny as u64 * COMPLEX_FLOAT;
        let before = out.len();
        post_axis(out, &self.grid, rank, 0, false, (plane, plane), iter, 0, 0);
        wait_if_any(out, before);
        compute(out, self.p.compute_us / 2.0);
    }
}

#[cfg(test)]
mod tests {
    use crate::mpi::program::CollectiveKind::*;
    use crate::mpi::skeletons::tests::{config, totals};

    #[test]
    fn pf3d_bytes() {
        // P = 64: grid [4, 4, 4]; local field 16*16*8*8 B = 16384 B; z plane 2048 B.
        let (b, m, c) = totals(&config("pf3d"), 64, 0);
        // z neighbours: ranks at z = 0 and z = 3 have one, the others two (non-periodic).
        let z_messages = 16 * (1 + 2 + 2 + 1);
        assert_eq!((b, m), (z_messages * 2048, z_messages));
        assert_eq!(c, vec![(Alltoall, 4096, 4); 8]);
    }
}
