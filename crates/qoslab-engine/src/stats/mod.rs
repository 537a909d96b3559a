//! Counters kept during a run, restricted to the measurement window, and their summaries.

use crate::units::{ps_to_ns, Time, NEVER};
use serde_json::{json, Value};

/// The measurement window [start, end): statistics ignore what happens outside it.
#[derive(Debug, Clone, Copy)]
pub struct Window {
    pub start: Time,
    pub end: Time,
}

impl Window {
    #[inline]
    pub fn contains(&self, t: Time) -> bool {
        t >= self.start && t < self.end
    }

    /// Length of [a, b) that falls inside the window.
    #[inline]
    pub fn overlap(&self, a: Time, b: Time) -> Time {
        b.min(self.end).saturating_sub(a.max(self.start))
    }

    pub fn length(&self) -> Time {
        self.end - self.start
    }
}

/// Throughput and latency of one class of traffic (all, one SL, one traffic table).
#[derive(Debug, Clone, Default)]
pub struct FlowStats {
    pub injected_wire_bytes: u64,
    pub delivered_wire_bytes: u64,
    pub delivered_payload_bytes: u64,
    pub delivered_packets: u64,
    /// Of those, the packets that took a non-minimal (Valiant) Dragonfly+ path.
    pub nonminimal_packets: u64,
    pub delivered_messages: u64,
    /// Arrivals of open-loop sources refused because their send queue was full.
    pub refused_messages: u64,
    /// Latencies (ps) of messages created and completed inside the window.
    pub latencies: Vec<Time>,
}

impl FlowStats {
    /// `capacity_bytes`: what the class's hosts could carry over the window (hosts x link).
    pub fn summary(&mut self, capacity_bytes: f64) -> Value {
        json!({
            "offered_load": self.injected_wire_bytes as f64 / capacity_bytes,
            "accepted_load": self.delivered_wire_bytes as f64 / capacity_bytes,
            "packets_delivered": self.delivered_packets,
            "nonminimal_packets": self.nonminimal_packets,
            "bytes_delivered": self.delivered_payload_bytes,
            "messages_delivered": self.delivered_messages,
            "messages_refused": self.refused_messages,
            "latency_ns": latency_summary(&mut self.latencies),
        })
    }
}

/// Nearest-rank percentile of a sorted slice.
fn percentile(sorted: &[Time], p: f64) -> Time {
    let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

pub fn latency_summary(values: &mut [Time]) -> Value {
    if values.is_empty() {
        return json!({"count": 0, "mean": null, "p50": null, "p99": null, "p999": null, "max": null});
    }
    values.sort_unstable();
    let mean = values.iter().map(|&v| v as f64).sum::<f64>() / values.len() as f64 / 1000.0;
    json!({
        "count": values.len(),
        "mean": mean,
        "p50": ps_to_ns(percentile(values, 0.50)),
        "p99": ps_to_ns(percentile(values, 0.99)),
        "p999": ps_to_ns(percentile(values, 0.999)),
        "max": ps_to_ns(*values.last().unwrap()),
    })
}

/// What one output port sent on one VL inside the window.
#[derive(Debug, Clone, Copy)]
pub struct PortVlCounters {
    pub packets: u64,
    pub bytes: u64,
    pub busy_ps: Time,
    pub credit_stall_ps: Time,
    /// Start of the current credit stall, or NEVER.
    pub stall_since: Time,
}

impl Default for PortVlCounters {
    fn default() -> Self {
        PortVlCounters { packets: 0, bytes: 0, busy_ps: 0, credit_stall_ps: 0, stall_since: NEVER }
    }
}

impl PortVlCounters {
    #[inline]
    pub fn set_stalled(&mut self, stalled: bool, now: Time, window: &Window) {
        if stalled {
            if self.stall_since == NEVER {
                self.stall_since = now;
            }
        } else if self.stall_since != NEVER {
            self.credit_stall_ps += window.overlap(self.stall_since, now);
            self.stall_since = NEVER;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_use_nearest_rank() {
        let mut v: Vec<Time> = (1..=1000).map(|x| x * 1000).collect();
        let s = latency_summary(&mut v);
        assert_eq!(s["p50"], 500.0);
        assert_eq!(s["p99"], 990.0);
        assert_eq!(s["p999"], 999.0);
        assert_eq!(s["max"], 1000.0);
        assert_eq!(s["mean"], 500.5);
    }

    #[test]
    fn window_overlap_clips_both_ends() {
        let w = Window { start: 100, end: 200 };
        assert_eq!(w.overlap(50, 150), 50);
        assert_eq!(w.overlap(150, 250), 50);
        assert_eq!(w.overlap(0, 90), 0);
    }
}
