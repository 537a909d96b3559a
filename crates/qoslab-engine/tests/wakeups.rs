use qoslab_engine::{EngineConfig, Simulation};

#[test]
fn saturated_tapered_tree_never_loses_a_wake_up() {
    let json = r#"{"seed":1,"fabric":{"link_gbps":100.0,"link_latency_ns":20.0,"switch_latency_ns":100.0,"mtu_bytes":4096,"header_bytes":26,"data_vls":4,"vl_buffer_bytes":32768,"hca_send_queues_per_sl":8},
    "topology":{"kind":"xgft","m":[4,4,4],"w":[1,1,1]},"routing":{"algorithm":"dmodk"},
    "qos":{"ca":{"sl2vl":[0,1,2,3,0,1,2,3,0,1,2,3,0,1,2,3],"vlarb_high":[],"vlarb_low":[[0,255],[1,255],[2,255],[3,255]],"high_limit":0},
           "swe":{"sl2vl":[0,1,2,3,0,1,2,3,0,1,2,3,0,1,2,3],"vlarb_high":[],"vlarb_low":[[0,255],[1,255],[2,255],[3,255]],"high_limit":0}},
    "traffic":[{"pattern":"uniform","hosts":[HOSTS],"destinations":[HOSTS],"load":null,"message_bytes":4096,"sl":0,"arrival":"poisson","shift":1,"hotspot_hosts":[0],"hotspot_fraction":0.0,"saturate_depth":2,"max_queued_messages":64}],
    "run":{"duration_us":200.0,"warmup_us":20.0,"messages":false}}"#;
    let hosts: Vec<String> = (0..64).map(|h| h.to_string()).collect();
    let json = json.replace("HOSTS", &hosts.join(","));
    let mut sim = Simulation::new(EngineConfig::from_json(&json).unwrap()).unwrap();
    sim.run(&mut || false);
    let blocked = sim.sendable_but_idle();
    for b in blocked.iter().take(400) {
        println!("{b}");
    }
    assert!(blocked.is_empty(), "{} blocked requests", blocked.len());
}
