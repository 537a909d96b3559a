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
    pub latencies: Latencies,
}

/// Message latencies, kept exactly up to `EXACT_LATENCIES` of them (every percentile exact), then
/// in a log-linear histogram whose buckets are 1/1024 of their value wide, so that a long run of
/// short messages cannot grow without bound (each kept latency took 8 bytes, three times over).
#[derive(Debug, Clone, Default)]
pub struct Latencies {
    exact: Vec<Time>,
    histogram: Option<Histogram>,
}

/// 2^22 latencies (32 MiB) per class before the histogram takes over.
pub const EXACT_LATENCIES: usize = 1 << 22;
const SUB_BITS: u32 = 10;
const SUB: u64 = 1 << SUB_BITS;

#[derive(Debug, Clone)]
struct Histogram {
    counts: Vec<u64>,
    count: u64,
    sum: u128,
    min: Time,
    max: Time,
}

impl Histogram {
    fn new() -> Histogram {
        Histogram { counts: vec![0; ((64 - SUB_BITS as u64 + 1) * SUB) as usize], count: 0, sum: 0, min: NEVER, max: 0 }
    }

    /// Values below SUB have a bucket each; above, SUB buckets per power of two.
    fn bucket(v: Time) -> usize {
        if v < SUB {
            return v as usize;
        }
        let e = 63 - v.leading_zeros();
        let m = (v >> (e - SUB_BITS)) & (SUB - 1);
        (SUB + (e - SUB_BITS) as u64 * SUB + m) as usize
    }

    /// The middle of a bucket's range.
    fn value(bucket: usize) -> Time {
        let b = bucket as u64;
        if b < SUB {
            return b;
        }
        let e = (b - SUB) / SUB + SUB_BITS as u64;
        let m = (b - SUB) % SUB;
        let low = (SUB + m) << (e - SUB_BITS as u64);
        low + (1u64 << (e - SUB_BITS as u64)) / 2
    }

    fn add(&mut self, v: Time) {
        self.counts[Self::bucket(v)] += 1;
        self.count += 1;
        self.sum += v as u128;
        self.min = self.min.min(v);
        self.max = self.max.max(v);
    }

    /// Nearest-rank percentile, within a bucket's width (0.1%) of the exact one.
    fn percentile(&self, p: f64) -> Time {
        let rank = ((p * self.count as f64).ceil() as u64).clamp(1, self.count);
        let mut seen = 0;
        for (b, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return Self::value(b).clamp(self.min, self.max);
            }
        }
        self.max
    }
}

impl Latencies {
    #[inline]
    pub fn push(&mut self, v: Time) {
        if self.histogram.is_none() && self.exact.len() == EXACT_LATENCIES {
            // Full (before the vector would double): from now on, the histogram.
            let mut h = Histogram::new();
            for &x in &self.exact {
                h.add(x);
            }
            self.histogram = Some(h);
            self.exact = Vec::new();
        }
        match &mut self.histogram {
            Some(h) => h.add(v),
            None => self.exact.push(v),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.exact.is_empty() && self.histogram.is_none()
    }

    pub fn summary(&mut self) -> Value {
        let Some(h) = &self.histogram else {
            return latency_summary(&mut self.exact);
        };
        json!({
            "count": h.count,
            "mean": h.sum as f64 / h.count as f64 / 1000.0,
            "p50": ps_to_ns(h.percentile(0.50)),
            "p99": ps_to_ns(h.percentile(0.99)),
            "p999": ps_to_ns(h.percentile(0.999)),
            "max": ps_to_ns(h.max),
            "approximate": true,
        })
    }
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
            "latency_ns": self.latencies.summary(),
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
    fn beyond_the_exact_cap_percentiles_come_from_the_histogram_within_its_width() {
        let n = EXACT_LATENCIES as u64 + 1000;
        let mut l = Latencies::default();
        // Each value once, from 1 ns to n ns in 1 ns steps: p50 is n / 2 ns, and so on.
        for i in 1..=n {
            l.push(i * 1000);
        }
        assert!(l.exact.is_empty() && l.histogram.is_some());
        let s = l.summary();
        assert_eq!(s["count"], n);
        assert_eq!(s["approximate"], true);
        assert_eq!(s["max"], n as f64);
        assert!((s["mean"].as_f64().unwrap() - (n + 1) as f64 / 2.0).abs() < 1e-6);
        for (key, p) in [("p50", 0.5), ("p99", 0.99), ("p999", 0.999)] {
            let exact = (p * n as f64).ceil();
            let got = s[key].as_f64().unwrap();
            assert!((got - exact).abs() <= exact / 1024.0, "{key}: {got} against {exact}");
        }
    }

    #[test]
    fn histogram_buckets_hold_their_values() {
        for v in [0, 1, 1023, 1024, 1025, 4096, 123_456_789, u64::MAX / 3] {
            let mid = Histogram::value(Histogram::bucket(v));
            assert!(mid.abs_diff(v) <= v / 1024 + 1, "{v} -> {mid}");
        }
    }

    #[test]
    fn window_overlap_clips_both_ends() {
        let w = Window { start: 100, end: 200 };
        assert_eq!(w.overlap(50, 150), 50);
        assert_eq!(w.overlap(150, 250), 50);
        assert_eq!(w.overlap(0, 90), 0);
    }
}
