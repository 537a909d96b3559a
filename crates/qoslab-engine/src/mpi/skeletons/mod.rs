//! Application skeletons: communication structures that follow real codes (not the codes).
//!
//! Each skeleton reproduces, per iteration, the pattern of messages of an application: who talks
//! to whom, how the message sizes follow from the problem size, which collectives run over which
//! sub-communicators, and where the compute phases sit. None computes anything. docs/skeletons.md
//! gives every skeleton's per-iteration message counts and byte formulas; the doc comment of each
//! skeleton's generator says where its pattern comes from.
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
//!
//! One file per skeleton (its `kind` in parentheses); `common.rs` holds what they share (tags,
//! compute and collective ops, parameter checks, `Grid` and `post_axis`, the NAS classes):
//! - `milc.rs` (`milc`), `pf3d.rs` (`pf3d`), `qbox.rs` (`qbox`), `crystal_router.rs`
//!   (`crystal-router`), `hacc.rs` (`hacc`), `miniamr.rs` (`miniamr`), `cpmd.rs` (`cpmd`);
//! - `nas_ft.rs`, `nas_cg.rs`, `nas_mg.rs`, `nas_bt.rs` (`nas-ft`, `nas-cg`, `nas-mg`, `nas-bt`).

mod common;
mod cpmd;
mod crystal_router;
mod hacc;
mod milc;
mod miniamr;
mod nas_bt;
mod nas_cg;
mod nas_ft;
mod nas_mg;
mod pf3d;
mod qbox;

use super::workloads::{params, JobShape, Program};
use common::NasParams;
use cpmd::{Cpmd, CpmdParams};
use crystal_router::{CrystalRouter, CrystalRouterParams};
use hacc::{Hacc, HaccParams};
use milc::{Milc, MilcParams};
use miniamr::{MiniAmr, MiniAmrParams};
use nas_bt::NasBt;
use nas_cg::NasCg;
use nas_ft::NasFt;
use nas_mg::NasMg;
use pf3d::{Pf3d, Pf3dParams};
use qbox::{Qbox, QboxParams};

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mpi::program::{CollectiveKind, Op};
    use serde_json::json;
    use std::collections::HashMap;

    const SIZES: [u32; 8] = [1, 2, 3, 7, 16, 64, 100, 128];

    /// A small configuration of every skeleton (the integration test and byte checks use these).
    fn configs() -> Vec<serde_json::Value> {
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
                                Op::Irecv { peer, tag, .. } => {
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
    pub(super) fn totals(v: &serde_json::Value, size: u32, iter: u32) -> (u64, u64, Vec<(CollectiveKind, u64, u32)>) {
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

    pub(super) fn with(v: serde_json::Value, key: &str, x: serde_json::Value) -> serde_json::Value {
        let mut v = v;
        v[key] = x;
        v
    }

    pub(super) fn config(kind: &str) -> serde_json::Value {
        configs().into_iter().find(|v| v["kind"] == kind).unwrap()
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
