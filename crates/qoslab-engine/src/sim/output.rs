//! Turns a finished run into the summary and columnar tables the Python side writes out.

use super::attribution::Kind;
use super::{RunStatus, Simulation};
use crate::fabric::cc::CcTrace;
use crate::mpi::{Mpi, MESSAGE_KINDS};
use crate::topology::NONE;
use crate::units::ps_to_ns;
use serde_json::{json, Map, Value};

/// A column of a result table: numpy dtype string and little-endian bytes.
pub struct Column {
    pub name: &'static str,
    pub dtype: &'static str,
    pub data: Vec<u8>,
}

fn column<T: Copy, const N: usize>(
    name: &'static str,
    dtype: &'static str,
    values: impl Iterator<Item = T>,
    to_bytes: fn(T) -> [u8; N],
) -> Column {
    let mut data = Vec::new();
    for v in values {
        data.extend_from_slice(&to_bytes(v));
    }
    Column { name, dtype, data }
}

pub struct RunOutput {
    pub summary: Value,
    pub node_names: Vec<String>,
    pub links: Vec<Column>,
    pub messages: Option<Vec<Column>>,
    /// Per rank and iteration, when there are MPI jobs.
    pub ranks: Option<Vec<Column>>,
    /// Per (output port, VL, victim class, culprit class), with `run.interference`.
    pub interference: Option<Vec<Column>>,
    /// Per cabled port, with `run.port_counters`: idle time with credit-stalled packets.
    pub port_waits: Option<Vec<Column>>,
    /// Per CCTI change, with `congestion_control.trace`.
    pub ccti: Option<Vec<Column>>,
    /// Per FECN mark (and its BECN's arrival), with `congestion_control.trace`.
    pub cc_marks: Option<Vec<Column>>,
}

impl Simulation {
    pub fn output(&mut self, interrupted: bool) -> Result<RunOutput, String> {
        let conservation = self.conservation()?;
        let g = self.topology.graph().clone();
        let hosts = g.hosts as f64;
        let window_ps = self.window.end.min(self.now.max(self.window.start)) - self.window.start;
        let capacity = |senders: f64| self.rate.capacity_bytes(window_ps) * senders;
        let all_capacity = capacity(hosts).max(f64::MIN_POSITIVE);
        let mut summary = match self.all.summary(all_capacity) {
            Value::Object(m) => m,
            _ => unreachable!(),
        };
        let mut by_sl = Map::new();
        for (sl, s) in self.by_sl.iter_mut().enumerate() {
            if s.injected_wire_bytes > 0 || s.delivered_wire_bytes > 0 || !s.latencies.is_empty() {
                by_sl.insert(sl.to_string(), s.summary(all_capacity));
            }
        }
        let cc = self.cc.as_deref();
        let by_traffic: Vec<Value> = self
            .by_class
            .iter_mut()
            .zip(&self.tables)
            .enumerate()
            .map(|(class, (s, t))| {
                let mut v = s.summary(capacity(t.senders.max(1) as f64));
                v["senders"] = json!(t.senders);
                if let Some(cc) = cc {
                    cc.class_summary(class, &mut v);
                }
                v
            })
            .collect();
        let mean_pending = if self.event_count > 0 { self.pending_sum as f64 / self.event_count as f64 } else { 0.0 };
        summary.insert("hosts".into(), json!(g.hosts));
        summary.insert("switches".into(), json!(g.switches));
        summary.insert("links".into(), json!(g.links()));
        summary.insert("sim_time_ns".into(), json!(ps_to_ns(self.now)));
        summary.insert("window_ns".into(), json!([ps_to_ns(self.window.start), ps_to_ns(self.window.end)]));
        summary.insert("events".into(), json!(self.event_count));
        summary.insert("packet_hops".into(), json!(self.packet_hops));
        summary.insert("mean_pending_events".into(), json!(mean_pending));
        summary.insert("by_sl".into(), Value::Object(by_sl));
        summary.insert("by_traffic".into(), Value::Array(by_traffic));
        summary.insert("conservation".into(), conservation);
        summary.insert("interrupted".into(), json!(interrupted));
        let (status, error) = match &self.status {
            RunStatus::Completed => ("completed", None),
            RunStatus::Interrupted => ("interrupted", None),
            RunStatus::TimeLimit => ("time_limit", None),
            RunStatus::Deadlock(text) => ("deadlock", Some(text.clone())),
        };
        summary.insert("status".into(), json!(status));
        if let Some(e) = error {
            summary.insert("error".into(), json!(e));
        }
        if let Some(cc) = self.cc_summary() {
            summary.insert("congestion_control".into(), cc);
        }
        if let Some(mpi) = self.mpi.as_deref() {
            let mut jobs = mpi.summary(self.now);
            // The fabric's view of each job's messages (network only, not shared memory).
            let tables = self.tables.len();
            for (j, stats) in self.by_class[tables..].iter_mut().enumerate() {
                let name = mpi.job_name(j as u32).to_string();
                let network = &mut jobs[&name]["network"];
                *network = stats.summary(all_capacity);
                network["shared_send_queue_messages"] = json!(self.connection_lanes.shared_messages(j as u32));
                if let Some(cc) = cc {
                    cc.class_summary(tables + j, network);
                }
            }
            summary.insert("jobs".into(), jobs);
        }

        // The charges, read once for the summary's matrices and the table.
        let attribution_rows = self.attribution.as_deref_mut().map(|a| a.rows());
        if let (Some(a), Some(rows)) = (self.attribution.as_deref(), attribution_rows.as_deref()) {
            // [victim][culprit] by class: traffic tables first, then jobs (as by_class).
            let ns = |m: &Vec<Vec<u64>>| -> Vec<Vec<f64>> {
                m.iter().map(|r| r.iter().map(|&ps| ps_to_ns(ps)).collect()).collect()
            };
            let m = a.matrices(rows);
            summary.insert(
                "interference".into(),
                json!({ "wait_ns": ns(&m[Kind::Output as usize]), "buffer_wait_ns": ns(&m[Kind::Buffer as usize]) }),
            );
        }
        let links = self.link_columns(&g);
        let messages = self.cfg.run.messages.then(|| self.message_columns());
        let ranks = self.mpi.as_deref().map(rank_columns);
        let interference = attribution_rows.map(|rows| {
            vec![
                column("link", "<u4", rows.iter().map(|r| r.0), u32::to_le_bytes),
                column("vl", "<u1", rows.iter().map(|r| r.1), u8::to_le_bytes),
                column("kind", "<u1", rows.iter().map(|r| r.2), u8::to_le_bytes),
                column("victim", "<u2", rows.iter().map(|r| r.3), u16::to_le_bytes),
                column("culprit", "<u2", rows.iter().map(|r| r.4), u16::to_le_bytes),
                column("wait_ns", "<f8", rows.iter().map(|r| ps_to_ns(r.5)), f64::to_le_bytes),
            ]
        });
        let port_waits = self.xmit_wait.as_deref().map(|w| {
            let ports: Vec<u32> =
                (0..g.ports()).filter(|&p| g.port_peer[p as usize] != crate::topology::NONE).collect();
            vec![
                column("link", "<u4", ports.iter().copied(), u32::to_le_bytes),
                column("xmit_wait_ns", "<f8", ports.iter().map(|&p| ps_to_ns(w[p as usize].1)), f64::to_le_bytes),
            ]
        });
        let (ccti, cc_marks) = match self.cc_trace() {
            Some(t) => (Some(ccti_columns(t)), Some(cc_mark_columns(t))),
            None => (None, None),
        };
        Ok(RunOutput {
            summary: Value::Object(summary),
            node_names: g.node_names.clone(),
            links,
            messages,
            ranks,
            interference,
            port_waits,
            ccti,
            cc_marks,
        })
    }

    fn link_columns(&self, g: &crate::topology::Graph) -> Vec<Column> {
        let vls = self.vls;
        let rows: Vec<(u32, u32)> = (0..g.ports())
            .filter(|&p| g.port_peer[p as usize] != crate::topology::NONE)
            .flat_map(|p| (0..vls).map(move |v| (p, v)))
            .collect();
        let peer = |p: u32| g.port_peer[p as usize];
        let c = |p: u32, v: u32| self.port_vls[(p * vls + v) as usize].counters;
        vec![
            column("link", "<u4", rows.iter().map(|r| r.0), u32::to_le_bytes),
            column("vl", "<u1", rows.iter().map(|r| r.1 as u8), u8::to_le_bytes),
            column("src_node", "<u4", rows.iter().map(|r| g.port_node[r.0 as usize]), u32::to_le_bytes),
            column("src_port", "<u4", rows.iter().map(|r| g.local_port(r.0)), u32::to_le_bytes),
            column("dst_node", "<u4", rows.iter().map(|r| g.port_node[peer(r.0) as usize]), u32::to_le_bytes),
            column("dst_port", "<u4", rows.iter().map(|r| g.local_port(peer(r.0))), u32::to_le_bytes),
            column("packets", "<u8", rows.iter().map(|r| c(r.0, r.1).packets), u64::to_le_bytes),
            column("bytes", "<u8", rows.iter().map(|r| c(r.0, r.1).bytes), u64::to_le_bytes),
            column("busy_ns", "<f8", rows.iter().map(|r| ps_to_ns(c(r.0, r.1).busy_ps)), f64::to_le_bytes),
            column(
                "credit_stall_ns",
                "<f8",
                rows.iter().map(|r| ps_to_ns(c(r.0, r.1).credit_stall_ps)),
                f64::to_le_bytes,
            ),
        ]
    }

    fn message_columns(&self) -> Vec<Column> {
        let m = &self.message_log;
        let tables = self.tables.len();
        vec![
            column("src", "<u4", m.iter().map(|r| r.src), u32::to_le_bytes),
            column("dst", "<u4", m.iter().map(|r| r.dst), u32::to_le_bytes),
            column("sl", "<u1", m.iter().map(|r| r.sl), u8::to_le_bytes),
            column(
                "traffic",
                "<i4",
                m.iter().map(|r| if (r.class as usize) < tables { r.class as i32 } else { -1 }),
                i32::to_le_bytes,
            ),
            column("job", "<i4", m.iter().map(|r| r.class as i32 - tables as i32).map(|j| j.max(-1)), i32::to_le_bytes),
            column("bytes", "<u8", m.iter().map(|r| r.bytes), u64::to_le_bytes),
            column("created_ns", "<f8", m.iter().map(|r| ps_to_ns(r.created)), f64::to_le_bytes),
            column("delivered_ns", "<f8", m.iter().map(|r| ps_to_ns(r.delivered)), f64::to_le_bytes),
            // MPI messages only (NONE, and the kind past MESSAGE_KINDS, for open-loop traffic).
            column("src_rank", "<u4", m.iter().map(|r| r.mpi.map_or(NONE, |v| v.src_rank)), u32::to_le_bytes),
            column("dst_rank", "<u4", m.iter().map(|r| r.mpi.map_or(NONE, |v| v.dst_rank)), u32::to_le_bytes),
            column(
                "mpi_kind",
                "<u1",
                m.iter().map(|r| r.mpi.map_or(MESSAGE_KINDS.len() as u8, |v| v.kind)),
                u8::to_le_bytes,
            ),
            column("tag", "<u4", m.iter().map(|r| r.mpi.map_or(NONE, |v| v.tag)), u32::to_le_bytes),
        ]
    }
}

/// One row per (job, rank, run, iteration): when it started, how long it took, how long the rank
/// waited inside MPI.
fn rank_columns(mpi: &Mpi) -> Vec<Column> {
    let r = &mpi.records;
    vec![
        column("job", "<u4", r.iter().map(|x| x.job), u32::to_le_bytes),
        column("rank", "<u4", r.iter().map(|x| x.rank), u32::to_le_bytes),
        column("host", "<u4", r.iter().map(|x| mpi.host_of(x.job, x.rank)), u32::to_le_bytes),
        column("run", "<u4", r.iter().map(|x| x.run), u32::to_le_bytes),
        column("iteration", "<u4", r.iter().map(|x| x.iteration), u32::to_le_bytes),
        column("start_ns", "<f8", r.iter().map(|x| ps_to_ns(x.start)), f64::to_le_bytes),
        column("time_ns", "<f8", r.iter().map(|x| ps_to_ns(x.end - x.start)), f64::to_le_bytes),
        column("mpi_wait_ns", "<f8", r.iter().map(|x| ps_to_ns(x.wait)), f64::to_le_bytes),
        column("sends", "<u4", r.iter().map(|x| x.sends), u32::to_le_bytes),
        column("send_latency_ns", "<f8", r.iter().map(|x| ps_to_ns(x.send_latency)), f64::to_le_bytes),
    ]
}

/// One row per CCTI change: up on a BECN, down on a timer expiry. Times in integer picoseconds:
/// the closed forms they are checked against are exact to the picosecond.
fn ccti_columns(t: &CcTrace) -> Vec<Column> {
    let c = &t.ccti;
    vec![
        column("time_ps", "<u8", c.iter().map(|x| x.time), u64::to_le_bytes),
        column("host", "<u4", c.iter().map(|x| x.host), u32::to_le_bytes),
        column("sl", "<u1", c.iter().map(|x| x.sl), u8::to_le_bytes),
        column("lane", "<u4", c.iter().map(|x| x.lane), u32::to_le_bytes),
        column("ccti", "<u2", c.iter().map(|x| x.ccti), u16::to_le_bytes),
    ]
}

/// `becn_ps` of a mark whose BECN had not reached its source when the run ended.
pub const NO_BECN: u64 = u64::MAX;

/// One row per FECN mark, with the time its BECN reached the source (`NO_BECN`: not by the end).
fn cc_mark_columns(t: &CcTrace) -> Vec<Column> {
    let m = &t.marks;
    let mut becn = vec![NO_BECN; m.len()];
    for b in &t.becn {
        becn[b.mark as usize] = b.increased_at;
    }
    vec![
        column("time_ps", "<u8", m.iter().map(|x| x.time), u64::to_le_bytes),
        column("link", "<u4", m.iter().map(|x| x.port), u32::to_le_bytes),
        column("vl", "<u1", m.iter().map(|x| x.vl), u8::to_le_bytes),
        column("sl", "<u1", m.iter().map(|x| x.sl), u8::to_le_bytes),
        column("src", "<u4", m.iter().map(|x| x.src), u32::to_le_bytes),
        column("dst", "<u4", m.iter().map(|x| x.dst), u32::to_le_bytes),
        column("credits", "<u4", m.iter().map(|x| x.credits), u32::to_le_bytes),
        column("victim", "<u1", m.iter().map(|x| x.victim as u8), u8::to_le_bytes),
        column("becn_ps", "<u8", becn.into_iter(), u64::to_le_bytes),
    ]
}
