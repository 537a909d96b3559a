//! CPMD (Car-Parrinello MD): whole-job FFT alltoalls, overlap and force allreduces.

use super::common::{check_compute, collective, compute, div_ceil};
use crate::mpi::program::{CollectiveKind, Group, Op};
use crate::mpi::workloads::Program;
use serde::Deserialize;

/// CPMD (Car-Parrinello MD, plane waves): G-vectors and real-space planes distributed over all
/// ranks, so every 3-D FFT transposes with one MPI_Alltoall over the whole job, block =
/// fft_grid^3 complex doubles / P^2 (the full grid; CPMD ships only the non-zero sticks on the G
/// side, so this is an upper bound). Real wavefunctions are transformed two at a time. Per
/// iteration (one SCF / MD step):
/// - charge density (`rhoofr`): one transpose per pair of states;
/// - potential from the density: two transposes (density to G space and back);
/// - H*psi (`vpsi`): two transposes per pair of states;
/// - orthogonalisation: allreduce of the states x states overlap matrix (doubles), each rank
///   having summed over its G-vectors (`mp_sum`);
/// - ionic forces: allreduce of 3 * atoms doubles; new positions broadcast from rank 0.
///
/// Pattern: Hutter & Curioni, "Dual-level parallelism for ab initio molecular dynamics"
/// (ChemPhysChem 2005) and CPMD's manual (plane-wave parallelisation, transposes as
/// all-to-alls).
///
/// Parameters: `states`, `fft_grid` (points per dimension), `atoms`, `iterations`, `compute_us`
/// per iteration (spread over the pairs of states).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct CpmdParams {
    states: u32,
    fft_grid: u32,
    atoms: u32,
    iterations: u32,
    compute_us: f64,
}

pub(super) struct Cpmd {
    p: CpmdParams,
    size: u32,
}

impl Cpmd {
    pub(super) fn new(p: CpmdParams, size: u32) -> Result<Cpmd, String> {
        check_compute("cpmd", p.compute_us)?;
        Ok(Cpmd { p, size })
    }
    fn block(&self) -> u64 {
        let pp = self.size as u64;
        div_ceil((self.p.fft_grid as u64).pow(3) * 16, pp * pp)
    }
}

impl Program for Cpmd {
    fn iterations(&self) -> u32 {
        self.p.iterations
    }
    fn iteration(&mut self, _rank: u32, _iter: u32, out: &mut Vec<Op>) {
        let world = Group::world(self.size);
        let block = self.block();
        let pairs = self.p.states.div_ceil(2);
        let work = self.p.compute_us / (2 * pairs.max(1)) as f64;
        for _ in 0..pairs {
            compute(out, work);
            collective(out, CollectiveKind::Alltoall, block, world);
        }
        collective(out, CollectiveKind::Alltoall, block, world);
        collective(out, CollectiveKind::Alltoall, block, world);
        for _ in 0..pairs {
            compute(out, work);
            collective(out, CollectiveKind::Alltoall, block, world);
            collective(out, CollectiveKind::Alltoall, block, world);
        }
        let states = self.p.states as u64;
        collective(out, CollectiveKind::Allreduce, states * states * 8, world);
        let forces = 3 * self.p.atoms as u64 * 8;
        collective(out, CollectiveKind::Allreduce, forces, world);
        collective(out, CollectiveKind::Bcast, forces, world);
    }
}

#[cfg(test)]
mod tests {
    use crate::mpi::program::CollectiveKind::*;
    use crate::mpi::skeletons::tests::{config, totals};

    #[test]
    fn cpmd_bytes() {
        // 6 states = 3 pairs: 3 + 2 + 6 alltoalls of 16^3 * 16 / 8^2 = 1024 B.
        let (b, _, c) = totals(&config("cpmd"), 8, 0);
        assert_eq!(b, 0);
        let mut want = vec![(Alltoall, 1024, 8); 11];
        want.extend([(Allreduce, 36 * 8, 8), (Allreduce, 96, 8), (Bcast, 96, 8)]);
        assert_eq!(c, want);
    }
}
