//! What congestion control costs the hot path, for callgrind (ignored in normal test runs):
//! `valgrind --tool=callgrind --collect-atstart=no --toggle-collect='*Simulation::run_reporting'
//! target/release/deps/cc_cost-* --ignored --nocapture` with `CC=off|on`; instructions / hops.
//! Uses only the public API the engine had before congestion control, so the same file measures
//! the engine without it.

use qoslab_engine::{EngineConfig, Simulation};

#[test]
#[ignore = "a measurement, run under callgrind"]
fn hop_cost_64_host_tree_uniform_saturated() {
    let json = r#"{"seed":1,"fabric":{"link_gbps":100.0,"link_latency_ns":20.0,"switch_latency_ns":100.0,"mtu_bytes":4096,"header_bytes":26,"data_vls":4,"vl_buffer_bytes":32768,"hca_send_queues_per_sl":8},
    "topology":{"kind":"xgft","m":[8,8],"w":[1,8]},"routing":{"algorithm":"dmodk"},
    "qos":{"ca":{"sl2vl":[0,1,2,3,0,1,2,3,0,1,2,3,0,1,2,3],"vlarb_high":[],"vlarb_low":[[0,255],[1,255],[2,255],[3,255]],"high_limit":0},
           "swe":{"sl2vl":[0,1,2,3,0,1,2,3,0,1,2,3,0,1,2,3],"vlarb_high":[],"vlarb_low":[[0,255],[1,255],[2,255],[3,255]],"high_limit":0}},
    "traffic":[{"pattern":"uniform","hosts":[HOSTS],"destinations":[HOSTS],"load":null,"message_bytes":65536,"sl":0,"arrival":"poisson","shift":1,"hotspot_hosts":[0],"hotspot_fraction":0.0,"saturate_depth":2,"max_queued_messages":64}],
    "run":{"duration_us":100.0,"warmup_us":10.0,"messages":false}CC}"#;
    let hosts: Vec<String> = (0..64).map(|h| h.to_string()).collect();
    let sl = r#"{"enabled":true,"ccti_timer":10,"ccti_increase":1,"ccti_min":0,"trigger_threshold":0}"#;
    let cct: Vec<String> = (0..128u32).map(|i| format!("[0,{}]", 7 * i * i * 1000 / (95 * 95 * 218))).collect();
    let cc = format!(
        r#","congestion_control":{{"threshold":15,"packet_size_credits":0,"marking_rate":0,"victim_ports":[],"sl_based":false,"sls":[{}],"cct":[{}]}}"#,
        vec![sl; 16].join(","),
        cct.join(",")
    );
    let on = std::env::var("CC").is_ok_and(|v| v == "on");
    let json = json.replace("HOSTS", &hosts.join(",")).replace("CC", if on { &cc } else { "" });
    let mut sim = Simulation::new(EngineConfig::from_json(&json).unwrap()).unwrap();
    sim.run(&mut || false);
    let out = sim.output(false).unwrap();
    println!("cc {on}: packet_hops {} events {}", out.summary["packet_hops"], out.summary["events"]);
    if on {
        println!("{}", out.summary["congestion_control"]);
    }
}
