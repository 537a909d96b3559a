//! Dragonfly+ against its throughput bounds, and routing deadlocks reported as cycles.

use qoslab_engine::{EngineConfig, RunStatus, Simulation};
use serde_json::{json, Value};

fn qos(data_vls: u8, qos_vls: u8) -> Value {
    let sl2vl: Vec<u8> = (0..16).map(|s| s % qos_vls).collect();
    let low: Vec<[u8; 2]> = (0..data_vls).map(|v| [v, 255]).collect();
    json!({"sl2vl": sl2vl, "vlarb_high": [], "vlarb_low": low, "high_limit": 0})
}

fn config(
    topology: Value,
    routing: Value,
    data_vls: u8,
    buffer: u32,
    traffic: Value,
    duration_us: f64,
) -> EngineConfig {
    let layers = routing.get("vls").and_then(Value::as_u64).unwrap_or(1) as u8;
    let port = qos(data_vls, data_vls / layers);
    let v = json!({
        "seed": 3,
        "fabric": {"link_gbps": 100.0, "link_latency_ns": 20.0, "switch_latency_ns": 100.0, "mtu_bytes": 4096,
                   "header_bytes": 26, "data_vls": data_vls, "vl_buffer_bytes": buffer, "hca_send_queues_per_sl": 8},
        "topology": topology,
        "routing": routing,
        "qos": {"ca": port, "swe": port},
        "traffic": traffic,
        "run": {"duration_us": duration_us, "warmup_us": duration_us / 5.0, "messages": false},
    });
    EngineConfig::from_json(&v.to_string()).unwrap()
}

fn source(hosts: u32, pattern: &str, shift: u32, load: Option<f64>) -> Value {
    let all: Vec<u32> = (0..hosts).collect();
    json!([{"pattern": pattern, "hosts": all, "destinations": all, "load": load, "message_bytes": 4096, "sl": 0,
            "arrival": "poisson", "shift": shift, "hotspot_hosts": [0], "hotspot_fraction": 0.0,
            "saturate_depth": 4, "max_queued_messages": 64}])
}

fn dragonfly(global_per_spine: u32) -> Value {
    json!({"kind": "dragonfly-plus", "groups": 5, "leaves_per_group": 2, "spines_per_group": 4,
           "hosts_per_leaf": 4, "global_links_per_spine": global_per_spine})
}

fn run(cfg: EngineConfig) -> (Simulation, Value) {
    let mut sim = Simulation::new(cfg).unwrap();
    sim.run(&mut || false);
    let out = sim.output(false).unwrap();
    (sim, out.summary)
}

fn accepted(s: &Value) -> f64 {
    s["accepted_load"].as_f64().unwrap()
}

#[test]
fn uniform_traffic_with_minimal_routing_saturates_at_the_global_link_bound() {
    // 5 groups of 8 hosts, 4 global links per group (one per group pair). Uniform traffic sends
    // 32/39 of each host's load out of its group: the 4 links carry at most 4 / (8 * 32/39).
    let bound = 4.0 / (8.0 * 32.0 / 39.0);
    let (_, s) =
        run(config(dragonfly(1), json!({"algorithm": "minimal"}), 4, 32768, source(40, "uniform", 0, None), 200.0));
    let a = accepted(&s);
    assert!(a <= bound * 1.02 && a >= bound * 0.85, "accepted {a:.3}, bound {bound:.3}");
}

#[test]
fn group_shift_collapses_minimal_routing_and_valiant_recovers_half() {
    // Every host sends to the same host of the next group. Minimal: 2 links per group pair for 8
    // hosts, 0.25. Valiant: two global crossings per packet over 8 links per group, 0.5; random
    // per-packet choices and head-of-line blocking in the input FIFOs cost some of it (0.42 with
    // 64 KiB per VL, docs/validation.md).
    let shift = source(40, "shift", 8, None);
    let (_, min) = run(config(dragonfly(2), json!({"algorithm": "minimal"}), 4, 65536, shift.clone(), 200.0));
    let (_, val) = run(config(dragonfly(2), json!({"algorithm": "valiant", "vls": 2}), 4, 65536, shift.clone(), 200.0));
    let (_, ada) = run(config(dragonfly(2), json!({"algorithm": "adaptive", "vls": 2}), 4, 65536, shift, 200.0));
    let (m, v, a) = (accepted(&min), accepted(&val), accepted(&ada));
    eprintln!("minimal {m:.3} valiant {v:.3} adaptive {a:.3}");
    assert!((0.25 * 0.9..=0.25 * 1.02).contains(&m), "minimal {m:.3}");
    assert!((0.5 * 0.8..=0.5 * 1.02).contains(&v), "valiant {v:.3}");
    assert!(a <= 0.5 * 1.02 && a >= 0.8 * v, "adaptive {a:.3} vs valiant {v:.3}");
}

fn nonminimal_fraction(s: &Value) -> f64 {
    s["nonminimal_packets"].as_f64().unwrap() / s["packets_delivered"].as_f64().unwrap()
}

#[test]
fn adaptive_routing_follows_minimal_at_low_load_and_valiant_under_the_adversarial_pattern() {
    let light = source(40, "uniform", 0, Some(0.1));
    let (_, ada) = run(config(dragonfly(2), json!({"algorithm": "adaptive", "vls": 2}), 4, 32768, light, 200.0));
    assert!(nonminimal_fraction(&ada) < 0.01, "adaptive at load 0.1: {:.4} non-minimal", nonminimal_fraction(&ada));
    let shift = source(40, "shift", 8, None);
    let (_, val) = run(config(dragonfly(2), json!({"algorithm": "valiant", "vls": 2}), 4, 65536, shift.clone(), 200.0));
    let (_, ada) = run(config(dragonfly(2), json!({"algorithm": "adaptive", "vls": 2}), 4, 65536, shift, 200.0));
    // Valiant draws the intermediate among the 4 other groups; the destination's own means minimal.
    let fv = nonminimal_fraction(&val);
    assert!((fv - 0.75).abs() < 0.02, "valiant {fv:.3} non-minimal");
    // Minimal paths carry at most 0.25 per host, so adaptive routing, to deliver more, must send
    // at least 1 - 0.25 / accepted of its packets non-minimally.
    let (fa, a) = (nonminimal_fraction(&ada), accepted(&ada));
    eprintln!("adaptive: {fa:.3} non-minimal, accepted {a:.3}");
    assert!(fa >= 1.0 - 0.25 / a - 0.05 && fa <= 0.8, "adaptive {fa:.3} non-minimal at accepted {a:.3}");
}

#[test]
fn adaptive_routing_diverts_at_the_spine_when_every_spine_reaches_every_group() {
    // 5 groups of 4 leaves x 4 hosts, 8 spines with 4 global links each: 8 links per group pair,
    // so every spine reaches every group and the leaf's up-links look alike for both paths; the
    // congestion of a group shift shows only at the spines' global ports. Minimal: 8 links for
    // 16 hosts, 0.5. Adaptive must carry more, sending at least 1 - 0.5 / accepted non-minimally.
    let topology = json!({"kind": "dragonfly-plus", "groups": 5, "leaves_per_group": 4, "spines_per_group": 8,
                          "hosts_per_leaf": 4, "global_links_per_spine": 4});
    let shift = source(80, "shift", 16, None);
    let (_, min) = run(config(topology.clone(), json!({"algorithm": "minimal"}), 4, 65536, shift.clone(), 200.0));
    let (_, ada) = run(config(topology, json!({"algorithm": "adaptive", "vls": 2}), 4, 65536, shift, 200.0));
    let (m, a, fa) = (accepted(&min), accepted(&ada), nonminimal_fraction(&ada));
    eprintln!("spine-level UGAL: minimal {m:.3}, adaptive {a:.3} with {fa:.3} non-minimal");
    assert!((0.5 * 0.9..=0.5 * 1.02).contains(&m), "minimal {m:.3}");
    assert!(a > 0.6, "adaptive {a:.3}: it must beat the minimal bound 0.5");
    assert!(fa >= 1.0 - 0.5 / a - 0.05, "adaptive {fa:.3} non-minimal at accepted {a:.3}");
}

#[test]
fn non_minimal_routing_on_one_vl_is_refused() {
    let cfg = config(
        dragonfly(2),
        json!({"algorithm": "valiant", "vls": 1}),
        4,
        32768,
        source(40, "uniform", 0, Some(0.1)),
        10.0,
    );
    let e = Simulation::new(cfg).err().expect("refused");
    assert_eq!(e.key, "routing.vls");
    assert!(e.message.contains("needs 2"), "{}", e.message);
}

#[test]
fn a_ring_routed_one_way_round_deadlocks_and_the_cycle_is_named() {
    // Four switches in a ring, two hosts each, every route clockwise: the four clockwise links
    // form a cycle of channel dependencies, and saturating traffic fills it.
    let (hosts, switches) = (8u32, 4u32);
    let mut cables = Vec::new();
    for h in 0..hosts {
        cables.push([h, 0, hosts + h / 2, h % 2]);
    }
    for s in 0..switches {
        cables.push([hosts + s, 2, hosts + (s + 1) % switches, 3]);
    }
    let topology = json!({
        "kind": "graph",
        "host_names": (0..hosts).map(|h| format!("h{h}")).collect::<Vec<_>>(),
        "switch_names": (0..switches).map(|s| format!("ring{s}")).collect::<Vec<_>>(),
        "switch_ports": vec![4; switches as usize],
        "cables": cables,
        "cable_gbps": vec![100.0; (hosts + switches) as usize],
    });
    let mut table = Vec::new();
    for s in 0..switches {
        for d in 0..hosts {
            table.push(if d / 2 == s { d % 2 } else { 2 });
        }
    }
    let routing = json!({"algorithm": "lft", "lft": table});
    let cfg = config(topology, routing, 1, 4160, source(hosts, "uniform", 0, None), 500.0);
    let (sim, s) = run(cfg);
    let RunStatus::Deadlock(text) = sim.status() else { panic!("expected a deadlock, got {:?}", sim.status()) };
    assert_eq!(s["status"], "deadlock");
    // The full buffers of the cycle still hold their packets.
    let c = &s["conservation"];
    assert!(c["packets_in_flight"].as_u64().unwrap() > 0, "{c}");
    assert!(text.contains("a cycle of 4 full input buffers"), "{text}");
    for s in 0..switches {
        assert!(text.contains(&format!("ring{s} port 4 VL0")), "{text}");
    }
}
