//! MILC (lattice QCD): 4-D halo exchanges of the staggered Dslash and the CG's global sums.

use super::common::{check_compute, collective, compute, div_ceil, post_axis, wait_if_any, Grid};
use crate::mpi::program::{CollectiveKind, Group, Op};
use crate::mpi::workloads::{dims_create, Program};
use serde::Deserialize;

/// MILC (lattice QCD, su3_rmd / ks_congrad with the asqtad/HISQ staggered action): per CG
/// iteration two half-lattice Dslash applications (even sites then odd), each a 4-D periodic halo
/// exchange with the 8 neighbours of a `dims_create(P, 4)` grid, then the CG's two global sums
/// (p.Ap and r.r, 8 B allreduces). Dslash gathers one-link neighbours (a face one site deep) and,
/// with the Naik term, three-link neighbours (three sites deep) as separate messages, each of one
/// parity's face sites x one su3_vector (3 complex doubles, 48 B). Pattern: MILC's
/// `dslash_fn_field` (start_gather for XUP..TUP and their opposites, `FORALLUPDIR`) and
/// `ks_congrad` (`g_doublesum` twice per iteration); the local lattice is L^4 per rank (weak
/// scaling, as in MILC's benchmark inputs).
///
/// Parameters: `local_lattice` L (sites per dimension per rank), `naik` (three-link gathers),
/// `cg_iterations` per skeleton iteration, `iterations`, `compute_us` per CG iteration (half
/// before each Dslash, overlapping its gathers).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct MilcParams {
    local_lattice: u32,
    naik: bool,
    cg_iterations: u32,
    iterations: u32,
    compute_us: f64,
}

pub(super) struct Milc {
    p: MilcParams,
    grid: Grid,
    /// One-link message bytes (one parity of an L^3 face, 48 B per site).
    one_link: u64,
}

/// Bytes of an su3_vector in double precision (3 complex numbers).
const SU3_VECTOR_BYTES: u64 = 48;

impl Milc {
    pub(super) fn new(p: MilcParams, size: u32) -> Result<Milc, String> {
        check_compute("milc", p.compute_us)?;
        let l = p.local_lattice as u64;
        let one_link = div_ceil(l * l * l, 2) * SU3_VECTOR_BYTES;
        Ok(Milc { grid: Grid::new(dims_create(size, 4)), one_link, p })
    }
}

impl Program for Milc {
    fn iterations(&self) -> u32 {
        self.p.iterations
    }
    fn iteration(&mut self, rank: u32, iter: u32, out: &mut Vec<Op>) {
        let world = Group::world(self.grid.strides[0] * self.grid.dims[0]);
        for cg in 0..self.p.cg_iterations {
            for parity in 0..2 {
                let phase = 2 * cg + parity;
                let before = out.len();
                for d in 0..4 {
                    post_axis(
                        out,
                        &self.grid,
                        rank,
                        d,
                        true,
                        (self.one_link, self.one_link),
                        iter,
                        phase,
                        2 * d as u32,
                    );
                    if self.p.naik {
                        let three = 3 * self.one_link;
                        post_axis(out, &self.grid, rank, d, true, (three, three), iter, phase, 2 * d as u32 + 1);
                    }
                }
                compute(out, self.p.compute_us / 2.0);
                wait_if_any(out, before);
            }
            collective(out, CollectiveKind::Allreduce, 8, world);
            collective(out, CollectiveKind::Allreduce, 8, world);
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::mpi::program::CollectiveKind::*;
    use crate::mpi::skeletons::tests::{config, totals, with};
    use serde_json::json;

    #[test]
    fn milc_bytes() {
        // P = 16: grid 2x2x2x2, all 8 neighbours; L = 4: 32 sites per parity face, 1536 B.
        let (b, m, c) = totals(&config("milc"), 16, 0);
        let per_rank = 2 * 2 * 8 * (1536 + 3 * 1536);
        assert_eq!(b, 16 * per_rank);
        assert_eq!(m, 16 * 2 * 2 * 8 * 2);
        assert_eq!(c, vec![(Allreduce, 8, 16); 4]);
        // P = 7: a 7x1x1x1 grid, only the first dimension exchanges.
        let (b, _, _) = totals(&with(config("milc"), "naik", json!(false)), 7, 0);
        assert_eq!(b, 7 * 2 * 2 * 2 * 1536);
    }
}
