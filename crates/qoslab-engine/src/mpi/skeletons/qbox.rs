//! Qbox (plane-wave first-principles MD): FFT alltoalls in columns, density and ScaLAPACK collectives.

use super::common::{check_compute, collective, compute, div_ceil, Grid};
use crate::mpi::program::{CollectiveKind, Op};
use crate::mpi::workloads::{dims_create, Program};
use serde::Deserialize;

/// Qbox (first-principles MD, plane waves): ranks form a `rows x cols` ScaLAPACK-style grid
/// (`dims_create(P, 2)`, rows >= cols). A column holds `states / cols` electronic states; the
/// plane-wave coefficients of a state, and its real-space FFT grid (fft_grid^3 points), are spread
/// over the column's rows. Per iteration (one SCF/MD step):
/// - for every local state, 3 FFT transposes (MPI_Alltoall in the column: one for the charge
///   density, two for H*psi), each rank's block = (fft_grid^3 / rows) complex doubles / rows;
/// - the charge density summed over all states: allreduce over the row of the rank's real-space
///   slab (fft_grid^3 / rows doubles);
/// - the overlap/Gram matrix for orthogonalisation (ScaLAPACK SUMMA pdsyrk): `cols` broadcasts
///   over the row of the local coefficient panel (states/cols x plane_waves/rows complex
///   doubles), then an allreduce over the column of the local block of S (states/cols x states
///   doubles).
///
/// Pattern: Gygi, "Architecture of Qbox: a scalable first-principles molecular dynamics code"
/// (IBM J. Res. Dev. 52, 2008): the 2-D process grid, FFTs within columns, density sums and
/// ScaLAPACK linear algebra across rows. Simplified: no pairing of real wavefunctions, SUMMA
/// broadcasts all rooted at the row's first rank.
///
/// Parameters: `states`, `plane_waves` (coefficients per state, total), `fft_grid` (points per
/// dimension of the wavefunction FFT grid), `iterations`, `compute_us` per iteration (spread
/// evenly before the per-state FFTs and the linear algebra).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct QboxParams {
    states: u32,
    plane_waves: u64,
    fft_grid: u32,
    iterations: u32,
    compute_us: f64,
}

pub(super) struct Qbox {
    p: QboxParams,
    grid: Grid,
}

impl Qbox {
    pub(super) fn new(p: QboxParams, size: u32) -> Result<Qbox, String> {
        check_compute("qbox", p.compute_us)?;
        Ok(Qbox { grid: Grid::new(dims_create(size, 2)), p })
    }
    fn sizes(&self) -> QboxSizes {
        let (rows, cols) = (self.grid.dims[0] as u64, self.grid.dims[1] as u64);
        let n3 = (self.p.fft_grid as u64).pow(3);
        let states_local = div_ceil(self.p.states as u64, cols);
        let slab = div_ceil(n3, rows);
        QboxSizes {
            states_local,
            fft_block: div_ceil(slab * 16, rows),
            density: slab * 8,
            panel: states_local * div_ceil(self.p.plane_waves, rows) * 16,
            overlap: states_local * self.p.states as u64 * 8,
        }
    }
}

struct QboxSizes {
    states_local: u64,
    fft_block: u64,
    density: u64,
    panel: u64,
    overlap: u64,
}

impl Program for Qbox {
    fn iterations(&self) -> u32 {
        self.p.iterations
    }
    fn iteration(&mut self, _rank: u32, _iter: u32, out: &mut Vec<Op>) {
        let s = self.sizes();
        let (column, row) = (self.grid.group(0), self.grid.group(1));
        let work = self.p.compute_us / (s.states_local + 1) as f64;
        for _state in 0..s.states_local {
            compute(out, work);
            for _ in 0..3 {
                collective(out, CollectiveKind::Alltoall, s.fft_block, column);
            }
        }
        collective(out, CollectiveKind::Allreduce, s.density, row);
        compute(out, work);
        for _panel in 0..row.size {
            collective(out, CollectiveKind::Bcast, s.panel, row);
        }
        collective(out, CollectiveKind::Allreduce, s.overlap, column);
    }
}

#[cfg(test)]
mod tests {
    use crate::mpi::program::CollectiveKind::*;
    use crate::mpi::skeletons::tests::{config, totals};

    #[test]
    fn qbox_bytes() {
        // P = 16: 4 x 4; 2 states per column; slab 16^3/4 = 1024 points; panel 2 * 500 * 16 B.
        let (b, _, c) = totals(&config("qbox"), 16, 0);
        assert_eq!(b, 0);
        let mut want = vec![(Alltoall, 1024 * 16 / 4, 4); 6];
        want.push((Allreduce, 1024 * 8, 4));
        want.extend(vec![(Bcast, 2 * 500 * 16, 4); 4]);
        want.push((Allreduce, 2 * 8 * 8, 4));
        assert_eq!(c, want);
    }
}
