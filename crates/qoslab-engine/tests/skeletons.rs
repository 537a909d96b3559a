//! Every application skeleton runs to completion through the engine, on power-of-two and
//! awkward job sizes, and leaves nothing in the fabric. (The unit tests in
//! src/mpi/skeletons/ check message balance and byte formulas without the fabric.)

mod common;

use common::{assert_drained, config, job, run, with_collectives};
use qoslab_engine::{RunStatus, Simulation};
use serde_json::{json, Value};

/// Small configurations of every skeleton (1-2 iterations, small sizes).
fn skeletons() -> Vec<Value> {
    vec![
        json!({"kind": "milc", "local_lattice": 4, "naik": true, "cg_iterations": 2, "iterations": 2, "compute_us": 1.0}),
        json!({"kind": "pf3d", "nx": 16, "ny": 16, "nz": 8, "iterations": 2, "compute_us": 1.0}),
        json!({"kind": "qbox", "states": 8, "plane_waves": 2000, "fft_grid": 16, "iterations": 1, "compute_us": 1.0}),
        json!({"kind": "crystal-router", "bytes": 40000, "iterations": 2, "compute_us": 1.0}),
        json!({"kind": "nas-ft", "class": "S", "iterations": 1, "compute_us": 1.0}),
        json!({"kind": "nas-cg", "class": "S", "iterations": 1, "compute_us": 1.0}),
        json!({"kind": "nas-mg", "class": "S", "iterations": 2, "compute_us": 1.0}),
        json!({"kind": "nas-bt", "class": "S", "iterations": 2, "compute_us": 1.0}),
        json!({"kind": "hacc", "particles_per_rank": 4096, "overload": 2, "iterations": 2, "compute_us": 1.0}),
        json!({"kind": "miniamr", "block_cells": 4, "blocks_per_dim": 2, "variables": 8, "stages_per_step": 3,
               "checksum_every": 2, "refine_every": 1, "iterations": 2, "compute_us": 1.0}),
        json!({"kind": "cpmd", "states": 4, "fft_grid": 16, "atoms": 8, "iterations": 1, "compute_us": 1.0}),
    ]
}

#[test]
fn every_skeleton_completes_and_leaves_the_fabric_empty() {
    // 16 ranks on 16 hosts (power of two, square), 24 ranks on 12 hosts x 2 (neither, with
    // shared-memory neighbours), 32 ranks on 32 hosts (power of two, not square).
    let layouts: [(Vec<u32>, u32, &str, &str); 3] = [
        ((0..16).collect(), 1, "recursive-doubling", "pairwise"),
        ((0..12).collect(), 2, "ring", "bruck"),
        ((0..32).collect(), 1, "recursive-doubling", "bruck"),
    ];
    for w in skeletons() {
        for (hosts, rpn, allreduce, alltoall) in &layouts {
            let ranks = hosts.len() as u32 * rpn;
            let (sim, s) =
                run(config(json!([with_collectives(job("j", hosts.clone(), *rpn, w.clone()), allreduce, alltoall)])));
            assert_eq!(*sim.status(), RunStatus::Completed, "{w} on {ranks} ranks: {:?}", sim.status());
            let j = &s["jobs"]["j"];
            assert_eq!(j["completed"], true, "{w} on {ranks} ranks");
            assert_eq!(j["runs_completed"], 1, "{w}");
            assert_eq!(j["iterations"], w["iterations"], "{w}");
            assert!(j["messages_sent"].as_u64().unwrap() > 0, "{w} on {ranks} ranks sent nothing");
            assert_drained(&s, &format!("{w} on {ranks} ranks"));
        }
    }
}

#[test]
fn two_skeletons_share_the_fabric() {
    // Interference: a NAS FT job and a HACC job side by side, both completing.
    let ft =
        job("ft", (0..16).collect(), 1, json!({"kind": "nas-ft", "class": "S", "iterations": 2, "compute_us": 0.0}));
    let hacc = job(
        "hacc",
        (16..32).collect(),
        1,
        json!({"kind": "hacc", "particles_per_rank": 32768, "overload": 3, "iterations": 2, "compute_us": 0.0}),
    );
    let (sim, s) = run(config(json!([ft, hacc])));
    assert_eq!(*sim.status(), RunStatus::Completed, "{:?}", sim.status());
    assert_eq!(s["jobs"]["ft"]["completed"], true);
    assert_eq!(s["jobs"]["hacc"]["completed"], true);
    assert_drained(&s, "ft beside hacc");
}

#[test]
fn a_bad_skeleton_parameter_is_a_config_error_naming_the_job() {
    let bad = job("j", vec![0, 1], 1, json!({"kind": "nas-mg", "class": "Q", "iterations": 1, "compute_us": 0.0}));
    let err = Simulation::new(config(json!([bad]))).err().expect("class Q rejected");
    let text = format!("{err:?}");
    assert!(text.contains("jobs[0].workload") && text.contains("Q"), "{text}");
}
