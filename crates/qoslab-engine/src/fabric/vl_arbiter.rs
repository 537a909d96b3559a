//! The InfiniBand VL arbiter of one output port: a high- and a low-priority table of (VL, weight)
//! entries served by weighted round robin, the high table first but bounded by `high_limit`.

use crate::units::CREDIT_BYTES;

/// Bytes of high-priority traffic per `high_limit` unit.
const HIGH_LIMIT_UNIT_BYTES: u32 = 4096;

/// The tables of one port type, as OpenSM programs them (weights in 64-byte units).
#[derive(Debug, Clone)]
pub struct ArbTables {
    /// Entries with weight 0 are dropped: the arbiter skips them anyway.
    high: Vec<(u8, u32)>,
    low: Vec<(u8, u32)>,
    high_mask: u16,
    low_mask: u16,
    /// Per VL, bit i set when entry i of the table serves it (tables of up to 64 entries, as
    /// InfiniBand's; longer ones leave these empty and are searched entry by entry).
    high_positions: [u64; 16],
    low_positions: [u64; 16],
    /// High-priority bytes allowed while low-priority packets wait; None = unbounded (255).
    high_limit_bytes: Option<u32>,
}

impl ArbTables {
    pub fn new(high: &[(u8, u8)], low: &[(u8, u8)], high_limit: u8) -> ArbTables {
        let keep = |t: &[(u8, u8)]| -> Vec<(u8, u32)> {
            t.iter().filter(|e| e.1 > 0).map(|&(vl, w)| (vl, w as u32)).collect()
        };
        let (high, low) = (keep(high), keep(low));
        let mask = |t: &[(u8, u32)]| t.iter().fold(0u16, |m, e| m | (1 << e.0));
        let positions = |t: &[(u8, u32)]| {
            let mut p = [0u64; 16];
            if t.len() <= 64 {
                for (i, e) in t.iter().enumerate() {
                    p[e.0 as usize] |= 1 << i;
                }
            }
            p
        };
        ArbTables {
            high_mask: mask(&high),
            low_mask: mask(&low),
            high_positions: positions(&high),
            low_positions: positions(&low),
            high,
            low,
            // 0 means "one packet", so at least one byte's worth is always allowed.
            high_limit_bytes: (high_limit != 255).then(|| (high_limit as u32 * HIGH_LIMIT_UNIT_BYTES).max(1)),
        }
    }
}

/// Per-port arbitration progress: where each table's round robin stands.
#[derive(Debug, Clone, Default)]
pub struct ArbState {
    high_index: u8,
    low_index: u8,
    /// Credits the current entry has used: at most its weight (255) plus one packet's credits.
    high_used: u16,
    low_used: u16,
    /// High-priority bytes sent since a low-priority packet last went while one was waiting.
    /// Saturating: it is only compared with the high limit (at most 255 x 4 KiB), so 32 bits
    /// keep the arbiter state, and with it the port's line, small.
    high_bytes: u32,
}

/// The arbiter's decision for one packet slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grant {
    pub vl: u8,
    pub high: bool,
    /// Whether a low-priority VL was ready when this grant was made.
    pub low_waiting: bool,
}

impl ArbState {
    /// Picks the VL to serve next among `ready` (bit v set = VL v has a packet it may send now).
    /// Returns None when no table entry covers a ready VL.
    #[inline]
    pub fn select(&mut self, t: &ArbTables, ready: u16) -> Option<Grant> {
        let high_ready = t.high_mask & ready != 0;
        let low_ready = t.low_mask & ready != 0;
        let high_allowed = match t.high_limit_bytes {
            None => true,
            Some(limit) => !low_ready || self.high_bytes < limit,
        };
        if high_ready && high_allowed {
            let vl = pick(&t.high, &t.high_positions, &mut self.high_index, &mut self.high_used, ready);
            Some(Grant { vl, high: true, low_waiting: low_ready })
        } else if low_ready {
            let vl = pick(&t.low, &t.low_positions, &mut self.low_index, &mut self.low_used, ready);
            Some(Grant { vl, high: false, low_waiting: true })
        } else {
            None
        }
    }

    /// Charges the packet that was sent under `grant` against its entry and the high limit.
    #[inline]
    pub fn charge(&mut self, grant: Grant, wire_bytes: u32) {
        let credits = wire_bytes.div_ceil(CREDIT_BYTES);
        if grant.high {
            self.high_used += credits as u16;
            if grant.low_waiting {
                self.high_bytes = self.high_bytes.saturating_add(wire_bytes);
            }
        } else {
            self.low_used += credits as u16;
            self.high_bytes = 0;
        }
    }
}

/// Weighted round robin inside one table: stay on the current entry while it has weight left
/// (so its last packet may overshoot), otherwise move on to the next entry whose VL is ready.
#[inline]
fn pick(entries: &[(u8, u32)], positions: &[u64; 16], index: &mut u8, used: &mut u16, ready: u16) -> u8 {
    let n = entries.len();
    // `index` only ever holds a position below n; wrapping by compare avoids a division.
    let mut i = *index as usize;
    // Usually the current entry still has weight left and its VL is ready.
    let (vl, weight) = entries[i];
    if ready & (1 << vl) != 0 && (*used as u32) < weight && !mutation::skip_current_entry() {
        return vl;
    }
    if n <= 64 {
        // The next entry (cyclically, after the current one) whose VL is ready; weights are
        // never 0, so it has weight left once `used` restarts. The same as the search below.
        let mut candidates = 0u64;
        let mut vls = ready;
        while vls != 0 {
            candidates |= positions[vls.trailing_zeros() as usize];
            vls &= vls - 1;
        }
        let after = candidates & (!0u64).checked_shl(i as u32 + 1).unwrap_or(0);
        let next = if after != 0 { after } else { candidates };
        if next != 0 {
            let j = next.trailing_zeros() as usize;
            *index = j as u8;
            *used = 0;
            return entries[j].0;
        }
    }
    for _ in 0..n {
        i += 1;
        if i == n {
            i = 0;
        }
        *used = 0;
        let (vl, weight) = entries[i];
        if ready & (1 << vl) != 0 && (*used as u32) < weight {
            *index = i as u8;
            return vl;
        }
    }
    unreachable!("pick is only called when a table entry covers a ready VL")
}

/// A one-rule change of `pick` that tests can switch on, to show that the golden net catches it
/// (src/golden_mutation.rs). Outside `cfg(test)` it is a constant `false`, so release builds
/// compile exactly the code they had without it.
pub(crate) mod mutation {
    #[cfg(test)]
    thread_local! {
        // Per thread: the other tests, which run in parallel, keep the real arbiter.
        static SKIP_CURRENT_ENTRY: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    }

    /// Whether to stop serving the current entry while it has weight left (every packet then
    /// moves on to the next ready entry: weighted round robin becomes plain round robin).
    #[cfg(test)]
    pub(crate) fn skip_current_entry() -> bool {
        SKIP_CURRENT_ENTRY.with(|s| s.get())
    }

    #[cfg(not(test))]
    #[inline(always)]
    pub(crate) const fn skip_current_entry() -> bool {
        false
    }

    #[cfg(test)]
    pub(crate) fn set_skip_current_entry(on: bool) {
        SKIP_CURRENT_ENTRY.with(|s| s.set(on));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Serves `packets` slots with every VL in `ready` always backlogged; counts bytes per VL.
    fn serve(t: &ArbTables, ready: u16, wire: u32, packets: usize) -> [u64; 16] {
        let mut s = ArbState::default();
        let mut bytes = [0u64; 16];
        for _ in 0..packets {
            let g = s.select(t, ready).unwrap();
            s.charge(g, wire);
            bytes[g.vl as usize] += wire as u64;
        }
        bytes
    }

    #[test]
    fn backlogged_vls_share_in_proportion_to_weights() {
        // 5-credit packets: weights 200 and 100 are 40 and 20 whole packets, so exactly 2:1.
        let t = ArbTables::new(&[], &[(0, 200), (1, 100)], 0);
        let b = serve(&t, 0b11, 5 * 64, 6000);
        assert_eq!(b[0], 2 * b[1]);
    }

    #[test]
    fn last_packet_overshoots_so_small_weights_still_pass_big_packets() {
        // OpenSM's default weight 4 (256 B) still passes 4 KiB packets, one per visit.
        let t = ArbTables::new(&[], &[(0, 4), (1, 4)], 0);
        let b = serve(&t, 0b11, 4122, 100);
        assert_eq!(b[0], b[1]);
    }

    #[test]
    fn high_table_starves_low_at_limit_255() {
        let t = ArbTables::new(&[(1, 1)], &[(0, 255)], 255);
        let b = serve(&t, 0b11, 4122, 1000);
        assert_eq!(b[0], 0);
    }

    #[test]
    fn high_limit_zero_alternates_one_high_one_low() {
        let t = ArbTables::new(&[(1, 255)], &[(0, 255)], 0);
        let b = serve(&t, 0b11, 4122, 1000);
        assert_eq!(b[0], b[1]);
    }

    #[test]
    fn high_limit_bounds_high_bytes_between_low_packets() {
        // limit 4 = 16 KiB: with 2 KiB packets, 8 high packets then 1 low packet.
        let t = ArbTables::new(&[(1, 255)], &[(0, 255)], 4);
        let b = serve(&t, 0b11, 2048, 900);
        assert_eq!(b[1], 8 * b[0]);
    }

    #[test]
    fn entries_of_idle_vls_are_skipped() {
        let t = ArbTables::new(&[], &[(0, 10), (1, 10), (2, 10)], 0);
        let b = serve(&t, 0b100, 640, 10);
        assert_eq!(b[2], 6400);
    }

    /// The weighted round robin as a plain search, entry by entry.
    fn reference_pick(entries: &[(u8, u32)], index: &mut u8, used: &mut u16, ready: u16) -> u8 {
        let mut i = *index as usize;
        for _ in 0..=entries.len() {
            let (vl, weight) = entries[i];
            if ready & (1 << vl) != 0 && (*used as u32) < weight {
                *index = i as u8;
                return vl;
            }
            i = (i + 1) % entries.len();
            *used = 0;
        }
        unreachable!()
    }

    #[test]
    fn pick_matches_the_plain_search() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(3);
        for _ in 0..200 {
            let entries: Vec<(u8, u32)> =
                (0..rng.gen_range(1..=64)).map(|_| (rng.gen_range(0..16u8), rng.gen_range(1..=255u32))).collect();
            let positions = {
                let mut p = [0u64; 16];
                for (i, e) in entries.iter().enumerate() {
                    p[e.0 as usize] |= 1 << i;
                }
                p
            };
            let covered = entries.iter().fold(0u16, |m, e| m | (1 << e.0));
            let (mut index, mut used) = (0u8, 0u16);
            let (mut ref_index, mut ref_used) = (0u8, 0u16);
            for _ in 0..200 {
                let ready = rng.gen::<u16>() & covered;
                if ready == 0 {
                    continue;
                }
                let vl = pick(&entries, &positions, &mut index, &mut used, ready);
                assert_eq!(vl, reference_pick(&entries, &mut ref_index, &mut ref_used, ready));
                assert_eq!((index, used), (ref_index, ref_used));
                let credits = rng.gen_range(1..=70u16);
                used += credits;
                ref_used += credits;
            }
        }
    }

    #[test]
    fn low_table_serves_when_high_has_nothing_ready() {
        let t = ArbTables::new(&[(1, 255)], &[(0, 255)], 255);
        let b = serve(&t, 0b01, 4122, 10);
        assert_eq!(b[0], 41220);
    }
}
