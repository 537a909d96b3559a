//! Open-loop synthetic traffic: one source per (traffic table, sending host).

use crate::config::{Arrival, ConfigError, Pattern, TrafficConfig};
use crate::stats::Window;
use crate::topology::NONE;
use crate::units::{round_to_time, Rate, Time, NEVER};
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64Mcg;

/// Independent random stream for one purpose and index, so randomness added in one place does
/// not shift another's sequence.
pub fn stream_rng(seed: u64, purpose: u64, index: u64) -> Pcg64Mcg {
    let mix =
        seed ^ purpose.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ index.wrapping_mul(0xC2B2_AE3D_27D4_EB4F).rotate_left(17);
    Pcg64Mcg::seed_from_u64(mix)
}

pub const RNG_TRAFFIC: u64 = 1;
pub const RNG_PERMUTATION: u64 = 2;
pub const RNG_ROUTING: u64 = 3;
pub const RNG_REFUSED: u64 = 4;

/// How a source picks destinations.
enum Target {
    /// Always the same host (permutation, shift, incast).
    Fixed(u32),
    /// Uniform over `destinations` minus the sender itself (at `self_index`, or NONE).
    Uniform { self_index: u32 },
    /// With probability `fraction`, uniform over the hotspot hosts, otherwise uniform.
    Hotspot { self_index: u32, hot_self_index: u32, fraction: f64 },
}

/// One host's share of a `[[traffic]]` table.
pub struct Source {
    pub traffic: u16,
    pub host: u32,
    pub sl: u8,
    pub message_bytes: u64,
    /// None: saturating (refill when a message leaves the HCA).
    pub mean_gap_ps: Option<f64>,
    pub arrival: Arrival,
    pub saturate_depth: u32,
    /// Open-loop sources stop creating messages while this many wait in the send queue.
    pub max_queued: u32,
    /// Messages of this source still waiting in its HCA send queue.
    pub queued: u32,
    /// Since when an open-loop source with a full send queue has been paused (NEVER: running).
    pub paused_since: Time,
    /// When the message that filled the queue arrived: periodic arrivals stay on its grid.
    pub last_arrival: Time,
    target: Target,
    rng: Pcg64Mcg,
}

/// Per-table data shared by its sources.
pub struct TrafficTable {
    pub destinations: Vec<u32>,
    pub hotspots: Vec<u32>,
    pub senders: u32,
}

fn position(list: &[u32], host: u32) -> u32 {
    list.iter().position(|&d| d == host).map_or(NONE, |i| i as u32)
}

/// Builds every source; errors name the traffic table and key.
pub fn build_sources(
    cfgs: &[TrafficConfig],
    hosts: u32,
    seed: u64,
    mtu: u32,
    header: u32,
    rate: Rate,
) -> Result<(Vec<Source>, Vec<TrafficTable>), ConfigError> {
    let mut sources = Vec::new();
    let mut tables = Vec::new();
    for (t, cfg) in cfgs.iter().enumerate() {
        let key = |k: &str| format!("traffic[{t}].{k}");
        for (k, list) in
            [("hosts", &cfg.hosts), ("destinations", &cfg.destinations), ("hotspot_hosts", &cfg.hotspot_hosts)]
        {
            if let Some(&h) = list.iter().find(|&&h| h >= hosts) {
                return Err(ConfigError::new(
                    key(k),
                    format!("host {h} does not exist (the fabric has hosts 0..{})", hosts - 1),
                ));
            }
        }
        let dests = &cfg.destinations;
        let packets = cfg.message_bytes.div_ceil(mtu as u64);
        let wire = cfg.message_bytes + packets * header as u64;
        // Unrounded: a byte time rounded to whole picoseconds is 0 above 16 Tb/s and 10% short at
        // 2400 Gb/s (3.33 ps), which skewed the offered load.
        let mean_gap_ps = cfg.load.map(|load| rate.ps_per_byte() * wire as f64 / load);
        // Fixed targets for the deterministic patterns.
        let fixed: Vec<u32> = match cfg.pattern {
            Pattern::Permutation => permutation(&cfg.hosts, dests, &mut stream_rng(seed, RNG_PERMUTATION, t as u64)),
            Pattern::Shift => {
                cfg.hosts.iter().enumerate().map(|(i, _)| dests[(i + cfg.shift as usize) % dests.len()]).collect()
            }
            Pattern::Incast => vec![dests[0]; cfg.hosts.len()],
            _ => Vec::new(),
        };
        let mut senders = 0;
        for (i, &host) in cfg.hosts.iter().enumerate() {
            let self_index = position(dests, host);
            let target = match cfg.pattern {
                Pattern::Uniform => Target::Uniform { self_index },
                Pattern::Hotspot => Target::Hotspot {
                    self_index,
                    hot_self_index: position(&cfg.hotspot_hosts, host),
                    fraction: cfg.hotspot_fraction,
                },
                _ => Target::Fixed(fixed[i]),
            };
            match target {
                // The incast target itself has nobody to send to.
                Target::Fixed(d) if d == host && cfg.pattern == Pattern::Incast => continue,
                Target::Fixed(d) if d == host => {
                    return Err(ConfigError::new(
                        key(if cfg.pattern == Pattern::Shift { "shift" } else { "destinations" }),
                        format!("host {host} would send to itself"),
                    ))
                }
                Target::Uniform { self_index } | Target::Hotspot { self_index, .. }
                    if dests.len() == 1 && self_index != NONE =>
                {
                    return Err(ConfigError::new(
                        key("destinations"),
                        format!("host {host} has no destination but itself"),
                    ))
                }
                Target::Hotspot { fraction, .. } if fraction > 0.0 && cfg.hotspot_hosts.is_empty() => {
                    return Err(ConfigError::new(key("hotspot_hosts"), "expected at least one hotspot host"))
                }
                _ => {}
            }
            senders += 1;
            sources.push(Source {
                traffic: t as u16,
                host,
                sl: cfg.sl,
                message_bytes: cfg.message_bytes,
                mean_gap_ps,
                arrival: cfg.arrival,
                saturate_depth: cfg.saturate_depth,
                max_queued: cfg.max_queued_messages,
                queued: 0,
                paused_since: NEVER,
                last_arrival: 0,
                target,
                rng: stream_rng(seed, RNG_TRAFFIC, ((t as u64) << 32) | host as u64),
            });
        }
        if senders == 0 {
            // Only the incast target itself was listed: a table that would send nothing at all.
            return Err(ConfigError::new(
                key("hosts"),
                format!("no host sends: the only host listed is the incast target {}", dests[0]),
            ));
        }
        tables.push(TrafficTable { destinations: dests.clone(), hotspots: cfg.hotspot_hosts.clone(), senders });
    }
    Ok((sources, tables))
}

/// A random one-to-one mapping of senders to destinations that avoids self-sends where possible:
/// when senders and destinations are the same set, a random single cycle (a derangement).
fn permutation(senders: &[u32], dests: &[u32], rng: &mut Pcg64Mcg) -> Vec<u32> {
    let mut same_set = senders.len() == dests.len();
    if same_set {
        let (mut a, mut b) = (senders.to_vec(), dests.to_vec());
        a.sort_unstable();
        b.sort_unstable();
        same_set = a == b;
    }
    if same_set {
        let mut order = senders.to_vec();
        order.shuffle(rng);
        let mut map = std::collections::HashMap::new();
        for k in 0..order.len() {
            map.insert(order[k], order[(k + 1) % order.len()]);
        }
        senders.iter().map(|s| map[s]).collect()
    } else {
        let mut shuffled = dests.to_vec();
        shuffled.shuffle(rng);
        senders
            .iter()
            .enumerate()
            .map(|(i, &s)| {
                let d = shuffled[i % shuffled.len()];
                if d == s {
                    shuffled[(i + 1) % shuffled.len()]
                } else {
                    d
                }
            })
            .collect()
    }
}

fn uniform_excluding(list: &[u32], self_index: u32, rng: &mut Pcg64Mcg) -> u32 {
    if self_index == NONE {
        list[rng.gen_range(0..list.len())]
    } else {
        let r = rng.gen_range(0..list.len() - 1) as u32;
        list[(r + (r >= self_index) as u32) as usize]
    }
}

impl Source {
    pub fn next_destination(&mut self, table: &TrafficTable) -> u32 {
        match self.target {
            Target::Fixed(d) => d,
            Target::Uniform { self_index } => uniform_excluding(&table.destinations, self_index, &mut self.rng),
            Target::Hotspot { self_index, hot_self_index, fraction } => {
                // A hotspot host whose only hotspot is itself sends uniformly.
                let has_other_hotspot = table.hotspots.len() > (hot_self_index != NONE) as usize;
                if self.rng.gen::<f64>() < fraction && has_other_hotspot {
                    uniform_excluding(&table.hotspots, hot_self_index, &mut self.rng)
                } else {
                    uniform_excluding(&table.destinations, self_index, &mut self.rng)
                }
            }
        }
    }

    /// Time until the next message of an open-loop source.
    pub fn next_gap(&mut self) -> Time {
        let mean = self.mean_gap_ps.expect("saturating sources have no arrival process");
        match self.arrival {
            Arrival::Periodic => mean.round() as Time,
            Arrival::Poisson => {
                let u: f64 = self.rng.gen();
                round_to_time(-(1.0 - u).ln() * mean)
            }
        }
    }

    /// A paused source resumes at `now` (a message left its full send queue). Returns when its
    /// next message arrives and how many arrivals it refused inside `window` while paused.
    /// Poisson: a fresh gap from now is exact (memoryless), and the refused arrivals of a paused
    /// interval are Poisson with mean rate x (its overlap with the window). Periodic: the next
    /// arrival stays on the source's grid; the refused ones are the grid points in between.
    pub fn resume(&mut self, now: Time, window: &Window, refused_rng: &mut Pcg64Mcg) -> (Time, u64) {
        let refused = self.refused_until(now, window, refused_rng);
        self.paused_since = NEVER;
        let next = match self.arrival {
            Arrival::Poisson => now + self.next_gap(),
            Arrival::Periodic => {
                let period = self.period();
                self.last_arrival + (now - self.last_arrival).div_ceil(period).max(1) * period
            }
        };
        (next, refused)
    }

    /// Arrivals refused inside `window` from the start of the pause until `now` (exclusive).
    pub fn refused_until(&self, now: Time, window: &Window, refused_rng: &mut Pcg64Mcg) -> u64 {
        let from = self.paused_since;
        match self.arrival {
            Arrival::Poisson => {
                let mean = window.overlap(from, now) as f64 / self.mean_gap_ps.expect("open-loop source");
                if mean > 0.0 {
                    rand_distr::Poisson::new(mean).map_or(0, |d| refused_rng.sample(d) as u64)
                } else {
                    0
                }
            }
            Arrival::Periodic => {
                // Grid points last_arrival + j * period, j >= 1, before `now` and inside the window.
                let (p, period) = (self.last_arrival, self.period());
                let after = |t: Time| if t > p { (t - p).div_ceil(period) } else { 0 };
                let first = after(window.start).max(1);
                let end = after(window.end).min(after(now));
                end.saturating_sub(first)
            }
        }
    }

    fn period(&self) -> Time {
        (self.mean_gap_ps.expect("open-loop source").round() as Time).max(1)
    }

    /// Random phase for the first message, so periodic sources do not fire in lockstep.
    pub fn first_arrival(&mut self) -> Time {
        match self.arrival {
            Arrival::Periodic => (self.rng.gen::<f64>() * self.mean_gap_ps.unwrap()).round() as Time,
            Arrival::Poisson => self.next_gap(),
        }
    }
}
