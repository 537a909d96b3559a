//! The crystal router of gslib/Nek5000: recursive halving all-to-some exchange.

use super::common::{check_compute, compute, tag};
use crate::mpi::program::Op;
use crate::mpi::workloads::Program;
use serde::Deserialize;

/// The crystal router of gslib (Nek5000's all-to-some exchange, `crystal_router` in
/// gslib/src/crystal.c; Fox et al., "Solving Problems on Concurrent Processors"): the ranks
/// split into a lower and an upper half, every rank sends its partner in the other half the data
/// bound for that half, and each half recurses: ceil(log2 P) stages, one exchange each (partner
/// = rank XOR P/2, P/4, ... for a power of two). Each rank routes `bytes` per iteration whose
/// destinations are uniform over the job, so a stage sends `bytes * |other half| / |both halves|`
/// (bytes / 2 for a power of two). Odd halves: the lower half has one rank more; that rank sends
/// to the last rank of the upper half (which then receives two messages) and receives nothing.
///
/// Parameters: `bytes` (data each rank routes per iteration), `iterations`, `compute_us` before
/// the exchange.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct CrystalRouterParams {
    bytes: u64,
    iterations: u32,
    compute_us: f64,
}

pub(super) struct CrystalRouter {
    p: CrystalRouterParams,
    size: u32,
}

impl CrystalRouter {
    pub(super) fn new(p: CrystalRouterParams, size: u32) -> Result<CrystalRouter, String> {
        check_compute("crystal-router", p.compute_us)?;
        Ok(CrystalRouter { p, size })
    }
}

/// ceil(bytes * part / whole), without overflow.
fn share(bytes: u64, part: u32, whole: u32) -> u64 {
    (bytes as u128 * part as u128).div_ceil(whole as u128) as u64
}

impl Program for CrystalRouter {
    fn iterations(&self) -> u32 {
        self.p.iterations
    }
    fn iteration(&mut self, rank: u32, iter: u32, out: &mut Vec<Op>) {
        compute(out, self.p.compute_us);
        let (mut base, mut n, mut stage) = (0u32, self.size, 0u32);
        while n > 1 {
            let lower = n.div_ceil(2);
            let upper = n - lower;
            let mid = base + lower;
            let t = tag(iter, stage, 0);
            if rank < mid {
                let o = rank - base;
                if o < upper {
                    out.push(Op::irecv(mid + o, t));
                }
                let bytes = share(self.p.bytes, upper, n);
                out.push(Op::isend(mid + o.min(upper - 1), bytes, t));
                n = lower;
            } else {
                let o = rank - mid;
                out.push(Op::irecv(base + o, t));
                if lower > upper && o == upper - 1 {
                    out.push(Op::irecv(mid - 1, t));
                }
                let bytes = share(self.p.bytes, lower, n);
                out.push(Op::isend(base + o, bytes, t));
                base = mid;
                n = upper;
            }
            out.push(Op::WaitAll);
            stage += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::mpi::skeletons::tests::{config, totals};

    #[test]
    fn crystal_router_bytes() {
        // Power of two: log2 P stages of bytes / 2.
        let (b, m, _) = totals(&config("crystal-router"), 64, 0);
        assert_eq!((b, m), (64 * 6 * 5000, 64 * 6));
        // P = 3: stage 1 splits {0, 1} | {2}: 0 and 1 send ceil(10000/3) to 2, 2 sends ceil(20000/3) to 0;
        // stage 2 in {0, 1}: 5000 each way.
        let (b, m, _) = totals(&config("crystal-router"), 3, 0);
        assert_eq!((b, m), (2 * 3334 + 6667 + 2 * 5000, 5));
    }
}
