//! NAS CG: sparse matrix-vector products with row exchanges and transposes, dot-product allreduces.

use super::common::{check_compute, collective, compute, div_ceil, tag, Grid, NasClass, NasParams};
use crate::mpi::program::{CollectiveKind, Op};
use crate::mpi::workloads::{dims_create, Program};

/// NAS CG (NPB 3.4, cg.f): conjugate gradient on a sparse matrix of order NA distributed over an
/// `nprows x npcols` process grid (npcols = nprows or 2 * nprows for a power of two; here
/// `dims_create(P, 2)` with npcols the larger). One skeleton iteration is one outer iteration:
/// 25 CG iterations plus the residual, i.e. 26 sparse matrix-vector products. Each product sums
/// the partial result across the process row: ceil(log2 npcols) exchanges with the rank whose
/// column index differs in bit k (largest distance first), then the transpose exchange with the
/// transpose rank (row-major index of the column-major position; diagonal ranks keep theirs).
/// As NPB's `reduce_send_lengths` and `send_len`, every one of these messages has the same
/// length: the whole row segment (NA / nprows doubles) on a square grid, half of it otherwise
/// (the two halves of a column pair). Class D on 256 ranks: 93750 doubles, the 732 KB that
/// Jokanovic et al. list for CG (docs/skeletons.md, calibration). Dot products are allreduces of
/// 8 B over the process row: 1 before the loop, 2 per CG iteration (p.q, r.r), 1 for the
/// residual, and one of 16 B for the two norms of the outer loop (53 per iteration). A
/// non-power-of-two row skips the exchanges whose partner would be beyond the row.
/// NA per class: S 1400, W 7000, A 14000, B 75000, C 150000, D 1500000; NITER: S/W/A 15,
/// B/C 75, D 100.
///
/// Parameters: `class`, `iterations` (outer iterations), `compute_us` per matrix-vector product.
pub(super) struct NasCg {
    p: NasParams,
    grid: Grid,
    /// Bytes of every row-exchange and transpose message: NA / nprows doubles on a square grid,
    /// half of that otherwise (NPB's send_len).
    piece: u64,
}

const CG_INNER: u32 = 25;

fn cg_na(class: NasClass) -> u64 {
    match class {
        NasClass::S => 1400,
        NasClass::W => 7000,
        NasClass::A => 14000,
        NasClass::B => 75000,
        NasClass::C => 150000,
        NasClass::D => 1500000,
    }
}

fn ceil_log2(n: u32) -> u32 {
    if n <= 1 {
        0
    } else {
        32 - (n - 1).leading_zeros()
    }
}

impl NasCg {
    pub(super) fn new(p: NasParams, size: u32) -> Result<NasCg, String> {
        check_compute("nas-cg", p.compute_us)?;
        let d = dims_create(size, 2);
        let (npcols, nprows) = (d[0], d[1]);
        let segment = div_ceil(cg_na(p.class), nprows as u64);
        let piece = if npcols == nprows { segment } else { div_ceil(segment, 2) } * 8;
        Ok(NasCg { p, grid: Grid::new(vec![nprows, npcols]), piece })
    }

    fn matvec(&self, out: &mut Vec<Op>, rank: u32, iter: u32, phase: u32) {
        let (nprows, npcols) = (self.grid.dims[0], self.grid.dims[1]);
        let col = self.grid.coord(rank, 1);
        let stages = ceil_log2(npcols);
        for s in 0..stages {
            let distance = 1 << (stages - 1 - s);
            let partner_col = col ^ distance;
            if partner_col < npcols {
                let partner = rank - col + partner_col;
                let t = tag(iter, phase, s);
                out.extend([Op::irecv(partner, t), Op::isend(partner, self.piece, t), Op::WaitAll]);
            }
        }
        // Transpose: (row r, column c) sends to the rank at row-major index c * nprows + r.
        let (r, c) = (rank / npcols, rank % npcols);
        let to = c * nprows + r;
        let from = (rank % nprows) * npcols + rank / nprows;
        if to != rank {
            let t = tag(iter, phase, 31);
            out.extend([Op::irecv(from, t), Op::isend(to, self.piece, t), Op::WaitAll]);
        }
    }
}

impl Program for NasCg {
    fn iterations(&self) -> u32 {
        self.p.iterations
    }
    fn iteration(&mut self, rank: u32, iter: u32, out: &mut Vec<Op>) {
        let row = self.grid.group(1);
        collective(out, CollectiveKind::Allreduce, 8, row);
        for it in 0..=CG_INNER {
            compute(out, self.p.compute_us);
            self.matvec(out, rank, iter, it);
            if it < CG_INNER {
                collective(out, CollectiveKind::Allreduce, 8, row);
                collective(out, CollectiveKind::Allreduce, 8, row);
            } else {
                collective(out, CollectiveKind::Allreduce, 8, row);
            }
        }
        collective(out, CollectiveKind::Allreduce, 16, row);
    }
}

#[cfg(test)]
mod tests {
    use crate::mpi::program::CollectiveKind::*;
    use crate::mpi::skeletons::tests::{config, totals};
    use serde_json::json;

    #[test]
    fn nas_cg_bytes() {
        // P = 16: 4 x 4 (square), segment 1400 / 4 = 350 doubles, sent whole in each of the 2
        // row exchanges and by the 12 off-diagonal ranks in the transpose; 26 products.
        let (b, m, c) = totals(&config("nas-cg"), 16, 0);
        assert_eq!(b, 26 * (16 * 2 + 12) * 350 * 8);
        assert_eq!(m, 26 * (16 * 2 + 12));
        assert_eq!(c.len(), 53);
        assert_eq!(c.iter().filter(|x| **x == (Allreduce, 8, 4)).count(), 52);
        assert_eq!(c[52], (Allreduce, 16, 4));
        // P = 32: 4 rows x 8 columns, not square: half of the 350-double segment, 175 doubles,
        // in each of the 3 row exchanges and the transpose (every rank moves: 4 x 8 has no
        // fixed points but ranks 0 and 31).
        let (b, m, _) = totals(&config("nas-cg"), 32, 0);
        assert_eq!(m, 26 * (32 * 3 + 30));
        assert_eq!(b, m * 175 * 8);
        // Class D on 16 x 16 = 256 ranks: 93750 doubles, the 732 KB of Jokanovic et al.'s table.
        let d = json!({"kind": "nas-cg", "class": "D", "iterations": 1, "compute_us": 0.0});
        let (b, m, _) = totals(&d, 256, 0);
        assert_eq!(b, m * 750_000);
    }
}
