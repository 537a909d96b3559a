//! What the engine-level job tests share: a small fabric config, job tables, running to the end.

// Each test binary uses its own subset of these.
#![allow(dead_code)]

use qoslab_engine::{EngineConfig, Simulation};
use serde_json::{json, Value};

/// A single 32-host switch with EDR-like defaults and the given jobs.
pub fn config(jobs: Value) -> EngineConfig {
    EngineConfig::from_json(&config_json(jobs).to_string()).unwrap()
}

/// `config` as JSON, for tests that change keys before parsing.
pub fn config_json(jobs: Value) -> Value {
    let sl2vl: Vec<u8> = (0..16).map(|s| s % 4).collect();
    let port =
        json!({"sl2vl": sl2vl, "vlarb_high": [], "vlarb_low": [[0,255],[1,255],[2,255],[3,255]], "high_limit": 0});
    json!({
        "seed": 1,
        "fabric": {"link_gbps": 100.0, "link_latency_ns": 20.0, "switch_latency_ns": 100.0, "mtu_bytes": 4096,
                   "header_bytes": 26, "data_vls": 4, "vl_buffer_bytes": 32768, "hca_send_queues_per_sl": 8},
        "topology": {"kind": "single-switch", "hosts": 32},
        "routing": {"algorithm": "dmodk"},
        "qos": {"ca": port, "swe": port},
        "traffic": [],
        "run": {"duration_us": 1000000.0, "warmup_us": 0.0, "messages": false},
        "jobs": jobs,
        "mpi": {"eager_threshold_bytes": 16384, "control_bytes": 64, "shm_latency_ns": 300.0, "shm_gbps": 160.0},
    })
}

/// A job table with MPICH-like default collectives and no restart.
pub fn job(name: &str, hosts: Vec<u32>, rpn: u32, workload: Value) -> Value {
    with_collectives(
        json!({"name": name, "hosts": hosts, "ranks_per_node": rpn, "sl": 0, "restart": false, "workload": workload}),
        "recursive-doubling",
        "pairwise",
    )
}

pub fn with_collectives(mut job: Value, allreduce: &str, alltoall: &str) -> Value {
    job["collectives"] = json!({"allreduce": allreduce, "alltoall": alltoall});
    job
}

/// Runs to the end; returns the simulation (for its status) and the summary.
pub fn run(cfg: EngineConfig) -> (Simulation, Value) {
    let mut sim = Simulation::new(cfg).unwrap();
    sim.run(&mut || false);
    let out = sim.output(false).unwrap();
    (sim, out.summary)
}

/// A run whose jobs all finished without restarting has nothing left in the fabric: every packet
/// delivered, every message completed. (The engine's own conservation check, which fails the
/// run, guarantees only that the counts balance; this says what they must be.)
pub fn assert_drained(s: &Value, what: &str) {
    let c = &s["conservation"];
    assert_eq!(c["packets_in_flight"], 0, "{what}: {c}");
    let (created, completed) = (&c["messages_created"], &c["messages_completed"]);
    assert_eq!(created, completed, "{what}: {c}");
}
