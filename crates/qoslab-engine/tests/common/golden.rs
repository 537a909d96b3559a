//! The golden net from the engine's side (docs/design/golden.md): runs the engine configs stored
//! under tests/golden (written by tests/golden/regenerate.py) through the public API and compares
//! the engine's summary and link table with the stored ones, exactly.
//!
//! Shared by tests/golden.rs and the library's arbiter mutation test (src/golden_mutation.rs), so
//! it names the crate `qoslab_engine` in both (the library aliases itself under `cfg(test)`).

#![allow(dead_code)]

use qoslab_engine::sim::output::Column;
use qoslab_engine::{PackedTrace, RunOutput};
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Keys Python adds to the engine's summary (simulate.py); everything else is the engine's.
const PYTHON_KEYS: [&str; 3] = ["seed", "scenario", "jobs"];

pub struct Golden {
    pub name: String,
    /// The engine config exactly as stored (passed on as text: re-serialising could move floats).
    pub config: String,
    pub traces: HashMap<usize, PackedTrace>,
    summary: Value,
    links: String,
}

pub fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/golden")
}

/// Every stored scenario, by name.
pub fn scenarios() -> Vec<Golden> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(golden_dir())
        .expect("tests/golden exists")
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("engine.json").exists())
        .collect();
    dirs.sort();
    dirs.iter().map(|d| load(d)).collect()
}

fn load(dir: &Path) -> Golden {
    let read =
        |f: &str| std::fs::read_to_string(dir.join(f)).unwrap_or_else(|e| panic!("{}: {e}", dir.join(f).display()));
    let mut traces = HashMap::new();
    if dir.join("engine_traces.json").exists() {
        let v: Value = serde_json::from_str(&read("engine_traces.json")).unwrap();
        for (job, t) in v.as_object().unwrap() {
            let words =
                |k: &str| -> Vec<u64> { t[k].as_array().unwrap().iter().map(|w| w.as_u64().unwrap()).collect() };
            let trace = PackedTrace {
                offsets: words("offsets"),
                words: words("words"),
                comm_offsets: words("comm_offsets"),
                comm_members: words("comm_members"),
            };
            traces.insert(job.parse().unwrap(), trace);
        }
    }
    Golden {
        name: dir.file_name().unwrap().to_string_lossy().into_owned(),
        config: read("engine.json"),
        traces,
        summary: serde_json::from_str(&read("summary.json")).unwrap(),
        links: read("links.csv"),
    }
}

impl Golden {
    pub fn run(&self) -> RunOutput {
        qoslab_engine::run(&self.config, &self.traces, &mut || false).unwrap_or_else(|e| panic!("{}: {e}", self.name))
    }

    /// The same config with interference attribution on (None when it is on already), edited as
    /// text so that no stored float is re-serialised.
    pub fn with_interference(&self) -> Option<Golden> {
        if self.config.contains("\"interference\"") {
            return None;
        }
        let config = self.config.replacen("\"run\": {", "\"run\": {\"interference\": true,", 1);
        assert_ne!(config, self.config, "{}: no run object in engine.json", self.name);
        Some(Golden {
            name: self.name.clone(),
            config,
            traces: self.traces.clone(),
            summary: self.summary.clone(),
            links: self.links.clone(),
        })
    }

    /// What differs between this run's output and the stored one, one line per field or column.
    pub fn differences(&self, out: &RunOutput) -> Vec<String> {
        let mut found = self.summary_differences(&out.summary);
        found.extend(self.link_differences(out).into_iter().map(|d| format!("links.csv: {d}")));
        found
    }

    fn summary_differences(&self, summary: &Value) -> Vec<String> {
        // Through text and back: the stored floats went through the same parser, so both sides
        // are compared as that parser reads them (serde_json's default parsing is not always
        // correctly rounded; the digits, Python's repr and ryu's, are the same).
        let mut engine: Value = serde_json::from_str(&summary.to_string()).unwrap();
        let config: Value = serde_json::from_str(&self.config).unwrap();
        if let Some(matrices) = engine.get_mut("interference") {
            *matrices = by_class_name(matrices, &config);
        }
        let stored = self.summary.as_object().unwrap();
        let mut found = Vec::new();
        for (k, v) in engine.as_object().unwrap() {
            match stored.get(k) {
                Some(s) => json_differences(s, v, k, &mut found),
                None => found.push(format!("{k}: not stored")),
            }
        }
        for (k, v) in stored {
            // Python adds these; "jobs" is {} when the engine has none.
            let python = PYTHON_KEYS.contains(&k.as_str()) && (k != "jobs" || *v == Value::Object(Map::new()));
            if engine.get(k).is_none() && !python {
                found.push(format!("{k}: stored, but the engine no longer writes it"));
            }
        }
        if stored.get("seed") != config.get("seed") {
            found.push("seed: not the config's".into());
        }
        found.into_iter().map(|d| format!("summary.json: {d}")).collect()
    }

    fn link_differences(&self, out: &RunOutput) -> Vec<String> {
        let mut lines = self.links.lines();
        let header = split_csv(lines.next().unwrap_or(""));
        let rows: Vec<Vec<String>> = lines.map(split_csv).collect();
        let engine = columns(&out.links);
        let mut found = Vec::new();
        let rows_of = engine.first().map_or(0, |c| c.1.len());
        if rows_of != rows.len() {
            found.push(format!("{} rows stored, {rows_of} produced", rows.len()));
            return found;
        }
        let names: Vec<(&str, Vec<Cell>)> = [("src", "src_node"), ("dst", "dst_node")]
            .into_iter()
            .filter_map(|(label, index)| {
                let (_, nodes) = engine.iter().find(|c| c.0 == index)?;
                Some((label, nodes.iter().map(|n| Cell::Text(out.node_names[n.as_index()].clone())).collect()))
            })
            .collect();
        let mut expected: Vec<&str> = engine.iter().map(|c| c.0).chain(names.iter().map(|c| c.0)).collect();
        let mut got: Vec<&str> = header.iter().map(String::as_str).collect();
        expected.sort_unstable();
        got.sort_unstable();
        if expected != got {
            found.push(format!("columns {got:?} stored, {expected:?} produced"));
            return found;
        }
        // An imported fabric's links.csv numbers ports as its dump does (Python renumbers the
        // engine's: python/qoslab/tables.py, `links`); tests/test_golden.py compares those columns.
        let config: Value = serde_json::from_str(&self.config).unwrap();
        let imported = config["topology"]["kind"] == "graph";
        for (name, cells) in engine.iter().map(|c| (c.0, &c.1)).chain(names.iter().map(|c| (c.0, &c.1))) {
            if imported && matches!(name, "src_port" | "dst_port") {
                continue;
            }
            let at = header.iter().position(|h| h == name).unwrap();
            let differ: Vec<usize> = (0..rows.len()).filter(|&r| !cells[r].matches(&rows[r][at])).collect();
            if let Some(&r) = differ.first() {
                found.push(format!(
                    "column {name}: {} rows differ (row {}: {} -> {})",
                    differ.len(),
                    r + 1,
                    rows[r][at],
                    cells[r].shown()
                ));
            }
        }
        found
    }
}

/// The engine's `[victim][culprit]` matrices keyed by class names, as Python stores them.
fn by_class_name(matrices: &Value, config: &Value) -> Value {
    let traffic = config["traffic"].as_array().map_or(0, Vec::len);
    let mut classes: Vec<String> = (0..traffic).map(|i| format!("traffic[{i}]")).collect();
    classes.extend(config["jobs"].as_array().into_iter().flatten().map(|j| j["name"].as_str().unwrap().to_string()));
    let named = |rows: &Value| -> Value {
        let mut m = Map::new();
        for (victim, row) in classes.iter().zip(rows.as_array().unwrap()) {
            let cells = classes.iter().cloned().zip(row.as_array().unwrap().iter().cloned()).collect();
            m.insert(victim.clone(), Value::Object(cells));
        }
        Value::Object(m)
    };
    Value::Object(matrices.as_object().unwrap().iter().map(|(k, v)| (k.clone(), named(v))).collect())
}

fn json_differences(stored: &Value, produced: &Value, path: &str, found: &mut Vec<String>) {
    match (stored, produced) {
        (Value::Object(a), Value::Object(b)) => {
            for k in a.keys().chain(b.keys().filter(|k| !a.contains_key(*k))) {
                let p = format!("{path}.{k}");
                match (a.get(k), b.get(k)) {
                    (Some(x), Some(y)) => json_differences(x, y, &p, found),
                    (Some(x), None) => found.push(format!("{p}: removed (was {x})")),
                    (None, Some(y)) => found.push(format!("{p}: added ({y})")),
                    (None, None) => unreachable!(),
                }
            }
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                json_differences(x, y, &format!("{path}[{i}]"), found);
            }
        }
        // Value equality also tells 1 from 1.0, as the Python side does.
        _ if stored != produced => found.push(format!("{path}: {stored} -> {produced}")),
        _ => {}
    }
}

/// One engine table value, compared with the CSV's text exactly (floats parsed correctly rounded).
enum Cell {
    Int(u64),
    Signed(i64),
    Float(f64),
    Text(String),
}

impl Cell {
    fn matches(&self, text: &str) -> bool {
        match self {
            Cell::Int(v) => text.parse::<u64>() == Ok(*v),
            Cell::Signed(v) => text.parse::<i64>() == Ok(*v),
            Cell::Float(v) => text.parse::<f64>().is_ok_and(|t| t.to_bits() == v.to_bits()),
            Cell::Text(v) => text == v,
        }
    }

    fn shown(&self) -> String {
        match self {
            Cell::Int(v) => v.to_string(),
            Cell::Signed(v) => v.to_string(),
            Cell::Float(v) => format!("{v:?}"),
            Cell::Text(v) => v.clone(),
        }
    }

    fn as_index(&self) -> usize {
        match self {
            Cell::Int(v) => *v as usize,
            _ => panic!("not an index column"),
        }
    }
}

fn columns(table: &[Column]) -> Vec<(&'static str, Vec<Cell>)> {
    table
        .iter()
        .map(|c| {
            let width = c.dtype[2..].parse::<usize>().unwrap();
            let cells = c
                .data
                .chunks_exact(width)
                .map(|b| {
                    let mut le = [0u8; 8];
                    le[..width].copy_from_slice(b);
                    let bits = u64::from_le_bytes(le);
                    match &c.dtype[1..2] {
                        "u" => Cell::Int(bits),
                        // Sign-extend from the column's width.
                        "i" => Cell::Signed(((bits << (64 - 8 * width)) as i64) >> (64 - 8 * width)),
                        "f" if width == 8 => Cell::Float(f64::from_bits(bits)),
                        "f" => Cell::Float(f32::from_bits(bits as u32) as f64),
                        other => panic!("column {}: dtype {other} not read", c.name),
                    }
                })
                .collect();
            (c.name, cells)
        })
        .collect()
}

/// One CSV line as Python's csv module writes it (fields quoted when they hold a comma or quote).
fn split_csv(line: &str) -> Vec<String> {
    let (mut fields, mut field, mut quoted, mut chars) = (Vec::new(), String::new(), false, line.chars().peekable());
    while let Some(c) = chars.next() {
        match c {
            '"' if quoted && chars.peek() == Some(&'"') => {
                field.push('"');
                chars.next();
            }
            '"' => quoted = !quoted,
            ',' if !quoted => fields.push(std::mem::take(&mut field)),
            _ => field.push(c),
        }
    }
    fields.push(field);
    fields
}
