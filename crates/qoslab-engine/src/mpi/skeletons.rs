//! Application skeletons: communication structures that follow real codes (not the codes).
//!
//! Each skeleton reproduces, per iteration, the pattern of messages of an application: who talks
//! to whom, how the message sizes follow from the problem size, which collectives run over which
//! sub-communicators, and where the compute phases sit. None computes anything. docs/skeletons.md
//! gives every skeleton's per-iteration message counts and byte formulas; the doc comments here
//! say where each pattern comes from.
//!
//! Conventions shared by all skeletons:
//! - Process grids come from `dims_create` (MPI_Dims_create, largest dimension first) and are
//!   row-major (the last dimension varies fastest), so any job size works; a prime job size gives
//!   a 1-D grid.
//! - Every rank of a job issues the same sequence of collectives (sub-communicator collectives
//!   run in every row/column at once), as MPI requires.
//! - Point-to-point tags encode (iteration parity, exchange phase, message): consecutive phases
//!   never share a tag, so a fast message cannot match the receive of an earlier phase.
//! - Parameters have no defaults here: Python (python/qoslab/skeletons.py) resolves them and the
//!   engine deserializes every one with `deny_unknown_fields`.

use super::program::{CollectiveKind, Group, Op};
use super::workloads::{dims_create, params, JobShape, Program};
use crate::units::us_to_ps;
use serde::Deserialize;

/// Builds the generator for a skeleton kind, or None if the kind is not a skeleton.
pub fn build(kind: &str, p: &serde_json::Value, shape: JobShape) -> Option<Result<Box<dyn Program>, String>> {
    fn boxed<T: Program + 'static>(r: Result<T, String>) -> Result<Box<dyn Program>, String> {
        r.map(|g| Box::new(g) as Box<dyn Program>)
    }
    let size = shape.size;
    Some(match kind {
        "milc" => boxed(params::<MilcParams>(kind, p).and_then(|p| Milc::new(p, size))),
        "pf3d" => boxed(params::<Pf3dParams>(kind, p).and_then(|p| Pf3d::new(p, size))),
        "qbox" => boxed(params::<QboxParams>(kind, p).and_then(|p| Qbox::new(p, size))),
        "crystal-router" => boxed(params::<CrystalRouterParams>(kind, p).and_then(|p| CrystalRouter::new(p, size))),
        "nas-ft" => boxed(params::<NasParams>(kind, p).and_then(|p| NasFt::new(p, size))),
        "nas-cg" => boxed(params::<NasParams>(kind, p).and_then(|p| NasCg::new(p, size))),
        "nas-mg" => boxed(params::<NasParams>(kind, p).and_then(|p| NasMg::new(p, size))),
        "nas-bt" => boxed(params::<NasParams>(kind, p).and_then(|p| NasBt::new(p, size))),
        "hacc" => boxed(params::<HaccParams>(kind, p).and_then(|p| Hacc::new(p, size))),
        "miniamr" => boxed(params::<MiniAmrParams>(kind, p).and_then(|p| MiniAmr::new(p, size))),
        "cpmd" => boxed(params::<CpmdParams>(kind, p).and_then(|p| Cpmd::new(p, size))),
        _ => return None,
    })
}

// ---------------------------------------------------------------------------------------------
// Shared helpers

/// Tag of message `local` (< 32) of exchange phase `phase` of iteration `iter`. Both sides of a
/// message agree on the phase; adjacent phases and iterations never share a tag.
fn tag(iter: u32, phase: u32, local: u32) -> u32 {
    debug_assert!(local < 32);
    ((iter & 1) << 30) | ((phase & ((1 << 25) - 1)) << 5) | local
}

fn compute(out: &mut Vec<Op>, us: f64) {
    if us > 0.0 {
        out.push(Op::Compute { ps: us_to_ps(us) });
    }
}

fn collective(out: &mut Vec<Op>, kind: CollectiveKind, bytes: u64, group: Group) {
    out.push(Op::Collective { kind, bytes, group });
}

fn check_compute(kind: &str, us: f64) -> Result<(), String> {
    if us.is_finite() && us >= 0.0 {
        Ok(())
    } else {
        Err(format!("workload {kind:?}: compute_us must be a finite number >= 0"))
    }
}

fn check_positive(kind: &str, name: &str, v: u32) -> Result<(), String> {
    if v >= 1 {
        Ok(())
    } else {
        Err(format!("workload {kind:?}: {name} must be at least 1"))
    }
}

fn div_ceil(a: u64, b: u64) -> u64 {
    a.div_ceil(b.max(1))
}

/// A row-major process grid (the last dimension varies fastest).
#[derive(Debug, Clone)]
struct Grid {
    dims: Vec<u32>,
    strides: Vec<u32>,
}

impl Grid {
    fn new(dims: Vec<u32>) -> Grid {
        let mut strides = vec![1; dims.len()];
        for i in (0..dims.len().saturating_sub(1)).rev() {
            strides[i] = strides[i + 1] * dims[i + 1];
        }
        Grid { dims, strides }
    }

    fn coord(&self, rank: u32, d: usize) -> u32 {
        (rank / self.strides[d]) % self.dims[d]
    }

    /// The rank `delta` steps along dimension `d`; None past the edge of a non-periodic grid.
    fn shift(&self, rank: u32, d: usize, delta: i64, periodic: bool) -> Option<u32> {
        let n = self.dims[d] as i64;
        let c = self.coord(rank, d) as i64;
        let to = c + delta;
        let to = if periodic {
            to.rem_euclid(n)
        } else if (0..n).contains(&to) {
            to
        } else {
            return None;
        };
        Some((rank as i64 + (to - c) * self.strides[d] as i64) as u32)
    }

    /// The sub-communicator of the ranks that differ from the caller only along dimension `d`.
    fn group(&self, d: usize) -> Group {
        Group { stride: self.strides[d], size: self.dims[d] }
    }
}

/// One exchange along dimension `d` of a grid: a message of `bytes` to each neighbour (both
/// directions), receives from both; no WaitAll. Dimensions of one rank are local copies (no
/// message); on a periodic dimension of 2 both messages go to the same rank (distinct tags).
/// Uses local tags `2 * slot` and `2 * slot + 1`.
#[allow(clippy::too_many_arguments)]
fn post_axis(
    out: &mut Vec<Op>,
    grid: &Grid,
    rank: u32,
    d: usize,
    periodic: bool,
    bytes: (u64, u64),
    iter: u32,
    phase: u32,
    slot: u32,
) {
    if grid.dims[d] <= 1 {
        return;
    }
    let up = grid.shift(rank, d, 1, periodic);
    let down = grid.shift(rank, d, -1, periodic);
    // Tag 2*slot travels upwards (+d), tag 2*slot+1 downwards.
    if let Some(down) = down {
        out.push(Op::Irecv { peer: down, tag: tag(iter, phase, 2 * slot) });
    }
    if let Some(up) = up {
        out.push(Op::Irecv { peer: up, tag: tag(iter, phase, 2 * slot + 1) });
    }
    if let Some(up) = up {
        out.push(Op::Isend { peer: up, bytes: bytes.0, tag: tag(iter, phase, 2 * slot) });
    }
    if let Some(down) = down {
        out.push(Op::Isend { peer: down, bytes: bytes.1, tag: tag(iter, phase, 2 * slot + 1) });
    }
}

fn wait_if_any(out: &mut Vec<Op>, before: usize) {
    if out.len() > before {
        out.push(Op::WaitAll);
    }
}

/// NAS Parallel Benchmarks problem classes (NPB 3.4 sizes).
#[derive(Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
enum NasClass {
    S,
    W,
    A,
    B,
    C,
    D,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NasParams {
    class: NasClass,
    iterations: u32,
    compute_us: f64,
}

// ---------------------------------------------------------------------------------------------
// MILC

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
struct MilcParams {
    local_lattice: u32,
    naik: bool,
    cg_iterations: u32,
    iterations: u32,
    compute_us: f64,
}

struct Milc {
    p: MilcParams,
    grid: Grid,
    /// One-link message bytes (one parity of an L^3 face, 48 B per site).
    one_link: u64,
}

/// Bytes of an su3_vector in double precision (3 complex numbers).
const SU3_VECTOR_BYTES: u64 = 48;

impl Milc {
    fn new(p: MilcParams, size: u32) -> Result<Milc, String> {
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

// ---------------------------------------------------------------------------------------------
// pF3D

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
struct Pf3dParams {
    nx: u32,
    ny: u32,
    nz: u32,
    iterations: u32,
    compute_us: f64,
}

struct Pf3d {
    p: Pf3dParams,
    grid: Grid,
}

/// Single-precision complex.
const COMPLEX_FLOAT: u64 = 8;

impl Pf3d {
    fn new(p: Pf3dParams, size: u32) -> Result<Pf3d, String> {
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

// ---------------------------------------------------------------------------------------------
// Qbox

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
struct QboxParams {
    states: u32,
    plane_waves: u64,
    fft_grid: u32,
    iterations: u32,
    compute_us: f64,
}

struct Qbox {
    p: QboxParams,
    grid: Grid,
}

impl Qbox {
    fn new(p: QboxParams, size: u32) -> Result<Qbox, String> {
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

// ---------------------------------------------------------------------------------------------
// Crystal router

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
struct CrystalRouterParams {
    bytes: u64,
    iterations: u32,
    compute_us: f64,
}

struct CrystalRouter {
    p: CrystalRouterParams,
    size: u32,
}

impl CrystalRouter {
    fn new(p: CrystalRouterParams, size: u32) -> Result<CrystalRouter, String> {
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
                    out.push(Op::Irecv { peer: mid + o, tag: t });
                }
                let bytes = share(self.p.bytes, upper, n);
                out.push(Op::Isend { peer: mid + o.min(upper - 1), bytes, tag: t });
                n = lower;
            } else {
                let o = rank - mid;
                out.push(Op::Irecv { peer: base + o, tag: t });
                if lower > upper && o == upper - 1 {
                    out.push(Op::Irecv { peer: mid - 1, tag: t });
                }
                let bytes = share(self.p.bytes, lower, n);
                out.push(Op::Isend { peer: base + o, bytes, tag: t });
                base = mid;
                n = upper;
            }
            out.push(Op::WaitAll);
            stage += 1;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// NAS FT

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
struct NasFt {
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
    fn new(p: NasParams, size: u32) -> Result<NasFt, String> {
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

// ---------------------------------------------------------------------------------------------
// NAS CG

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
struct NasCg {
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
    fn new(p: NasParams, size: u32) -> Result<NasCg, String> {
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
                out.extend([
                    Op::Irecv { peer: partner, tag: t },
                    Op::Isend { peer: partner, bytes: self.piece, tag: t },
                    Op::WaitAll,
                ]);
            }
        }
        // Transpose: (row r, column c) sends to the rank at row-major index c * nprows + r.
        let (r, c) = (rank / npcols, rank % npcols);
        let to = c * nprows + r;
        let from = (rank % nprows) * npcols + rank / nprows;
        if to != rank {
            let t = tag(iter, phase, 31);
            out.extend([
                Op::Irecv { peer: from, tag: t },
                Op::Isend { peer: to, bytes: self.piece, tag: t },
                Op::WaitAll,
            ]);
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

// ---------------------------------------------------------------------------------------------
// NAS MG

/// NAS MG (NPB 3.4, mg.f): V-cycle multigrid on a periodic N^3 grid over a `dims_create(P, 3)`
/// process grid. Every smoothing/restriction/residual step ends with `comm3`: ghost exchange
/// axis by axis (x, then y, then z, waiting in between), both neighbours per axis; the faces
/// include the ghost layers of the axes already exchanged: x face ly*lz, y face (lx+2)*lz,
/// z face (lx+2)*(ly+2) doubles, with (lx, ly, lz) the local extents at that level (2^k / dims,
/// at least 1). Per iteration, with L = log2 N: restriction down levels L-1..1 (one comm3 each),
/// psinv at level 1, then per level 2..L-1 resid + psinv (two each), resid + psinv at L, and the
/// main loop's resid at L: 3L - 1 comm3 calls, faces shrinking 4x per level down and growing
/// back up; then norm2u3's two allreduces (sum and max, 8 B). Coarse levels smaller than the
/// process grid keep one point per rank (NPB instead idles ranks there).
/// N per class: S 32, W 128, A 256, B 256, C 512, D 1024; NITER: S/W/A 4, B/C 20, D 50.
///
/// Parameters: `class`, `iterations`, `compute_us` per iteration (spread over the comm3 calls in
/// proportion to their level's points).
struct NasMg {
    p: NasParams,
    grid: Grid,
    /// The level of each comm3 call of an iteration, in order.
    levels: Vec<u32>,
    /// Compute before each comm3 call.
    work_us: Vec<f64>,
}

fn mg_n(class: NasClass) -> u64 {
    match class {
        NasClass::S => 32,
        NasClass::W => 128,
        NasClass::A | NasClass::B => 256,
        NasClass::C => 512,
        NasClass::D => 1024,
    }
}

fn mg_levels(top: u32) -> Vec<u32> {
    let mut levels: Vec<u32> = (1..top).rev().collect();
    levels.push(1);
    for k in 2..top {
        levels.extend([k, k]);
    }
    levels.extend([top, top, top]);
    levels
}

impl NasMg {
    fn new(p: NasParams, size: u32) -> Result<NasMg, String> {
        check_compute("nas-mg", p.compute_us)?;
        let top = mg_n(p.class).trailing_zeros();
        let levels = mg_levels(top);
        let weight = |k: u32| 8f64.powi(k as i32 - top as i32);
        let total: f64 = levels.iter().map(|&k| weight(k)).sum();
        let work_us = levels.iter().map(|&k| p.compute_us * weight(k) / total).collect();
        Ok(NasMg { p, grid: Grid::new(dims_create(size, 3)), levels, work_us })
    }

    /// Local extents (x, y, z) at level k.
    fn extents(&self, k: u32) -> (u64, u64, u64) {
        let n = 1u64 << k;
        let e = |d: usize| div_ceil(n, self.grid.dims[d] as u64).max(1);
        (e(2), e(1), e(0))
    }

    /// Face bytes (x, y, z) of a comm3 at level k.
    fn faces(&self, k: u32) -> [u64; 3] {
        let (lx, ly, lz) = self.extents(k);
        [ly * lz * 8, (lx + 2) * lz * 8, (lx + 2) * (ly + 2) * 8]
    }
}

impl Program for NasMg {
    fn iterations(&self) -> u32 {
        self.p.iterations
    }
    fn iteration(&mut self, rank: u32, iter: u32, out: &mut Vec<Op>) {
        for (call, &k) in self.levels.iter().enumerate() {
            compute(out, self.work_us[call]);
            let faces = self.faces(k);
            // x is the fastest grid dimension (2), z the slowest (0).
            for (axis, d) in [2usize, 1, 0].into_iter().enumerate() {
                let before = out.len();
                let b = faces[axis];
                post_axis(out, &self.grid, rank, d, true, (b, b), iter, call as u32 * 3 + axis as u32, 0);
                wait_if_any(out, before);
            }
        }
        let world = Group::world(self.grid.strides[0] * self.grid.dims[0]);
        collective(out, CollectiveKind::Allreduce, 8, world);
        collective(out, CollectiveKind::Allreduce, 8, world);
    }
}

// ---------------------------------------------------------------------------------------------
// NAS BT

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
struct NasBt {
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
    fn new(p: NasParams, size: u32) -> Result<NasBt, String> {
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
            out.push(Op::Irecv { peer: pred, tag: tag(iter, 0, 2 * d as u32) });
            out.push(Op::Irecv { peer: succ, tag: tag(iter, 0, 2 * d as u32 + 1) });
        }
        for d in 0..3 {
            let (succ, pred) = self.neighbors(rank, d);
            out.push(Op::Isend { peer: succ, bytes: copy, tag: tag(iter, 0, 2 * d as u32) });
            out.push(Op::Isend { peer: pred, bytes: copy, tag: tag(iter, 0, 2 * d as u32 + 1) });
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
                        out.push(Op::Irecv { peer: from, tag: tag(iter, phase, 0) });
                        out.push(Op::WaitAll);
                    }
                    compute(out, cell_us);
                    if stage < q - 1 {
                        out.push(Op::Isend { peer: to, bytes, tag: tag(iter, phase, 0) });
                    }
                }
            }
        }
        out.push(Op::WaitAll);
    }
}

// ---------------------------------------------------------------------------------------------
// HACC

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
struct HaccParams {
    particles_per_rank: u64,
    overload: u32,
    iterations: u32,
    compute_us: f64,
}

struct Hacc {
    p: HaccParams,
    blocks: Grid,
    pencils: Grid,
    /// Message bytes by the number of non-zero components of the offset (1 face, 2 edge, 3 corner).
    bytes: [u64; 4],
}

const HACC_PARTICLE_BYTES: u64 = 32;

impl Hacc {
    fn new(p: HaccParams, size: u32) -> Result<Hacc, String> {
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
                out.push(Op::Irecv { peer: from, tag: tag(iter, 0, i as u32) });
            }
        }
        for (i, o) in Hacc::offsets().enumerate() {
            let to = self.neighbor(rank, o);
            if to != rank {
                let nonzero = o.iter().filter(|&&x| x != 0).count();
                out.push(Op::Isend { peer: to, bytes: self.bytes[nonzero], tag: tag(iter, 0, i as u32) });
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

// ---------------------------------------------------------------------------------------------
// miniAMR

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
struct MiniAmrParams {
    block_cells: u32,
    blocks_per_dim: u32,
    variables: u32,
    stages_per_step: u32,
    checksum_every: u32,
    refine_every: u32,
    iterations: u32,
    compute_us: f64,
}

struct MiniAmr {
    p: MiniAmrParams,
    grid: Grid,
    world: Group,
}

impl MiniAmr {
    fn new(p: MiniAmrParams, size: u32) -> Result<MiniAmr, String> {
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

// ---------------------------------------------------------------------------------------------
// CPMD

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
struct CpmdParams {
    states: u32,
    fft_grid: u32,
    atoms: u32,
    iterations: u32,
    compute_us: f64,
}

struct Cpmd {
    p: CpmdParams,
    size: u32,
}

impl Cpmd {
    fn new(p: CpmdParams, size: u32) -> Result<Cpmd, String> {
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

// ---------------------------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::collections::HashMap;

    pub const SIZES: [u32; 8] = [1, 2, 3, 7, 16, 64, 100, 128];

    /// A small configuration of every skeleton (the integration test and byte checks use these).
    pub fn configs() -> Vec<serde_json::Value> {
        vec![
            json!({"kind": "milc", "local_lattice": 4, "naik": true, "cg_iterations": 2, "iterations": 2, "compute_us": 1.0}),
            json!({"kind": "pf3d", "nx": 16, "ny": 16, "nz": 8, "iterations": 2, "compute_us": 1.0}),
            json!({"kind": "qbox", "states": 8, "plane_waves": 2000, "fft_grid": 16, "iterations": 2, "compute_us": 1.0}),
            json!({"kind": "crystal-router", "bytes": 10000, "iterations": 2, "compute_us": 1.0}),
            json!({"kind": "nas-ft", "class": "S", "iterations": 2, "compute_us": 1.0}),
            json!({"kind": "nas-cg", "class": "S", "iterations": 2, "compute_us": 1.0}),
            json!({"kind": "nas-mg", "class": "S", "iterations": 2, "compute_us": 1.0}),
            json!({"kind": "nas-bt", "class": "S", "iterations": 2, "compute_us": 1.0}),
            json!({"kind": "hacc", "particles_per_rank": 4096, "overload": 2, "iterations": 2, "compute_us": 1.0}),
            json!({"kind": "miniamr", "block_cells": 4, "blocks_per_dim": 2, "variables": 4, "stages_per_step": 3,
                   "checksum_every": 2, "refine_every": 1, "iterations": 3, "compute_us": 1.0}),
            json!({"kind": "cpmd", "states": 6, "fft_grid": 16, "atoms": 4, "iterations": 2, "compute_us": 1.0}),
        ]
    }

    fn make(v: &serde_json::Value, size: u32) -> Box<dyn Program> {
        let kind = v["kind"].as_str().unwrap();
        let mut p = v.clone();
        p.as_object_mut().unwrap().remove("kind");
        let shape = JobShape {
            size,
            ranks_per_node: 1,
            rng: crate::traffic::stream_rng(1, 99, 0),
            named_rng: crate::traffic::stream_rng(1, 98, 0),
        };
        build(kind, &p, shape).expect("a skeleton kind").unwrap_or_else(|e| panic!("{kind}: {e}"))
    }

    /// Every rank's ops of one iteration.
    fn generate(g: &mut dyn Program, size: u32, iter: u32) -> Vec<Vec<Op>> {
        (0..size)
            .map(|r| {
                let mut out = Vec::new();
                g.iteration(r, iter, &mut out);
                out
            })
            .collect()
    }

    #[test]
    fn every_send_has_a_matching_receive_and_collectives_agree() {
        for v in configs() {
            for size in SIZES {
                let mut g = make(&v, size);
                for iter in 0..g.iterations() {
                    let ops = generate(g.as_mut(), size, iter);
                    // (src, dst, tag) -> sends minus receives.
                    let mut balance: HashMap<(u32, u32, u32), i64> = HashMap::new();
                    for (r, rank_ops) in ops.iter().enumerate() {
                        for op in rank_ops {
                            match *op {
                                Op::Isend { peer, tag, .. } => {
                                    assert!(peer < size && peer != r as u32, "{v} P={size}: rank {r} sends to {peer}");
                                    assert!(tag < crate::mpi::program::COLLECTIVE_TAG_BASE);
                                    *balance.entry((r as u32, peer, tag)).or_default() += 1;
                                }
                                Op::Irecv { peer, tag } => {
                                    assert!(
                                        peer < size && peer != r as u32,
                                        "{v} P={size}: rank {r} receives from {peer}"
                                    );
                                    *balance.entry((peer, r as u32, tag)).or_default() -= 1;
                                }
                                _ => {}
                            }
                        }
                        // Everything sent or received is waited for within the iteration.
                        let last_wait = rank_ops.iter().rposition(|o| *o == Op::WaitAll);
                        let last_p2p = rank_ops.iter().rposition(|o| matches!(o, Op::Isend { .. } | Op::Irecv { .. }));
                        if let Some(p) = last_p2p {
                            assert!(last_wait.is_some_and(|w| w > p), "{v} P={size} rank {r}: unwaited requests");
                        }
                    }
                    let bad: Vec<_> = balance.iter().filter(|(_, &n)| n != 0).collect();
                    assert!(bad.is_empty(), "{v} P={size} iter {iter}: unbalanced {:?}", &bad[..bad.len().min(5)]);
                    // Every rank calls the same collectives in the same order, groups within the job.
                    let colls = |o: &Vec<Op>| {
                        o.iter().filter(|op| matches!(op, Op::Collective { .. })).copied().collect::<Vec<_>>()
                    };
                    let first = colls(&ops[0]);
                    for (r, rank_ops) in ops.iter().enumerate() {
                        assert_eq!(colls(rank_ops), first, "{v} P={size}: rank {r}'s collectives differ");
                    }
                    for c in &first {
                        if let Op::Collective { group, .. } = c {
                            assert!(
                                group.size >= 1 && group.stride * group.size <= size.max(1),
                                "{v} P={size}: {group:?}"
                            );
                            assert_eq!(size % (group.stride * group.size), 0, "{v} P={size}: {group:?}");
                        }
                    }
                }
            }
        }
    }

    /// (point-to-point bytes summed over all ranks, point-to-point messages, collectives as
    /// (kind, bytes, group size)) of one iteration.
    fn totals(v: &serde_json::Value, size: u32, iter: u32) -> (u64, u64, Vec<(CollectiveKind, u64, u32)>) {
        let mut g = make(v, size);
        let ops = generate(g.as_mut(), size, iter);
        let (mut bytes, mut messages) = (0, 0);
        for op in ops.iter().flatten() {
            if let Op::Isend { bytes: b, .. } = op {
                bytes += b;
                messages += 1;
            }
        }
        let colls = ops[0]
            .iter()
            .filter_map(|op| match op {
                Op::Collective { kind, bytes, group } => Some((*kind, *bytes, group.size)),
                _ => None,
            })
            .collect();
        (bytes, messages, colls)
    }

    fn with(v: serde_json::Value, key: &str, x: serde_json::Value) -> serde_json::Value {
        let mut v = v;
        v[key] = x;
        v
    }

    fn config(kind: &str) -> serde_json::Value {
        configs().into_iter().find(|v| v["kind"] == kind).unwrap()
    }

    use CollectiveKind::*;

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

    #[test]
    fn pf3d_bytes() {
        // P = 64: grid [4, 4, 4]; local field 16*16*8*8 B = 16384 B; z plane 2048 B.
        let (b, m, c) = totals(&config("pf3d"), 64, 0);
        // z neighbours: ranks at z = 0 and z = 3 have one, the others two (non-periodic).
        let z_messages = 16 * (1 + 2 + 2 + 1);
        assert_eq!((b, m), (z_messages * 2048, z_messages));
        assert_eq!(c, vec![(Alltoall, 4096, 4); 8]);
    }

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

    #[test]
    fn nas_mg_bytes() {
        // Class S (N = 32, L = 5) on 64 ranks (4 x 4 x 4): levels [4,3,2,1, 1, 2,2,3,3,4,4, 5,5,5].
        let (b, m, c) = totals(&config("nas-mg"), 64, 0);
        let levels = [4, 3, 2, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 5];
        let per_rank: u64 = levels
            .iter()
            .map(|&k| {
                let l = ((1u64 << k) / 4).max(1);
                2 * 8 * (l * l + (l + 2) * l + (l + 2) * (l + 2))
            })
            .sum();
        assert_eq!(b, 64 * per_rank);
        assert_eq!(m, 64 * 14 * 6);
        assert_eq!(c, vec![(Allreduce, 8, 64); 2]);
    }

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

    #[test]
    fn cpmd_bytes() {
        // 6 states = 3 pairs: 3 + 2 + 6 alltoalls of 16^3 * 16 / 8^2 = 1024 B.
        let (b, _, c) = totals(&config("cpmd"), 8, 0);
        assert_eq!(b, 0);
        let mut want = vec![(Alltoall, 1024, 8); 11];
        want.extend([(Allreduce, 36 * 8, 8), (Allreduce, 96, 8), (Bcast, 96, 8)]);
        assert_eq!(c, want);
    }

    #[test]
    fn unknown_and_missing_parameters_are_rejected() {
        let shape = || JobShape {
            size: 4,
            ranks_per_node: 1,
            rng: crate::traffic::stream_rng(1, 99, 0),
            named_rng: crate::traffic::stream_rng(1, 98, 0),
        };
        for v in configs() {
            let kind = v["kind"].as_str().unwrap();
            let mut p = v.clone();
            p.as_object_mut().unwrap().remove("kind");
            let mut extra = p.clone();
            extra["bogus"] = json!(1);
            let err = build(kind, &extra, shape()).unwrap().err().expect("unknown key rejected");
            assert!(err.contains("bogus"), "{err}");
            let mut missing = p.clone();
            missing.as_object_mut().unwrap().remove("iterations");
            assert!(build(kind, &missing, shape()).unwrap().is_err(), "{kind}: missing iterations accepted");
        }
        assert!(build("not-a-skeleton", &json!({}), shape()).is_none());
        let err = build("nas-cg", &json!({"class": "Z", "iterations": 1, "compute_us": 0.0}), shape())
            .unwrap()
            .err()
            .unwrap();
        assert!(err.contains("Z"), "{err}");
    }

    #[test]
    fn generation_is_cheap_at_scale() {
        // 4096 ranks, one iteration of every skeleton: well under a second in total.
        let start = std::time::Instant::now();
        for v in configs() {
            let mut g = make(&v, 4096);
            for r in 0..4096 {
                let mut out = Vec::new();
                g.iteration(r, 0, &mut out);
            }
        }
        assert!(start.elapsed().as_secs_f64() < 5.0);
    }
}
