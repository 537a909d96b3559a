//! NAS BT: multi-partition ADI, face copies and pipelined x/y/z line solves on a q x q grid.

use super::common::{check_compute, compute, div_ceil, tag, wait_if_any, NasClass, NasParams};
use crate::mpi::program::Op;
use crate::mpi::workloads::Program;

/// NAS BT (NPB 3.4, bt.f, multi-partition ADI): P = q^2 ranks on a q x q grid, the N^3 grid cut
/// into q^3 cells, rank (r, c) owning the q cells ((c + k) mod q, (r + k) mod q, k). The
/// successor in x is (r, c+1), in y (r+1, c), in z (r-1, c-1) (all cyclic), so every sweep
/// stage keeps every rank busy. Per time step:
/// - copy_faces: one message to each of the 6 successors/predecessors with the faces of the q-1
///   cells that have a neighbour that way (non-periodic domain): (q-1) * cs^2 * 2 layers * 5
///   doubles, cs = ceil(N / q);
/// - x_solve, y_solve, z_solve: forward elimination over q stages, each stage receiving from the
///   predecessor (stage > 0) and sending cs^2 * (25 + 5) doubles (a 5x5 block and a 5-vector per
///   face point) to the successor (stage < q-1); back substitution the other way with cs^2 * 5
///   doubles.
///
/// A job size that is not a square runs on the largest q^2 <= P ranks; the others idle (NPB BT
/// refuses such sizes). N per class: S 12, W 24, A 64, B 102, C 162, D 408; NITER: S 60,
/// W/A/B/C 200, D 250.
///
/// Parameters: `class`, `iterations` (time steps), `compute_us` per time step (a quarter for
/// compute_rhs after copy_faces, the rest spread over the 6q cell solves).
pub(super) struct NasBt {
    p: NasParams,
    q: u32,
    cell: u64,
}

fn bt_n(class: NasClass) -> u64 {
    match class {
        NasClass::S => 12,
        NasClass::W => 24,
        NasClass::A => 64,
        NasClass::B => 102,
        NasClass::C => 162,
        NasClass::D => 408,
    }
}

impl NasBt {
    pub(super) fn new(p: NasParams, size: u32) -> Result<NasBt, String> {
        check_compute("nas-bt", p.compute_us)?;
        let mut q = (size as f64).sqrt() as u32;
        while q * q > size {
            q -= 1;
        }
        while (q + 1) * (q + 1) <= size {
            q += 1;
        }
        let cell = div_ceil(bt_n(p.class), q as u64);
        Ok(NasBt { p, q, cell })
    }

    /// (successor, predecessor) of `rank` in direction `d` (0 x, 1 y, 2 z).
    fn neighbors(&self, rank: u32, d: usize) -> (u32, u32) {
        let q = self.q;
        let (r, c) = (rank / q, rank % q);
        let at = |dr: u32, dc: u32| ((r + dr) % q) * q + (c + dc) % q;
        match d {
            0 => (at(0, 1), at(0, q - 1)),
            1 => (at(1, 0), at(q - 1, 0)),
            _ => (at(q - 1, q - 1), at(1, 1)),
        }
    }
}

impl Program for NasBt {
    fn iterations(&self) -> u32 {
        self.p.iterations
    }
    fn iteration(&mut self, rank: u32, iter: u32, out: &mut Vec<Op>) {
        let q = self.q;
        if rank >= q * q || q == 1 {
            // Idle ranks of a non-square job; a one-rank job has no neighbours.
            if rank < q * q {
                compute(out, self.p.compute_us);
            }
            return;
        }
        let face = self.cell * self.cell;
        let copy = (q as u64 - 1) * face * 2 * 5 * 8;
        let before = out.len();
        for d in 0..3 {
            let (succ, pred) = self.neighbors(rank, d);
            out.push(Op::irecv(pred, tag(iter, 0, 2 * d as u32)));
            out.push(Op::irecv(succ, tag(iter, 0, 2 * d as u32 + 1)));
        }
        for d in 0..3 {
            let (succ, pred) = self.neighbors(rank, d);
            out.push(Op::isend(succ, copy, tag(iter, 0, 2 * d as u32)));
            out.push(Op::isend(pred, copy, tag(iter, 0, 2 * d as u32 + 1)));
        }
        wait_if_any(out, before);
        compute(out, self.p.compute_us / 4.0);
        let cell_us = self.p.compute_us * 0.75 / (6 * q) as f64;
        for d in 0..3 {
            let (succ, pred) = self.neighbors(rank, d);
            // Forward elimination: phase 1 + 2d; back substitution: phase 2 + 2d.
            for (phase, to, from, bytes) in
                [(1 + 2 * d as u32, succ, pred, face * 30 * 8), (2 + 2 * d as u32, pred, succ, face * 5 * 8)]
            {
                for stage in 0..q {
                    if stage > 0 {
                        out.push(Op::irecv(from, tag(iter, phase, 0)));
                        out.push(Op::WaitAll);
                    }
                    compute(out, cell_us);
                    if stage < q - 1 {
                        out.push(Op::isend(to, bytes, tag(iter, phase, 0)));
                    }
                }
            }
        }
        out.push(Op::WaitAll);
    }
}

#[cfg(test)]
mod tests {
    use crate::mpi::skeletons::tests::{config, totals};

    #[test]
    fn nas_bt_bytes() {
        // Class S (N = 12) on 16 ranks: q = 4, cells of 3^3. copy_faces 6 x 3 * 9 * 80 B;
        // per direction 3 forward messages of 9 * 240 B and 3 backward of 9 * 40 B.
        let (b, m, c) = totals(&config("nas-bt"), 16, 0);
        assert_eq!(b, 16 * (6 * 3 * 9 * 80 + 3 * 3 * (9 * 240 + 9 * 40)));
        assert_eq!(m, 16 * (6 + 3 * 6));
        assert!(c.is_empty());
        // 7 ranks: 2 x 2 active, 3 idle.
        let (_, m, _) = totals(&config("nas-bt"), 7, 0);
        assert_eq!(m, 4 * (6 + 3 * 2));
    }
}
