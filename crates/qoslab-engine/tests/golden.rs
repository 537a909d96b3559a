//! The golden net without Python (docs/design/golden.md): every engine config stored under
//! tests/golden must give exactly its stored summary and link table, so `cargo test` catches a
//! change of engine behaviour. Regenerate with `python tests/golden/regenerate.py` only for a
//! deliberate model change.

#[path = "common/golden.rs"]
mod golden;

#[test]
fn every_golden_config_gives_its_stored_summary_and_link_table() {
    let scenarios = golden::scenarios();
    // The net as docs/design/golden.md describes it; fewer means files went missing.
    assert!(scenarios.len() >= 15, "only {} golden scenarios in {}", scenarios.len(), golden::golden_dir().display());
    let mut failures = Vec::new();
    for g in &scenarios {
        let found = g.differences(&g.run());
        if !found.is_empty() {
            let shown: Vec<&str> = found.iter().take(20).map(String::as_str).collect();
            failures.push(format!("{} ({} differences):\n  {}", g.name, found.len(), shown.join("\n  ")));
        }
    }
    assert!(failures.is_empty(), "golden outputs differ:\n{}", failures.join("\n"));
}

/// Attribution observes and never steers: with `run.interference` on, every golden config gives
/// the same summary (but for the added `interference` matrices) and link table. In debug builds
/// this also runs attribution's own assertions over every feature the net touches.
#[test]
fn attribution_on_changes_no_other_output_of_any_golden_config() {
    let mut failures = Vec::new();
    let mut checked = 0;
    for g in golden::scenarios().iter().filter_map(golden::Golden::with_interference) {
        let mut out = g.run();
        assert!(out.summary.get("interference").is_some(), "{}: attribution did not run", g.name);
        out.summary.as_object_mut().unwrap().remove("interference");
        let found = g.differences(&out);
        if !found.is_empty() {
            failures.push(format!("{}: {}", g.name, found.join("; ")));
        }
        checked += 1;
    }
    assert!(checked >= 15, "only {checked} golden configs without attribution");
    assert!(failures.is_empty(), "attribution moved outputs:\n{}", failures.join("\n"));
}
