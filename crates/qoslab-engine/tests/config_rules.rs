//! The rules on a resolved config that the engine owns (docs/design/engine-boundary.md, "Who
//! checks what"): `qoslab_engine::validate` refuses them without building a fabric, naming the
//! scenario key, and a routing built alone (`Router::new`, `qoslab_engine::fabric`) obeys the
//! same rules with the same words.

mod common;

use qoslab_engine::config::{FabricKind, RoutingAlgorithm, RoutingConfig};
use qoslab_engine::{validate, Error};
use serde_json::{json, Value};

fn base() -> Value {
    common::config_json(json!([]))
}

fn dragonfly(groups: u32) -> Value {
    json!({"kind": "dragonfly-plus", "groups": groups, "leaves_per_group": 2, "spines_per_group": 2,
           "hosts_per_leaf": 2, "global_links_per_spine": groups - 1})
}

fn refused(v: &Value) -> (String, String) {
    match validate(&v.to_string()) {
        Err(Error::Config(e)) => (e.key, e.message),
        other => panic!("expected a ConfigError, got {other:?}"),
    }
}

#[test]
fn the_default_test_config_is_valid() {
    validate(&base().to_string()).unwrap();
}

#[test]
fn flowlets_need_adaptive_routing_on_a_dragonfly() {
    let mut v = base();
    v["routing"] = json!({"algorithm": "adaptive", "flowlet_gap_us": 5.0});
    let (key, message) = refused(&v);
    assert_eq!(key, "routing.flowlet_gap_us");
    assert!(message.contains("(routing.algorithm is \"adaptive\" on single-switch)"), "{message}");
    v["topology"] = dragonfly(3);
    v["routing"] = json!({"algorithm": "minimal", "flowlet_gap_us": 5.0});
    assert!(refused(&v).1.starts_with("flowlets apply to adaptive routing on a Dragonfly+"));
    v["routing"] = json!({"algorithm": "adaptive", "vls": 2, "flowlet_gap_us": 5.0});
    let sl2vl: Vec<u8> = (0..16).map(|s| s % 2).collect();
    for port in ["ca", "swe"] {
        v["qos"][port]["sl2vl"] = json!(sl2vl);
    }
    validate(&v.to_string()).unwrap();
    v["routing"]["flowlet_gap_us"] = json!(-1.0);
    assert_eq!(refused(&v), ("routing.flowlet_gap_us".into(), "expected a time >= 0 in µs, got -1".into()));
}

#[test]
fn vl_layers_within_the_data_vls_and_as_many_as_routing_needs() {
    let mut v = base();
    v["routing"] = json!({"algorithm": "dmodk", "vls": 8});
    assert_eq!(
        refused(&v),
        (
            "routing.vls".into(),
            "routing needs 8 VL layers but fabric.data_vls = 4: set fabric.data_vls to at least 8".into()
        )
    );
    v["topology"] = dragonfly(3);
    v["routing"] = json!({"algorithm": "valiant", "vls": 1});
    let (key, message) = refused(&v);
    assert_eq!(key, "routing.vls");
    assert!(message.starts_with("valiant routing needs 2 VL layers to be deadlock-free"), "{message}");
    // Two groups: every non-minimal path is minimal, one layer does.
    v["topology"] = dragonfly(2);
    validate(&v.to_string()).unwrap();
}

#[test]
fn the_algorithm_suits_the_topology() {
    let mut v = base();
    v["routing"] = json!({"algorithm": "valiant"});
    assert_eq!(refused(&v), ("routing.algorithm".into(), "\"valiant\" routing needs a dragonfly-plus topology".into()));
    v["topology"] = dragonfly(3);
    v["routing"] = json!({"algorithm": "smodk"});
    assert!(refused(&v).1.starts_with("\"smodk\" routing needs a fat tree; route a Dragonfly+ with"));
}

#[test]
fn sl2vl_values_stay_within_the_vls_qos_has() {
    let mut v = base();
    let mut sl2vl = vec![0u8; 16];
    sl2vl[4] = 4;
    v["qos"]["swe"]["sl2vl"] = json!(sl2vl);
    assert_eq!(
        refused(&v),
        ("qos.swe.sl2vl".into(), "SL4 maps to VL4, but only VL0..VL3 exist (fabric.data_vls = 4)".into())
    );
    let mut v = base();
    v["routing"] = json!({"algorithm": "dmodk", "vls": 2});
    let (key, message) = refused(&v);
    assert_eq!(key, "qos.ca.sl2vl");
    assert!(message.starts_with("SL2 maps to VL2, but routing.vls = 2 leaves VL0..VL1 for QoS"), "{message}");
    let mut v = base();
    sl2vl[4] = 0;
    sl2vl[15] = 9;
    v["qos"]["sl2vl_pairs"] = json!([{"switch": 0, "in_port": 0, "out_port": 1, "sl2vl": sl2vl}]);
    assert_eq!(refused(&v).0, "qos.sl2vl_pairs[0].sl2vl");
}

#[test]
fn a_vlarb_table_holds_64_entries_with_every_layer_copy() {
    let mut v = base();
    v["qos"]["ca"]["vlarb_low"] = json!(vec![[0, 1]; 65]);
    assert_eq!(refused(&v), ("qos.ca.vlarb_low".into(), "expected at most 64 entries, got 65".into()));
    v["qos"]["ca"]["vlarb_low"] = json!(vec![[0, 1]; 66]);
    v["routing"] = json!({"algorithm": "dmodk", "vls": 2});
    let sl2vl: Vec<u8> = (0..16).map(|s| s % 2).collect();
    for port in ["ca", "swe"] {
        v["qos"][port]["sl2vl"] = json!(sl2vl);
    }
    assert_eq!(refused(&v).1, "expected at most 64 entries, got 66 (33 entries, one per routing layer (2) each)");
}

#[test]
fn layers_needed_is_one_rule_for_the_config_and_the_router() {
    use RoutingAlgorithm::*;
    for groups in 2..5 {
        let kind = FabricKind::DragonflyPlus { groups };
        assert_eq!(RoutingConfig::layers_needed(Minimal, kind), 1);
        for algorithm in [Valiant, Adaptive] {
            assert_eq!(RoutingConfig::layers_needed(algorithm, kind), if groups >= 3 { 2 } else { 1 });
        }
    }
    assert_eq!(RoutingConfig::layers_needed(Adaptive, FabricKind::FatTree), 1);
    // A routing built alone (what `qoslab_engine::fabric` does) refuses with the same words.
    let e =
        qoslab_engine::fabric(&dragonfly(3).to_string(), Some(r#"{"algorithm": "valiant", "vls": 1}"#)).unwrap_err();
    match e {
        Error::Config(c) => {
            assert_eq!(c.key, "routing.vls");
            assert!(c.message.starts_with("valiant routing needs 2 VL layers"), "{}", c.message);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_rank_policy_names_ranks_of_its_job() {
    let job = common::job("a", vec![0, 1], 2, json!({"kind": "ping-pong", "bytes": 8, "iterations": 1}));
    let mut v = common::config_json(json!([job]));
    v["jobs"][0]["sl_policy"] = json!({"kind": "ranks", "ranks": [1, 4], "sl": 1, "match": "either"});
    assert_eq!(
        refused(&v),
        ("jobs[0].sl_policy.ranks".into(), "rank 4 is not in the job: it has 4 ranks (0..3)".into())
    );
    v["jobs"][0]["sl_policy"]["ranks"] = json!([1, 3]);
    validate(&v.to_string()).unwrap();
}
