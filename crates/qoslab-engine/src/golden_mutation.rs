//! The golden net can fail: one rule of the VL arbiter changed (`pick` leaves its current entry
//! although it has weight left) must move at least one stored golden output, and none with the
//! real arbiter. Only the library's own tests can flip the switch (`cfg(test)`), so this lives
//! here rather than in tests/.

#[path = "../tests/common/golden.rs"]
mod golden;

use crate::fabric::vl_arbiter::mutation;

/// Restores the real arbiter even when an assertion fails while the mutation is on.
struct Mutated;

impl Mutated {
    fn on() -> Mutated {
        mutation::set_skip_current_entry(true);
        Mutated
    }
}

impl Drop for Mutated {
    fn drop(&mut self) {
        mutation::set_skip_current_entry(false);
    }
}

#[test]
fn golden_net_catches_an_arbiter_that_leaves_an_entry_with_weight_left() {
    let scenarios = golden::scenarios();
    assert!(scenarios.len() >= 15, "golden scenarios missing from {}", golden::golden_dir().display());
    for g in &scenarios {
        let found = g.differences(&g.run());
        assert!(found.is_empty(), "{} differs with the real arbiter: {found:?}", g.name);
    }
    let caught: Vec<(String, usize)> = {
        let _mutated = Mutated::on();
        scenarios.iter().map(|g| (g.name.clone(), g.differences(&g.run()).len())).filter(|c| c.1 > 0).collect()
    };
    assert!(!caught.is_empty(), "no golden scenario noticed the mutated arbiter");
    // What it caught, for the record (cargo test -- --nocapture).
    println!("the mutated arbiter moved {} of {} golden scenarios: {caught:?}", caught.len(), scenarios.len());
}
