//! Configurations that pass the obvious checks but would overflow a 16- or 32-bit field the hot
//! path indexes with (it does not check indices: sim/prechecked.rs) are refused when the
//! simulation is built, naming the key.

mod common;

use qoslab_engine::{EngineConfig, Simulation};
use serde_json::{json, Value};

fn base() -> Value {
    common::config_json(json!([]))
}

fn refused(v: Value) -> qoslab_engine::ConfigError {
    let cfg = EngineConfig::from_json(&v.to_string()).expect("parses");
    Simulation::new(cfg).err().expect("refused")
}

#[test]
fn a_header_that_overflows_the_packet_size_field_is_refused() {
    let mut v = base();
    v["fabric"]["header_bytes"] = json!(61440);
    let e = refused(v);
    assert_eq!(e.key, "fabric.header_bytes");
}

#[test]
fn a_switch_beyond_65535_ports_is_refused_before_its_port_pair_tables_are_built() {
    let mut v = base();
    v["topology"] = json!({"kind": "single-switch", "hosts": 70000});
    let sl2vl: Vec<u8> = (0..16).map(|s| s % 4).collect();
    v["qos"]["sl2vl_pairs"] = json!([{"switch": 0, "in_port": 1, "out_port": 2, "sl2vl": sl2vl}]);
    let e = refused(v);
    assert_eq!(e.key, "topology");
    assert!(e.message.contains("65535"), "{}", e.message);
}

#[test]
fn more_ranks_than_the_event_encoding_holds_are_refused() {
    let mut v = base();
    v["jobs"] = json!([{"name": "huge", "hosts": [0, 1], "ranks_per_node": 1u64 << 29, "sl": 0, "restart": false,
                        "workload": {"kind": "all-to-all", "bytes": 64, "iterations": 1},
                        "collectives": {"allreduce": "recursive-doubling", "alltoall": "pairwise"}}]);
    let e = refused(v);
    assert!(e.key.ends_with("ranks_per_node"), "{}: {}", e.key, e.message);
}
