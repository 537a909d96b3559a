//! Service-level policies: the per-job rule that picks each message's SL when a rank issues it
//! (QoS policies that must act per message, run inside the engine with parameters from Python).
//!
//! - `Job`: every message at the job's SL.
//! - `Ranks`: messages from/to chosen ranks at a high SL (process-level QoS, Savoie et al.).
//! - `SlowestRanks`: the same, the ranks chosen online from their MPI wait over the first
//!   iterations of the job's first run.
//! - `Spread`: messages spread over several SLs (multi-VL, Subramoni et al.).
//! - `LatencyHistory`: a tier per message from the latency its sender saw to that destination
//!   before (priority assignment, Khalilov et al., as reconstructed in docs/jobs.md).

use crate::config::{ConfigError, LatencyDirection, RankMatch, SlPolicyConfig, SlowRankMetric, SpreadBy};
use crate::units::Time;
use std::collections::HashMap;

pub struct SlPolicy {
    job_sl: u8,
    rule: Rule,
}

enum Rule {
    Job,
    Ranks {
        sl: u8,
        matching: RankMatch,
        chosen: Vec<bool>,
    },
    SlowestRanks(Box<SlowestRanks>),
    /// `next`: each rank's next SL index (round robin, per message or per new connection);
    /// `connections`: each (sender, peer) connection's SL index, fixed at its first message.
    Spread {
        sls: Vec<u8>,
        by: SpreadBy,
        next: Vec<u32>,
        connections: HashMap<(u32, u32), u32>,
    },
    LatencyHistory(Box<LatencyHistory>),
}

struct SlowestRanks {
    sl: u8,
    matching: RankMatch,
    count: usize,
    after_iterations: u32,
    metric: SlowRankMetric,
    /// MPI wait, delivered sends and their summed latency of each rank over its first
    /// `after_iterations` iterations (first run).
    wait: Vec<Time>,
    sends: Vec<u32>,
    send_latency: Vec<Time>,
    measured: u32,
    /// Empty until chosen.
    chosen: Vec<bool>,
}

struct LatencyHistory {
    sls: Vec<u8>,
    thresholds: Vec<f64>,
    direction: LatencyDirection,
    alpha: f64,
    cap: f64,
    /// Per (sender, destination, size class): looked up, never iterated (determinism).
    seen: HashMap<(u32, u32, u8), Seen>,
    top_bytes: Vec<u64>,
    total_bytes: Vec<u64>,
}

#[derive(Clone, Copy)]
struct Seen {
    best: Time,
    average: f64,
}

/// Size classes four times apart, so a latency is compared with those of similar messages.
fn size_class(bytes: u64) -> u8 {
    (bytes.max(1).ilog2() / 2) as u8
}

impl SlPolicy {
    /// Checks `cfg` for a job of `size` ranks running `iterations` iterations; errors name the
    /// scenario key under `key` (`jobs[2].sl_policy`).
    pub fn new(
        cfg: &SlPolicyConfig,
        job_sl: u8,
        size: u32,
        iterations: u32,
        key: &str,
    ) -> Result<SlPolicy, ConfigError> {
        let err = |k: &str, m: String| ConfigError::new(format!("{key}.{k}"), m);
        let check_sl = |k: &str, sl: u8| {
            if sl > 15 {
                Err(err(k, format!("expected a service level 0..15, got {sl}")))
            } else {
                Ok(())
            }
        };
        let rule = match cfg {
            SlPolicyConfig::Job => Rule::Job,
            SlPolicyConfig::Ranks { ranks, sl, matching } => {
                check_sl("sl", *sl)?;
                cfg.check_ranks(size as u64, key)?;
                let mut chosen = vec![false; size as usize];
                for &r in ranks {
                    chosen[r as usize] = true;
                }
                Rule::Ranks { sl: *sl, matching: *matching, chosen }
            }
            SlPolicyConfig::SlowestRanks { fraction, after_iterations, metric, sl, matching } => {
                check_sl("sl", *sl)?;
                if !(*fraction > 0.0 && *fraction <= 1.0) {
                    return Err(err("fraction", format!("expected a fraction in (0, 1], got {fraction}")));
                }
                if *after_iterations == 0 || *after_iterations > iterations {
                    return Err(err(
                        "after_iterations",
                        format!("expected 1..{iterations} (the workload's iterations), got {after_iterations}"),
                    ));
                }
                let count = ((*fraction * size as f64) - 1e-9).ceil().max(1.0) as usize;
                Rule::SlowestRanks(Box::new(SlowestRanks {
                    sl: *sl,
                    matching: *matching,
                    count: count.min(size as usize),
                    after_iterations: *after_iterations,
                    metric: *metric,
                    wait: vec![0; size as usize],
                    sends: vec![0; size as usize],
                    send_latency: vec![0; size as usize],
                    measured: 0,
                    chosen: Vec::new(),
                }))
            }
            SlPolicyConfig::Spread { sls, by } => {
                if sls.is_empty() {
                    return Err(err("sls", "expected at least one SL".into()));
                }
                for &sl in sls {
                    check_sl("sls", sl)?;
                }
                Rule::Spread { sls: sls.clone(), by: *by, next: vec![0; size as usize], connections: HashMap::new() }
            }
            SlPolicyConfig::LatencyHistory { sls, thresholds, direction, history_messages, high_bytes_cap } => {
                if sls.is_empty() {
                    return Err(err("sls", "expected at least one SL (lowest priority first)".into()));
                }
                for &sl in sls {
                    check_sl("sls", sl)?;
                }
                if thresholds.len() + 1 != sls.len() {
                    return Err(err(
                        "thresholds",
                        format!(
                            "expected {} thresholds for {} SLs, got {}",
                            sls.len() - 1,
                            sls.len(),
                            thresholds.len()
                        ),
                    ));
                }
                if thresholds.iter().any(|t| !(t.is_finite() && *t > 0.0))
                    || thresholds.windows(2).any(|w| w[1] <= w[0])
                {
                    return Err(err(
                        "thresholds",
                        format!("expected positive, strictly increasing ratios, got {thresholds:?}"),
                    ));
                }
                if *history_messages == 0 {
                    return Err(err("history_messages", "expected at least 1".into()));
                }
                if !(*high_bytes_cap > 0.0 && *high_bytes_cap <= 1.0) {
                    return Err(err("high_bytes_cap", format!("expected a fraction in (0, 1], got {high_bytes_cap}")));
                }
                Rule::LatencyHistory(Box::new(LatencyHistory {
                    sls: sls.clone(),
                    thresholds: thresholds.clone(),
                    direction: *direction,
                    // An exponential average with span H: the usual equivalent of an H-message window.
                    alpha: 2.0 / (*history_messages as f64 + 1.0),
                    cap: *high_bytes_cap,
                    seen: HashMap::new(),
                    top_bytes: vec![0; size as usize],
                    total_bytes: vec![0; size as usize],
                }))
            }
        };
        Ok(SlPolicy { job_sl, rule })
    }

    /// The SL of a message of `bytes` from rank `src` to rank `dst` (within the job); `on_node`: the two
    /// share a host, so the message goes through shared memory and opens no connection.
    #[inline]
    pub fn choose(&mut self, src: u32, dst: u32, bytes: u64, on_node: bool) -> u8 {
        match &mut self.rule {
            Rule::Job => self.job_sl,
            Rule::Ranks { sl, matching, chosen } => {
                if pick(*matching, chosen, src, dst) {
                    *sl
                } else {
                    self.job_sl
                }
            }
            Rule::SlowestRanks(s) => {
                if !s.chosen.is_empty() && pick(s.matching, &s.chosen, src, dst) {
                    s.sl
                } else {
                    self.job_sl
                }
            }
            Rule::Spread { sls, by, next, connections } => {
                let n = sls.len() as u32;
                let index = match by {
                    // As MVAPICH2 sets a QP's SL, from a per-process counter advanced at each
                    // connection set-up: a rank's connections take the SLs round robin in the
                    // order it first sends on them. Shared memory opens none (its SL is moot).
                    SpreadBy::Connection if on_node => 0,
                    SpreadBy::Connection => *connections.entry((src, dst)).or_insert_with(|| {
                        let i = next[src as usize];
                        next[src as usize] = (i + 1) % n;
                        i
                    }),
                    SpreadBy::Destination => dst % n,
                    SpreadBy::Message => {
                        let i = next[src as usize];
                        next[src as usize] = (i + 1) % n;
                        i
                    }
                };
                sls[index as usize]
            }
            Rule::LatencyHistory(h) => h.choose(src, dst, bytes),
        }
    }

    /// A message's network latency, seen by its sender `src`: issue to last byte delivered, less,
    /// for a rendezvous, the time its RTS waited at the receiver for a matching receive.
    #[inline]
    pub fn observe(&mut self, src: u32, dst: u32, bytes: u64, latency: Time) {
        if let Rule::LatencyHistory(h) = &mut self.rule {
            let entry =
                h.seen.entry((src, dst, size_class(bytes))).or_insert(Seen { best: latency, average: latency as f64 });
            entry.best = entry.best.min(latency);
            entry.average += h.alpha * (latency as f64 - entry.average);
        }
    }

    /// Rank `rank` finished `iteration` of run `run` after waiting `wait` in MPI, with `sends`
    /// of its messages delivered in it after `send_latency` in total.
    pub fn iteration_done(&mut self, rank: u32, run: u32, iteration: u32, wait: Time, sends: u32, send_latency: Time) {
        let Rule::SlowestRanks(s) = &mut self.rule else { return };
        if run != 0 || !s.chosen.is_empty() || iteration >= s.after_iterations {
            return;
        }
        s.wait[rank as usize] += wait;
        s.sends[rank as usize] += sends;
        s.send_latency[rank as usize] += send_latency;
        if iteration + 1 == s.after_iterations {
            s.measured += 1;
            if s.measured as usize == s.wait.len() {
                s.choose();
            }
        }
    }

    /// The prioritised ranks of a rank-based rule: `Some(None)` while not yet chosen.
    pub fn prioritized(&self) -> Option<Option<Vec<u32>>> {
        let listed = |chosen: &[bool]| chosen.iter().enumerate().filter(|(_, &c)| c).map(|(r, _)| r as u32).collect();
        match &self.rule {
            Rule::Ranks { chosen, .. } => Some(Some(listed(chosen))),
            Rule::SlowestRanks(s) => Some((!s.chosen.is_empty()).then(|| listed(&s.chosen))),
            _ => None,
        }
    }
}

#[inline]
fn pick(matching: RankMatch, chosen: &[bool], src: u32, dst: u32) -> bool {
    match matching {
        RankMatch::Source => chosen[src as usize],
        RankMatch::Destination => chosen[dst as usize],
        RankMatch::Either => chosen[src as usize] || chosen[dst as usize],
    }
}

impl SlowestRanks {
    fn choose(&mut self) {
        let mut order: Vec<u32> = (0..self.wait.len() as u32).collect();
        // Stable sort: equal waits keep the lower rank first.
        match self.metric {
            SlowRankMetric::LeastWait => order.sort_by_key(|&r| self.wait[r as usize]),
            SlowRankMetric::MostWait => order.sort_by_key(|&r| std::cmp::Reverse(self.wait[r as usize])),
            SlowRankMetric::SlowestSends => {
                // Mean latency per delivered send, compared exactly: a/b > c/d as a*d > c*b.
                let (lat, n) = (&self.send_latency, &self.sends);
                order.sort_by(|&a, &b| {
                    let (a, b) = (a as usize, b as usize);
                    let left = lat[b] as u128 * n[a].max(1) as u128;
                    let right = lat[a] as u128 * n[b].max(1) as u128;
                    left.cmp(&right)
                });
            }
        }
        // Ranks that sent nothing come last (stable: each group keeps the metric's order): an SL
        // moves only a rank's own sends, and such a rank waits 0, least-wait's first choice.
        order.sort_by_key(|&r| self.sends[r as usize] == 0);
        self.chosen = vec![false; self.wait.len()];
        for &r in &order[..self.count] {
            self.chosen[r as usize] = true;
        }
    }
}

impl LatencyHistory {
    fn choose(&mut self, src: u32, dst: u32, bytes: u64) -> u8 {
        let ratio = match self.seen.get(&(src, dst, size_class(bytes))) {
            Some(s) if s.best > 0 => s.average / s.best as f64,
            _ => 1.0,
        };
        let delayed = self.thresholds.iter().filter(|&&t| ratio >= t).count();
        let top = self.sls.len() - 1;
        let mut tier = match self.direction {
            LatencyDirection::Promote => delayed,
            LatencyDirection::Demote => top - delayed,
        };
        let i = src as usize;
        self.total_bytes[i] += bytes;
        if tier == top && top > 0 && (self.top_bytes[i] + bytes) as f64 > self.cap * self.total_bytes[i] as f64 {
            tier = top - 1;
        }
        if tier == top {
            self.top_bytes[i] += bytes;
        }
        self.sls[tier]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connections_take_a_rank_s_next_sl_at_first_contact_and_keep_it() {
        let cfg = SlPolicyConfig::Spread { sls: vec![1, 2], by: SpreadBy::Connection };
        let mut p = SlPolicy::new(&cfg, 0, 8, 1, "jobs[0].sl_policy").unwrap();
        // Rank 0's peers in the order it first sends to them: 5, 3, 6 -> SLs 1, 2, 1.
        assert_eq!([5, 3, 6].map(|dst| p.choose(0, dst, 8, false)), [1, 2, 1]);
        assert_eq!(p.choose(0, 5, 8, false), 1, "a connection keeps its SL");
        assert_eq!(p.choose(0, 1, 8, true), 1, "a peer on the host opens no connection");
        assert_eq!(p.choose(0, 7, 8, false), 2, "and takes no turn");
        // Every rank has its own counter: at a fixed offset (rank r to r + 1) all SLs are used,
        // where (src + dst) mod n had given every pair the same parity, one SL of two.
        let mut q = SlPolicy::new(&cfg, 0, 8, 1, "jobs[0].sl_policy").unwrap();
        let ring: Vec<u8> = (0..8).map(|r| q.choose(r, (r + 1) % 8, 8, false)).collect();
        assert_eq!(ring, [1; 8], "each rank's first connection takes its first SL");
        let second: Vec<u8> = (0..8).map(|r| q.choose(r, (r + 2) % 8, 8, false)).collect();
        assert_eq!(second, [2; 8]);
    }

    fn history(direction: LatencyDirection, cap: f64) -> SlPolicy {
        let cfg = SlPolicyConfig::LatencyHistory {
            sls: vec![0, 1, 2],
            thresholds: vec![1.5, 4.0],
            direction,
            history_messages: 1, // alpha = 1: the average is the last latency
            high_bytes_cap: cap,
        };
        SlPolicy::new(&cfg, 0, 4, 10, "jobs[0].sl_policy").unwrap()
    }

    #[test]
    fn tiers_follow_the_ratio_of_last_to_best_latency() {
        let mut p = history(LatencyDirection::Promote, 1.0);
        assert_eq!(p.choose(0, 1, 4096, false), 0); // nothing seen: ratio 1
        p.observe(0, 1, 4096, 1000);
        p.observe(0, 1, 4096, 2000); // ratio 2: past 1.5
        assert_eq!(p.choose(0, 1, 4096, false), 1);
        p.observe(0, 1, 4096, 5000); // ratio 5: past 4
        assert_eq!(p.choose(0, 1, 4096, false), 2);
        assert_eq!(p.choose(0, 2, 4096, false), 0, "another destination has its own history");
        assert_eq!(p.choose(0, 1, 64, false), 0, "another size class has its own history");
        let mut d = history(LatencyDirection::Demote, 1.0);
        assert_eq!(d.choose(0, 1, 4096, false), 2);
        d.observe(0, 1, 4096, 1000);
        d.observe(0, 1, 4096, 5000);
        assert_eq!(d.choose(0, 1, 4096, false), 0);
    }

    #[test]
    fn the_cap_holds_the_top_tier_share() {
        let mut p = history(LatencyDirection::Demote, 0.25); // demote: every fresh message is top tier
        let top = (0..100).filter(|_| p.choose(3, 1, 1000, false) == 2).count();
        assert!((24..=26).contains(&top), "{top} of 100 messages at the top tier with a 25% cap");
    }

    #[test]
    fn slowest_ranks_are_chosen_once_every_rank_has_been_measured() {
        let cfg = SlPolicyConfig::SlowestRanks {
            fraction: 0.5,
            after_iterations: 2,
            metric: SlowRankMetric::LeastWait,
            sl: 3,
            matching: RankMatch::Destination,
        };
        let mut p = SlPolicy::new(&cfg, 1, 4, 5, "k").unwrap();
        let waits = [40, 10, 30, 20];
        for (rank, w) in waits.iter().enumerate() {
            p.iteration_done(rank as u32, 0, 0, *w, 1, 0);
        }
        assert_eq!(p.prioritized(), Some(None));
        for (rank, w) in waits.iter().enumerate().take(3) {
            p.iteration_done(rank as u32, 0, 1, *w, 1, 0);
        }
        assert_eq!(p.choose(0, 1, 8, false), 1, "not chosen before the last rank is measured");
        p.iteration_done(3, 0, 1, 20, 1, 0);
        assert_eq!(p.prioritized(), Some(Some(vec![1, 3])));
        assert_eq!((p.choose(0, 1, 8, false), p.choose(1, 0, 8, false)), (3, 1), "matching the destination");
    }

    #[test]
    fn ranks_that_sent_nothing_are_chosen_last() {
        // A 4-rank ping-pong: ranks 2 and 3 never send and wait 0 in MPI.
        let cfg = SlPolicyConfig::SlowestRanks {
            fraction: 0.25,
            after_iterations: 1,
            metric: SlowRankMetric::LeastWait,
            sl: 1,
            matching: RankMatch::Source,
        };
        let mut p = SlPolicy::new(&cfg, 0, 4, 3, "k").unwrap();
        for (rank, (wait, sends)) in [(40, 1), (30, 1), (0, 0), (0, 0)].iter().enumerate() {
            p.iteration_done(rank as u32, 0, 0, *wait, *sends, 100);
        }
        assert_eq!(p.prioritized(), Some(Some(vec![1])), "the sender that waits least, not idle rank 2");
    }

    #[test]
    fn slowest_sends_is_the_highest_mean_latency_per_delivered_send() {
        let cfg = SlPolicyConfig::SlowestRanks {
            fraction: 0.25,
            after_iterations: 1,
            metric: SlowRankMetric::SlowestSends,
            sl: 2,
            matching: RankMatch::Source,
        };
        let mut p = SlPolicy::new(&cfg, 0, 4, 3, "k").unwrap();
        // Means: 100, 150, 120 and 0 (nothing delivered): rank 1 is the slowest.
        for (rank, (sends, latency)) in [(2, 200), (4, 600), (1, 120), (0, 0)].iter().enumerate() {
            p.iteration_done(rank as u32, 0, 0, 0, *sends, *latency);
        }
        assert_eq!(p.prioritized(), Some(Some(vec![1])));
    }

    #[test]
    fn bad_parameters_name_their_key() {
        let bad = SlPolicyConfig::Spread { sls: vec![], by: SpreadBy::Message };
        let e = SlPolicy::new(&bad, 0, 4, 1, "jobs[1].sl_policy").err().unwrap();
        assert_eq!(e.key, "jobs[1].sl_policy.sls");
        let ranks = SlPolicyConfig::Ranks { ranks: vec![9], sl: 1, matching: RankMatch::Source };
        assert_eq!(SlPolicy::new(&ranks, 0, 4, 1, "j").err().unwrap().key, "j.ranks");
        let late = SlPolicyConfig::SlowestRanks {
            fraction: 0.1,
            after_iterations: 6,
            metric: SlowRankMetric::MostWait,
            sl: 1,
            matching: RankMatch::Either,
        };
        assert_eq!(SlPolicy::new(&late, 0, 4, 5, "j").err().unwrap().key, "j.after_iterations");
    }
}
