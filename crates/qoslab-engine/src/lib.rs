//! qoslab-engine: a packet-level, event-driven model of an InfiniBand fabric with its QoS
//! mechanisms (SL2VL, VL arbitration, per-VL credits). Pure Rust; Python drives it through
//! `qoslab-py` with a JSON engine config (see docs/design/engine-boundary.md).

pub mod config;
pub mod config_cc;
pub mod fabric;
pub mod ids;
pub mod mpi;
pub mod queue;
pub mod routing;
pub mod sim;
pub mod stats;
pub mod topology;
pub mod traffic;
pub mod units;

// The golden net's shared test code (tests/common/golden.rs) names the crate as integration tests
// do; inside the library's own tests this alias makes that name resolve.
#[cfg(test)]
extern crate self as qoslab_engine;
#[cfg(test)]
mod golden_mutation;

pub use config::{ConfigError, EngineConfig};
pub use mpi::program::PackedTrace;
pub use sim::{RunOutput, RunStatus, Simulation};
use std::collections::HashMap;

/// Why a run could not produce results.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A broken invariant inside the engine: a bug, never the user's fault.
    #[error("internal engine error: {0}")]
    Engine(String),
}

/// Builds and runs one scenario. `should_stop` is polled periodically (Ctrl-C handling).
/// `traces` holds the rank programs of trace-replay jobs, by job index.
pub fn run(
    config_json: &str,
    traces: &HashMap<usize, PackedTrace>,
    should_stop: &mut dyn FnMut() -> bool,
) -> Result<RunOutput, Error> {
    run_reporting(config_json, traces, &mut |_| should_stop())
}

/// `run`, with where the run stands passed to each poll (a progress display).
pub fn run_reporting(
    config_json: &str,
    traces: &HashMap<usize, PackedTrace>,
    should_stop: &mut dyn FnMut(&sim::Progress) -> bool,
) -> Result<RunOutput, Error> {
    let cfg = EngineConfig::from_json(config_json)?;
    let mut sim = Simulation::with_traces(cfg, traces)?;
    let interrupted = sim.run_reporting(should_stop);
    sim.output(interrupted).map_err(Error::Engine)
}

/// Checks a config without building anything: it parses, and its values and the rules between
/// them hold (`EngineConfig::validate`, no fabric). What Python asks when it loads a scenario.
pub fn validate(config_json: &str) -> Result<(), Error> {
    EngineConfig::from_json(config_json)?.validate()?;
    Ok(())
}

/// Describes the fabric a config builds, without simulating.
pub fn describe(config_json: &str, traces: &HashMap<usize, PackedTrace>) -> Result<serde_json::Value, Error> {
    let cfg = EngineConfig::from_json(config_json)?;
    // Build everything a run would (traffic, SL2VL pairs, jobs), so `check` reports the same errors.
    let sim = Simulation::with_traces(cfg, traces)?;
    Ok(sim.describe())
}

/// The cabling a topology config builds (node names, ports, peers, link rates) and, given a
/// routing config, every switch's forwarding table where routing is per destination (null where
/// it is not): what exporters and path checks need.
pub fn fabric(topology_json: &str, routing_json: Option<&str>) -> Result<serde_json::Value, Error> {
    let topology_cfg: config::TopologyConfig =
        serde_json::from_str(topology_json).map_err(|e| ConfigError::new("topology", e.to_string()))?;
    let topology = topology::Topology::build(&topology_cfg)?;
    let g = topology.graph();
    let mut v = serde_json::json!({
        "hosts": g.hosts,
        "switches": g.switches,
        "node_names": g.node_names,
        "port_base": g.port_base,
        "port_peer": g.port_peer.iter().map(|&p| if p == topology::NONE { -1 } else { p as i64 }).collect::<Vec<_>>(),
        "port_gbps": topology.port_gbps(),
    });
    if let Some(routing_json) = routing_json {
        let routing_cfg: config::RoutingConfig =
            serde_json::from_str(routing_json).map_err(|e| ConfigError::new("routing", e.to_string()))?;
        let router = routing::Router::new(&topology, &routing_cfg, 0)?;
        let tables: Vec<Option<Vec<i64>>> = (0..g.switches)
            .map(|s| (0..g.hosts).map(|d| router.table_entry(s, d).map(|p| p as i64)).collect::<Option<Vec<i64>>>())
            .collect();
        v["routes"] = serde_json::json!(tables);
    }
    Ok(v)
}

/// Speed of the bare event list under the hold model (pop the earliest, push one later), at a
/// fixed number of pending events: the ceiling the engine's event rate is compared against.
pub fn bench_event_queue(pending: usize, operations: u64, seed: u64) -> serde_json::Value {
    use rand::Rng;
    let mut rng = traffic::stream_rng(seed, 99, 0);
    let mut q = queue::EventQueue::new();
    // Increments like a port's: a few hundred ns, spread out.
    for i in 0..pending {
        q.push(rng.gen_range(0..400_000), queue::EventKind::TxEnd, (i % 1024) as u32);
    }
    let start = std::time::Instant::now();
    let checksum = hold_model(&mut q, &mut rng, operations);
    let wall = start.elapsed().as_secs_f64();
    serde_json::json!({
        "pending": pending,
        "operations": operations,
        "wall_seconds": wall,
        "events_per_second": operations as f64 / wall,
        "checksum": checksum,
    })
}

/// The hold model's loop: pop the earliest event, push it back a few hundred ns later. Kept out
/// of line so that instruction counters (`benchmarks/run.py --instructions`) can find it by name.
#[inline(never)]
pub fn hold_model(q: &mut queue::EventQueue, rng: &mut rand_pcg::Pcg64Mcg, operations: u64) -> u64 {
    use rand::Rng;
    let mut checksum = 0u64;
    for _ in 0..operations {
        let (t, kind, id) = q.pop().expect("queue never empties in the hold model");
        checksum = checksum.wrapping_add(t ^ id as u64);
        q.push(t + rng.gen_range(50_000..400_000), kind, id);
    }
    checksum
}
