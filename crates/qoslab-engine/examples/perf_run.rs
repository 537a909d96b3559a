//! Runs one engine config for profiling and regression checks:
//!
//!     cargo build --release --example perf_run
//!     perf_run CONFIG.json [DURATION_US] > summary.json
//!
//! Prints the summary plus a digest of the link, message, rank and interference tables (what a change must leave identical);
//! the rate goes to stderr. A fixed small DURATION_US (warm-up a tenth of it) suits callgrind.

use qoslab_engine::{EngineConfig, Simulation};
use std::hash::{DefaultHasher, Hash, Hasher};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let path = args.get(1).expect("usage: perf_run CONFIG.json [DURATION_US]");
    let mut cfg: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    if let Some(d) = args.get(2) {
        let d: f64 = d.parse().unwrap();
        cfg["run"]["duration_us"] = d.into();
        cfg["run"]["warmup_us"] = (d / 10.0).into();
    }
    let mut sim = Simulation::new(EngineConfig::from_json(&cfg.to_string()).unwrap()).unwrap();
    let t0 = std::time::Instant::now();
    let interrupted = run_loop(&mut sim);
    let wall = t0.elapsed().as_secs_f64();
    let out = sim.output(interrupted).unwrap();
    let mut h = DefaultHasher::new();
    let tables = [Some(&out.links), out.messages.as_ref(), out.ranks.as_ref(), out.interference.as_ref()];
    for c in tables.into_iter().flatten().flatten() {
        (c.name, &c.data).hash(&mut h);
    }
    let mut summary = out.summary;
    summary["tables_digest"] = format!("{:016x}", h.finish()).into();
    println!("{}", serde_json::to_string_pretty(&summary).unwrap());
    let hops = summary["packet_hops"].as_f64().unwrap();
    eprintln!(
        "{:.3} s, {:.2} M hops/s, {:.3} events/hop",
        wall,
        hops / wall / 1e6,
        summary["events"].as_f64().unwrap() / hops
    );
}

/// Not inlined, so callgrind can count just the event loop: `--toggle-collect='*run_loop*'`.
#[inline(never)]
fn run_loop(sim: &mut Simulation) -> bool {
    sim.run(&mut || false)
}
