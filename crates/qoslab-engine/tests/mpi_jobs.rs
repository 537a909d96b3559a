//! MPI jobs end to end through the engine: closed-form ping-pong, collectives completing on
//! every workload, deadlock reporting. (Python's tests cover the scenario layer.)

mod common;

use common::{assert_drained, config, job, run};
use qoslab_engine::{RunStatus, Simulation};
use serde_json::json;

#[test]
fn eager_ping_pong_round_trip_is_twice_the_one_way_latency() {
    // 8 B: 34 wire bytes = 2.72 ns; two links of 20 ns and one switch of 100 ns each way.
    let (_, s) =
        run(config(json!([job("pp", vec![0, 1], 1, json!({"kind": "ping-pong", "bytes": 8, "iterations": 10}))])));
    let runtime = s["jobs"]["pp"]["runtime_us"].as_f64().unwrap();
    let one_way_ns = 2.72 + 2.0 * 20.0 + 100.0;
    assert!((runtime * 1000.0 - 10.0 * 2.0 * one_way_ns).abs() < 1e-6, "runtime {runtime} us");
}

#[test]
fn rendezvous_adds_the_rts_and_cts_crossings() {
    // 64 KiB: 16 packets of 4122 wire bytes; RTS and CTS carry 64 B (90 wire bytes).
    let (_, s) =
        run(config(json!([job("pp", vec![0, 1], 1, json!({"kind": "ping-pong", "bytes": 65536, "iterations": 1}))])));
    let runtime_ns = s["jobs"]["pp"]["runtime_us"].as_f64().unwrap() * 1000.0;
    let path = 2.0 * 20.0 + 100.0;
    let one_way = (90.0 * 0.08 + path) * 2.0 + (16.0 * 4122.0 * 0.08 + path);
    assert!((runtime_ns - 2.0 * one_way).abs() < 1e-6, "runtime {runtime_ns} ns, expected {}", 2.0 * one_way);
}

#[test]
fn every_builtin_workload_completes_and_leaves_the_fabric_empty() {
    let workloads = [
        json!({"kind": "flood-pairs", "bytes": 65536, "messages": 4, "iterations": 2}),
        json!({"kind": "nearest-neighbor", "dims": 3, "bytes": 20000, "iterations": 2, "compute_us": 1.0}),
        json!({"kind": "all-to-all", "bytes": 4096, "iterations": 2, "compute_us": 0.0}),
        json!({"kind": "random-pairs", "bytes": 30000, "iterations": 3, "compute_us": 0.0}),
        json!({"kind": "collective-loop", "collective": "barrier", "bytes": 0, "iterations": 3, "compute_us": 0.0}),
        json!({"kind": "collective-loop", "collective": "bcast", "bytes": 100000, "iterations": 2, "compute_us": 0.0}),
        json!({"kind": "collective-loop", "collective": "reduce", "bytes": 100, "iterations": 2, "compute_us": 0.0}),
        json!({"kind": "collective-loop", "collective": "allgather", "bytes": 1000, "iterations": 2, "compute_us": 0.0}),
        json!({"kind": "collective-loop", "collective": "reduce", "bytes": 100000, "iterations": 2, "compute_us": 0.0, "barrier": true}),
        json!({"kind": "gpcnet-rr-latency", "bytes": 8, "iterations": 5, "outstanding": 1, "iterations_per_ring": 2}),
        json!({"kind": "gpcnet-rr-bandwidth", "bytes": 131072, "iterations": 2, "outstanding": 8, "iterations_per_ring": 1}),
        json!({"kind": "gpcnet-allreduce", "bytes": 8, "iterations": 5}),
        json!({"kind": "gpcnet-alltoall", "bytes": 4096, "iterations": 2}),
        json!({"kind": "gpcnet-incast", "bytes": 4096, "iterations": 2, "messages": 2}),
        json!({"kind": "gpcnet-put-incast", "bytes": 4096, "iterations": 2, "messages": 2}),
        json!({"kind": "gpcnet-get-bcast", "bytes": 4096, "iterations": 2, "messages": 2}),
        json!({"kind": "gpcnet-canaries", "latency_bytes": 8, "latency_rings": 2, "latency_iterations": 3,
               "latency_warmup": 2, "bandwidth_bytes": 131072, "bandwidth_outstanding": 8, "bandwidth_rings": 1,
               "bandwidth_iterations": 2, "bandwidth_warmup": 1, "allreduce_bytes": 8, "allreduce_tests": 2,
               "allreduce_iterations": 3, "allreduce_warmup": 1}),
    ];
    for w in workloads {
        for (allreduce, alltoall) in [("recursive-doubling", "pairwise"), ("ring", "bruck")] {
            // 13 nodes x 2 ranks: an odd, non-power-of-two job with shared-memory neighbours.
            let mut j = job("j", (0..13).collect(), 2, w.clone());
            j["collectives"] = json!({"allreduce": allreduce, "alltoall": alltoall});
            let (sim, s) = run(config(json!([j])));
            assert_eq!(*sim.status(), RunStatus::Completed, "{w}: {:?}", sim.status());
            assert_eq!(s["jobs"]["j"]["completed"], true, "{w}");
            assert_drained(&s, &w.to_string());
        }
    }
}

#[test]
fn a_barrier_before_each_timed_bcast_keeps_the_root_from_racing_ahead() {
    // 4 ranks, 8 B eager: a hop takes 142.72 ns (as in the ping-pong test above); the binomial
    // tree reaches ranks 1 and 2 in one hop, rank 3 in two. The first iteration's barrier ends on
    // every rank at once (all enter it together), so its slowest rank takes exactly two hops.
    // Over 20 iterations the median rank-iteration stays one hop. Without the barrier the root
    // sends every iteration's message at once and the leaves find them waiting.
    let one_way = 2.72 + 2.0 * 20.0 + 100.0;
    let times = |barrier: bool, iterations: u32| {
        let w = json!({"kind": "collective-loop", "collective": "bcast", "bytes": 8, "iterations": iterations,
                       "compute_us": 0.0, "barrier": barrier});
        let (_, s) = run(config(json!([job("b", vec![0, 1, 2, 3], 1, w)])));
        let t = &s["jobs"]["b"]["rank_iteration_ns"];
        (t["p50"].as_f64().unwrap(), t["max"].as_f64().unwrap())
    };
    let (_, first) = times(true, 1);
    assert!((first - 2.0 * one_way).abs() < 1e-6, "slowest rank {first} ns, expected two hops ({} ns)", 2.0 * one_way);
    let (timed, _) = times(true, 20);
    assert!((timed - one_way).abs() < 10.0, "median rank-iteration {timed} ns, expected one hop ({one_way} ns)");
    let (raced, _) = times(false, 20);
    assert!(raced < 0.5 * one_way, "without the barrier the median rank-iteration is {raced} ns");
}

#[test]
fn binomial_bcast_and_reduce_take_lg_p_rendezvous_like_mpich() {
    // MPICH's binomial trees send (bcast) or receive (reduce) one child at a time, each blocking,
    // so a 1 MiB collective on p = 2^L ranks takes L rendezvous of T each: RTS and CTS of 90 wire
    // bytes, then 256 packets of 4122 wire bytes, each leg 140 ns of links and switch. All
    // children's sends at once (the engine before) shared the parent's link: 2x at p = 8.
    let path = 2.0 * 20.0 + 100.0;
    let t = 2.0 * (90.0 * 0.08 + path) + 256.0 * 4122.0 * 0.08 + path;
    for collective in ["bcast", "reduce"] {
        for (p, lg) in [(2u32, 1.0), (4, 2.0), (8, 3.0), (16, 4.0)] {
            let w = json!({"kind": "collective-loop", "collective": collective, "bytes": 1048576, "iterations": 1,
                           "compute_us": 0.0});
            let (_, s) = run(config(json!([job("c", (0..p).collect(), 1, w)])));
            let runtime_ns = s["jobs"]["c"]["runtime_us"].as_f64().unwrap() * 1000.0;
            assert!((runtime_ns - lg * t).abs() < 1e-6, "{collective} p={p}: {runtime_ns} ns, expected {} ns", lg * t);
        }
    }
}

#[test]
fn a_job_that_records_no_iterations_still_runs_and_reports_its_runtime() {
    let w =
        json!({"kind": "collective-loop", "collective": "allreduce", "bytes": 8, "iterations": 4, "compute_us": 0.0});
    let quiet = {
        let mut j = job("quiet", (0..4).collect(), 1, w.clone());
        j["record_iterations"] = json!(false);
        j
    };
    let mut sim = Simulation::new(config(json!([job("loud", (4..8).collect(), 1, w), quiet]))).unwrap();
    sim.run(&mut || false);
    let out = sim.output(false).unwrap();
    let s = &out.summary;
    assert_eq!(s["jobs"]["quiet"]["completed"], true);
    assert!(s["jobs"]["quiet"]["runtime_us"].as_f64().unwrap() > 0.0);
    assert_eq!(s["jobs"]["quiet"]["rank_iteration_ns"]["count"], 0);
    assert_eq!(s["jobs"]["loud"]["rank_iteration_ns"]["count"], 16);
}

#[test]
fn allreduce_algorithms_complete_on_every_job_size() {
    for size in 1..=20u32 {
        for algo in ["recursive-doubling", "ring"] {
            let w = json!({"kind": "collective-loop", "collective": "allreduce", "bytes": 64, "iterations": 2, "compute_us": 0.0});
            let mut j = job("j", (0..size).collect(), 1, w);
            j["collectives"]["allreduce"] = json!(algo);
            let (sim, _) = run(config(json!([j])));
            assert_eq!(*sim.status(), RunStatus::Completed, "size {size} {algo}");
        }
    }
}

#[test]
fn latency_history_does_not_count_a_late_receiver_as_network_latency() {
    use qoslab_engine::mpi::program::{packed, PackedTrace};
    use std::collections::HashMap;
    // Rank 0 sends 10 x 64 KiB (rendezvous), one at a time; rank 1 receives them, computing 20 us
    // before each from the third on. Alone on the switch every transfer takes the same time in
    // the network, so the latency ratio stays 1 and every message stays on SL 0; counting the
    // wait for the late receives as latency promoted messages 6 to 10 to SL 1.
    let (n, bytes) = (10u64, 65536u64);
    let mut r0 = Vec::new();
    let mut r1 = Vec::new();
    for i in 0..n {
        r0.extend([packed::ISEND, 1, bytes, 0, packed::WAITALL, 0, 0, 0]);
        if i >= 2 {
            r1.extend([packed::COMPUTE, 20_000_000, 0, 0]);
        }
        r1.extend([packed::IRECV, 0, 0, 0, packed::WAITALL, 0, 0, 0]);
    }
    let offsets = vec![0, r0.len() as u64 / 4, (r0.len() + r1.len()) as u64 / 4];
    let trace = PackedTrace { offsets, words: [r0, r1].concat(), ..Default::default() };
    let mut j = job("t", vec![0, 1], 1, json!({"kind": "trace"}));
    j["sl_policy"] = json!({"kind": "latency-history", "sls": [0, 1], "thresholds": [2.0], "direction": "promote",
                            "history_messages": 16, "high_bytes_cap": 1.0});
    let mut sim = Simulation::with_traces(config(json!([j])), &HashMap::from([(0, trace)])).unwrap();
    sim.run(&mut || false);
    let s = sim.output(false).unwrap().summary;
    assert_eq!(s["jobs"]["t"]["completed"], true);
    assert_eq!(s["jobs"]["t"]["bytes_by_sl"], json!({"0": n * bytes}));
}

#[test]
fn a_receive_that_can_never_match_is_reported_as_a_deadlock_naming_the_ranks() {
    use qoslab_engine::mpi::program::{packed, PackedTrace};
    use std::collections::HashMap;
    // Rank 0 waits for tag 5 from rank 1, which sends tag 6.
    let words: Vec<u64> = vec![
        packed::IRECV,
        1,
        0,
        5,
        packed::WAITALL,
        0,
        0,
        0, // rank 0
        packed::ISEND,
        0,
        8,
        6,
        packed::WAITALL,
        0,
        0,
        0, // rank 1
    ];
    let trace = PackedTrace { offsets: vec![0, 2, 4], words, ..Default::default() };
    let cfg = config(json!([job("t", vec![0, 1], 1, json!({"kind": "trace"}))]));
    let mut sim = Simulation::with_traces(cfg, &HashMap::from([(0, trace)])).unwrap();
    sim.run(&mut || false);
    match sim.status() {
        RunStatus::Deadlock(text) => {
            assert!(text.contains("job \"t\" rank 0"), "{text}");
            assert!(text.contains("a receive from rank 1 (tag 5)"), "{text}");
        }
        other => panic!("expected a deadlock, got {other:?}"),
    }
}

#[test]
fn trace_collectives_run_on_their_communicators_only() {
    use qoslab_engine::mpi::program::{packed, PackedTrace};
    use std::collections::HashMap;
    // Communicator 1 = {0, 2}, communicator 2 = {3, 1} (rank 3 first). The first pair allreduces
    // twice, the second once (so per-rank collective counts differ), then every rank barriers on
    // the job. Sequence numbers: pair 1's allreduces 0 and 1, pair 2's 2, the barrier 3.
    let (ar, bar) = (3, 0);
    let coll = |kind: u64, bytes: u64, comm: u64, seq: u64| [packed::COLLECTIVE, kind, bytes, comm | seq << 32];
    let programs = [
        vec![coll(ar, 96, 1, 0), coll(ar, 96, 1, 1), coll(bar, 0, 0, 3)],
        vec![coll(ar, 96, 2, 2), coll(bar, 0, 0, 3)],
        vec![coll(ar, 96, 1, 0), coll(ar, 96, 1, 1), coll(bar, 0, 0, 3)],
        vec![coll(ar, 96, 2, 2), coll(bar, 0, 0, 3)],
    ];
    let mut offsets = vec![0u64];
    let mut words = Vec::new();
    for p in &programs {
        words.extend(p.iter().flatten());
        offsets.push(words.len() as u64 / 4);
    }
    let trace = PackedTrace { offsets, words, comm_offsets: vec![0, 2, 4], comm_members: vec![0, 2, 3, 1] };
    let mut cfg = config(json!([job("t", vec![0, 1, 2, 3], 1, json!({"kind": "trace"}))]));
    cfg.run.messages = true;
    let mut sim = Simulation::with_traces(cfg, &HashMap::from([(0, trace)])).unwrap();
    sim.run(&mut || false);
    assert_eq!(*sim.status(), RunStatus::Completed, "{:?}", sim.status());
    let out = sim.output(false).unwrap();
    let s = out.summary;
    // Allreduce of 2 ranks: one exchange (2 messages of 96 B); barrier of 4: 2 rounds x 4 ranks.
    assert_eq!(s["jobs"]["t"]["messages_sent"], 3 * 2 + 8, "{}", s["jobs"]["t"]);
    assert_eq!(s["jobs"]["t"]["bytes_sent"], 3 * 2 * 96);
    let cols = out.messages.unwrap();
    let col = |name: &str| -> Vec<u64> {
        let c = cols.iter().find(|c| c.name == name).unwrap();
        let width: usize = c.dtype[2..].parse().unwrap();
        c.data.chunks_exact(width).map(|b| b.iter().rev().fold(0u64, |v, &x| v << 8 | x as u64)).collect()
    };
    let (src, dst, bytes) = (col("src"), col("dst"), col("bytes"));
    for i in 0..src.len() {
        if bytes[i] == 96 {
            let pair = [src[i].min(dst[i]), src[i].max(dst[i])];
            assert!(
                pair == [0, 2] || pair == [1, 3],
                "allreduce message {} -> {} leaves its communicator",
                src[i],
                dst[i]
            );
        }
    }
    assert_eq!(bytes.iter().filter(|&&b| b == 96).count(), 6);
}

#[test]
fn restarting_jobs_keep_running_until_every_job_completed_once() {
    let short = job("short", vec![0, 1], 1, json!({"kind": "ping-pong", "bytes": 8, "iterations": 2}));
    let mut long = job("long", vec![2, 3], 1, json!({"kind": "ping-pong", "bytes": 8, "iterations": 50}));
    long["restart"] = json!(false);
    let mut short = short;
    short["restart"] = json!(true);
    let (_, s) = run(config(json!([short, long])));
    assert!(s["jobs"]["short"]["runs_completed"].as_u64().unwrap() >= 20);
    assert_eq!(s["jobs"]["long"]["runs_completed"], 1);
    // The short job's runtime is its first completion.
    assert!(
        s["jobs"]["short"]["runtime_us"].as_f64().unwrap() < s["jobs"]["long"]["runtime_us"].as_f64().unwrap() / 10.0
    );
}
