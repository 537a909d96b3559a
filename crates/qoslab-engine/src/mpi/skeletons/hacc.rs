//! HACC (cosmology): 26-neighbour overload exchange and pencil-FFT alltoalls.

use super::common::{check_compute, collective, compute, div_ceil, tag, wait_if_any, Grid};
use crate::mpi::program::{CollectiveKind, Group, Op};
use crate::mpi::workloads::{dims_create, Program};
use serde::Deserialize;

/// HACC (cosmology, particle-mesh + short-range solver): particles in a periodic 3-D block
/// decomposition (`dims_create(P, 3)`), the PM grid with as many points as particles
/// (HACC's ng = np) transformed by SWFFT on a 2-D pencil grid (`dims_create(P, 2)`). Per
/// long-range step:
/// - overload-zone refresh: particles within `overload` particle spacings of the rank's
///   boundary go to all 26 neighbours (faces L^2 * d, edges L * d^2, corners d^3 particles of
///   32 B: float position and velocity, 64-bit id; L = round(cbrt(particles_per_rank)),
///   d = min(overload, L)); with few ranks per dimension some neighbours coincide (each offset
///   still gets its own message) and offsets that wrap to the rank itself send nothing;
/// - the Poisson solve: one forward and three inverse 3-D FFTs (potential gradient in x, y, z),
///   each two pencil transposes: MPI_Alltoall in the pencil grid's rows and then columns,
///   block = particles_per_rank complex doubles / group size;
/// - two 8 B allreduces (global particle count and diagnostics).
///
/// Pattern: Habib et al., "HACC: Extreme Scaling and Performance Across Diverse Architectures"
/// (SC'13) and the SWFFT / HACC I/O kernels (pencil alltoalls in two Cartesian
/// sub-communicators, 26-neighbour overload exchange).
///
/// Parameters: `particles_per_rank`, `overload` (zone depth in particle spacings), `iterations`
/// (long-range steps), `compute_us` per step (short-range force, after the FFTs).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct HaccParams {
    particles_per_rank: u64,
    overload: u32,
    iterations: u32,
    compute_us: f64,
}

pub(super) struct Hacc {
    p: HaccParams,
    blocks: Grid,
    pencils: Grid,
    /// Message bytes by the number of non-zero components of the offset (1 face, 2 edge, 3 corner).
    bytes: [u64; 4],
}

const HACC_PARTICLE_BYTES: u64 = 32;

impl Hacc {
    pub(super) fn new(p: HaccParams, size: u32) -> Result<Hacc, String> {
        check_compute("hacc", p.compute_us)?;
        let l = (p.particles_per_rank as f64).cbrt().round() as u64;
        let d = (p.overload as u64).min(l);
        let bytes = [0, l * l * d, l * d * d, d * d * d].map(|n| n * HACC_PARTICLE_BYTES);
        Ok(Hacc { p, blocks: Grid::new(dims_create(size, 3)), pencils: Grid::new(dims_create(size, 2)), bytes })
    }

    /// The 26 neighbour offsets, in a fixed order.
    fn offsets() -> impl Iterator<Item = [i64; 3]> {
        (0..27).filter(|&i| i != 13).map(|i| [i / 9 - 1, (i / 3) % 3 - 1, i % 3 - 1])
    }

    fn neighbor(&self, rank: u32, o: [i64; 3]) -> u32 {
        let mut r = rank;
        for (d, &delta) in o.iter().enumerate() {
            if delta != 0 {
                r = self.blocks.shift(r, d, delta, true).unwrap();
            }
        }
        r
    }
}

impl Program for Hacc {
    fn iterations(&self) -> u32 {
        self.p.iterations
    }
    fn iteration(&mut self, rank: u32, iter: u32, out: &mut Vec<Op>) {
        let before = out.len();
        for (i, o) in Hacc::offsets().enumerate() {
            let from = self.neighbor(rank, o.map(|x| -x));
            if from != rank {
                out.push(Op::irecv(from, tag(iter, 0, i as u32)));
            }
        }
        for (i, o) in Hacc::offsets().enumerate() {
            let to = self.neighbor(rank, o);
            if to != rank {
                let nonzero = o.iter().filter(|&&x| x != 0).count();
                out.push(Op::isend(to, self.bytes[nonzero], tag(iter, 0, i as u32)));
            }
        }
        wait_if_any(out, before);
        let local = self.p.particles_per_rank * 16;
        for _fft in 0..4 {
            for g in [self.pencils.group(1), self.pencils.group(0)] {
                collective(out, CollectiveKind::Alltoall, div_ceil(local, g.size as u64), g);
            }
        }
        compute(out, self.p.compute_us);
        let world = Group::world(self.blocks.strides[0] * self.blocks.dims[0]);
        collective(out, CollectiveKind::Allreduce, 8, world);
        collective(out, CollectiveKind::Allreduce, 8, world);
    }
}

#[cfg(test)]
mod tests {
    use crate::mpi::program::CollectiveKind::*;
    use crate::mpi::skeletons::tests::{config, totals};

    #[test]
    fn hacc_bytes() {
        // 4096 particles: L = 16, d = 2; P = 64: 4 x 4 x 4 blocks, 26 distinct neighbours.
        let (b, m, c) = totals(&config("hacc"), 64, 0);
        let per_rank = 32 * (6 * 16 * 16 * 2 + 12 * 16 * 4 + 8 * 8);
        assert_eq!((b, m), (64 * per_rank, 64 * 26));
        let mut want = Vec::new();
        for _ in 0..4 {
            want.extend([(Alltoall, 4096 * 16 / 8, 8), (Alltoall, 4096 * 16 / 8, 8)]);
        }
        want.extend([(Allreduce, 8, 64), (Allreduce, 8, 64)]);
        assert_eq!(c, want);
        // 1 rank: everything wraps to itself.
        assert_eq!(totals(&config("hacc"), 1, 0).1, 0);
    }
}
