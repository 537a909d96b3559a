//! Interference attribution (`run.interference`): who delayed whom, and where. Each wait is
//! charged to a class (a traffic table or an MPI job), the victim being the waiting packet's:
//!
//! At an output port (`Kind::Output`), a packet at the head of its queue, filed with the output:
//! - while the port transmits, every packet filed there (on any VL: waiting for the link, or for
//!   its VL's turn) is charged the transmission time, to the class of the packet on the wire;
//! - while the port sits idle because its requests lack downstream credits, each packet stalled
//!   on a VL is charged the idle time, to the class of the packet at the head of the downstream
//!   buffer it waits on (the one holding the space), or to its own class when that buffer's
//!   space is only in flight back (its own earlier packets hold it).
//!
//! In a buffer (`Kind::Buffer`), a packet behind others in its queue (an input buffer's FIFO or
//! an HCA send queue): from its arrival until its predecessor's tail has left, to the class of
//! that predecessor (head-of-line blocking), at the output the predecessor was filed with.
//!
//! A head counts as filed from the moment it reaches the head of a queue that is free (its
//! header has arrived, less the switch delay). Charges are clipped to the measurement window.
//! The heads waiting at a port are exactly its filed requests whose queues are free, so they are
//! found by walking the port's request lists when a transmission starts there with requests
//! still filed (the lists arbitration has just scanned), not counted on every filing and grant.
//! Off (the default), none of this runs: the engine checks one `Option` per new head and
//! transmission.

use super::prechecked::PrecheckedVec;
use super::state::Packet;
use crate::fabric::queue::Queue;
use crate::ids::{PortId, QueueId};
use crate::topology::NONE;
use crate::units::{Time, NEVER};

const NO_CLASS: u16 = u16::MAX;

/// `PortVl::on_wire` keeps a class in its low 16 bits, an end time above them: times up to 2^48
/// ps (281 s); `EngineConfig::validate` keeps runs with attribution below half of that.
pub(crate) const ON_WIRE_CLASS_BITS: u32 = 16;
pub(crate) const ON_WIRE_MAX_PS: Time = 1 << (64 - ON_WIRE_CLASS_BITS);

/// One row of the interference table: port, VL, kind, victim, culprit, picoseconds.
pub(crate) type AttributionRow = (u32, u8, u8, u16, u16, u64);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Output = 0,
    Buffer = 1,
}

/// Dense (one slot per port, VL and key: one cache miss a charge) up to this many slots, sparse
/// (a short list per port and VL) beyond: many classes on a large fabric.
const DENSE_SLOTS: usize = 8 << 20;

/// Dense charges wait in a log of this many before they are added to their slots, all at once.
const PENDING: usize = 32768;

enum Charges {
    /// `pending`: charges not yet in `slots`, each its slot (high 32 bits) and picoseconds (low
    /// 32). Adding a batch at a time touches each slot line once for the charges a busy port
    /// took in the meantime, and the misses of the batch overlap, where one charge at a time
    /// took a miss each in the middle of the hop.
    Dense {
        keys: usize,
        slots: PrecheckedVec<u64>,
        pending: PrecheckedVec<u64>,
        len: usize,
    },
    Sparse(Vec<Vec<(u32, u64)>>),
}

#[derive(Clone, Copy)]
struct Blocked {
    /// Since when the port has been idle with credit-stalled requests (NEVER: it is not).
    since: Time,
    /// The VLs that were stalled then.
    vls: u16,
    /// Per VL: the class holding the downstream buffer when the port became blocked (the head of
    /// that buffer's queue), NO_CLASS if the space was only in flight back. VL masks are u16.
    holder: [u16; 16],
}

pub(crate) struct Attribution {
    classes: usize,
    vls: usize,
    /// Per port, its idle-blocked interval (one line or so for all three fields, not one each).
    blocked: PrecheckedVec<Blocked>,
    /// Per (port, VL) and key = (kind * classes + victim) * classes + culprit: picoseconds. The
    /// fabric-wide matrices are summed from it at the end (one write a charge, not two).
    per_port_vl: Charges,
}

impl Attribution {
    pub fn new(ports: usize, vls: usize, classes: usize) -> Attribution {
        Attribution {
            classes,
            vls,
            blocked: PrecheckedVec::new(vec![Blocked { since: NEVER, vls: 0, holder: [NO_CLASS; 16] }; ports]),
            per_port_vl: if ports * vls * 2 * classes * classes <= DENSE_SLOTS {
                Charges::Dense {
                    keys: 2 * classes * classes,
                    // Written at random, one line a charge: on huge pages, so that the charges
                    // do not also miss the TLB (the hot state is on them too).
                    slots: PrecheckedVec::new(super::mem::huge_zeroed(ports * vls * 2 * classes * classes)),
                    pending: PrecheckedVec::new(vec![0; PENDING]),
                    len: 0,
                }
            } else {
                Charges::Sparse(vec![Vec::new(); ports * vls])
            },
        }
    }

    fn key(&self, kind: Kind, victim: usize, culprit: usize) -> usize {
        (kind as usize * self.classes + victim) * self.classes + culprit
    }

    // The common case (a narrow charge logged) needs no registers saved; the rest, out of line,
    // keeps nothing live across its calls.
    #[inline(always)]
    fn charge(&mut self, kind: Kind, port_vl: usize, victim: usize, culprit: usize, ps: u64) {
        let key = self.key(kind, victim, culprit);
        match &mut self.per_port_vl {
            Charges::Dense { keys, pending, len, .. } if ps >> 32 == 0 => {
                // Fewer than 2^32 slots (DENSE_SLOTS).
                pending[*len] = ((port_vl * *keys + key) as u64) << 32 | ps;
                *len += 1;
                if *len == PENDING {
                    self.add_pending();
                }
            }
            _ => self.charge_now(port_vl, key, ps),
        }
    }

    /// A charge added at once: 2^32 ps or more, or a sparse one.
    #[cold]
    #[inline(never)]
    fn charge_now(&mut self, port_vl: usize, key: usize, ps: u64) {
        match &mut self.per_port_vl {
            Charges::Dense { keys, slots, .. } => slots[port_vl * *keys + key] += ps,
            Charges::Sparse(lists) => {
                let pairs = &mut lists[port_vl];
                match pairs.iter_mut().find(|e| e.0 == key as u32) {
                    Some(e) => e.1 += ps,
                    None => pairs.push((key as u32, ps)),
                }
            }
        }
    }

    /// Adds the logged charges to their slots and empties the log.
    #[inline(never)]
    fn add_pending(&mut self) {
        if let Charges::Dense { slots, pending, len, .. } = &mut self.per_port_vl {
            for &e in &pending.0[..*len] {
                slots[(e >> 32) as usize] += e & u32::MAX as u64;
            }
            *len = 0;
        }
    }

    /// Head-of-line blocking: `class` waited `ps` behind a packet of `culprit` (out of line,
    /// though not rare: about half the heads of a loaded fabric wait behind another packet).
    #[inline(never)]
    pub fn behind(&mut self, (port, vl): (PortId, u8), class: u16, culprit: u16, ps: u64) {
        let port_vl = port.index() * self.vls + vl as usize;
        self.charge(Kind::Buffer, port_vl, class as usize, culprit as usize, ps);
    }

    /// `port` found nothing it may send and some VLs stalled on credits (`stalled`). `downstream`:
    /// the first of the queues of the input buffer it sends into (one per VL), None when it
    /// delivers to an HCA. What holds each stalled VL's downstream space is noted now.
    pub fn blocked(
        &mut self,
        port: PortId,
        stalled: u16,
        now: Time,
        downstream: Option<QueueId>,
        (queues, packets): (&PrecheckedVec<Queue, QueueId>, &[Packet]),
    ) {
        let b = &mut self.blocked[port.index()];
        if b.since != NEVER {
            return;
        }
        b.since = now;
        b.vls = stalled;
        let mut mask = stalled;
        while mask != 0 {
            let v = mask.trailing_zeros() as usize;
            mask &= mask - 1;
            b.holder[v] = downstream
                .map(|first| QueueId(first.0 + v as u32))
                .map(|q| queues[q].head)
                .filter(|&head| head != NONE)
                .map_or(NO_CLASS, |head| packets[head as usize].class);
        }
    }

    /// Ends `port`'s idle-blocked interval if it has one: its start and the VLs stalled then.
    fn take_blocked(&mut self, port: PortId) -> Option<(Time, u16)> {
        let b = &mut self.blocked[port.index()];
        if b.since == NEVER {
            return None;
        }
        let since = std::mem::replace(&mut b.since, NEVER);
        Some((since, b.vls))
    }

    pub fn blocked_ports(&self) -> impl Iterator<Item = PortId> + '_ {
        self.blocked.iter().enumerate().filter(|(_, b)| b.since != NEVER).map(|(p, _)| PortId(p as u32))
    }

    /// victim x culprit picoseconds over the whole fabric, of each kind (output, buffer), summed
    /// from `rows` (the table's rows, read once for both).
    pub fn matrices(&self, rows: &[AttributionRow]) -> [Vec<Vec<u64>>; 2] {
        let n = self.classes;
        let mut m = [vec![vec![0u64; n]; n], vec![vec![0u64; n]; n]];
        for &(_, _, kind, victim, culprit, ps) in rows {
            m[kind as usize][victim as usize][culprit as usize] += ps;
        }
        m
    }

    /// Every nonzero (port, VL, kind, victim, culprit, picoseconds), in port and VL order.
    pub fn rows(&mut self) -> Vec<AttributionRow> {
        self.add_pending();
        let n = self.classes;
        let row = |port_vl: usize, key: usize, ps: u64| {
            let (kind, victim, culprit) = (key / (n * n), key / n % n, key % n);
            ((port_vl / self.vls) as u32, (port_vl % self.vls) as u8, kind as u8, victim as u16, culprit as u16, ps)
        };
        match &self.per_port_vl {
            Charges::Dense { keys, slots, .. } => {
                slots.iter().enumerate().filter(|(_, &ps)| ps > 0).map(|(i, &ps)| row(i / keys, i % keys, ps)).collect()
            }
            Charges::Sparse(lists) => lists
                .iter()
                .enumerate()
                .flat_map(|(port_vl, pairs)| {
                    let mut pairs = pairs.clone();
                    pairs.sort_unstable();
                    pairs.into_iter().map(move |(key, ps)| row(port_vl, key as usize, ps))
                })
                .collect(),
        }
    }
}

// What the engine tells attribution, from the hot path: the common case inline, charging out
// of line.

impl super::Simulation {
    /// Attribution: queue `q`'s new head (of `class`, eligible at `eligible`) reached the head;
    /// the queue still holds where its predecessor was filed. A busy queue's predecessor is the
    /// packet on the wire at the port and VL it was granted at, whose `PortVl::on_wire` says when
    /// it ends and to whom the wait behind it is charged (in the transmit path, the line the same
    /// hop has just written). A head that reaches a free queue was pushed into an empty one, at
    /// or before its header arrives: it waits behind nobody there.
    #[inline(always)]
    pub(crate) fn attribute_head(&mut self, q: QueueId, eligible: Time, class: u16) {
        let queue = &self.queues[q];
        let (busy, previous) = (queue.busy, (queue.out_port, queue.out_vl));
        debug_assert!(busy || eligible >= self.now, "a head reaches a free queue no later than its header");
        if !busy {
            return;
        }
        let wire = self.port_vls[self.port_vl(previous.0, previous.1)].on_wire;
        let (until, culprit) = (wire >> ON_WIRE_CLASS_BITS, wire as u16);
        if eligible < until {
            let window = self.window;
            if let Some(a) = self.attribution.as_deref_mut() {
                a.behind(previous, class, culprit, window.overlap(eligible, until));
            }
        }
    }

    /// Attribution (`run.interference`): `port` starts sending a packet of `class` until `done`
    /// (its request already taken off the lists); `was_blocked`: it sat idle on credits.
    #[inline(always)]
    pub(crate) fn attribute_wait(
        &mut self,
        port: PortId,
        vl: u8,
        class: u16,
        now: Time,
        done: Time,
        was_blocked: bool,
    ) {
        let idx = self.port_vl(port, vl);
        self.port_vls[idx].on_wire = (done << ON_WIRE_CLASS_BITS) | class as u64;
        // No request left filed: nobody waits for this transmission.
        if self.ports[port].request_mask != 0 || was_blocked {
            self.charge_waits(port, now, was_blocked, Some((class, self.window.overlap(now, done))));
        }
    }

    /// Charges the heads waiting at `port` (filed, their queues free): the credit-stalled idle
    /// time that ends `now`, if the port `was_blocked`, to what held the downstream space; and
    /// `sending` = (culprit, picoseconds), the transmission starting now, to its class.
    #[inline(never)]
    pub(crate) fn charge_waits(&mut self, port: PortId, now: Time, was_blocked: bool, sending: Option<(u16, u64)>) {
        let (window, vls) = (self.window, self.vls as usize);
        let a = self.attribution.as_deref_mut().expect("attribution on");
        // Only a port that sat idle on credits has a blocked interval to end (its own line says
        // so: no load of the per-port interval for the common case).
        let idle = if was_blocked { a.take_blocked(port) } else { None };
        let (idle_ps, idle_vls) = idle.map_or((0, 0), |(since, stalled)| (window.overlap(since, now), stalled));
        let idle_vls = if idle_ps > 0 { idle_vls } else { 0 };
        let (culprit, sending_ps) = sending.unwrap_or((NO_CLASS, 0));
        let sending_vls = if sending_ps > 0 { self.ports[port].request_mask } else { 0 };
        let mut mask = idle_vls | sending_vls;
        while mask != 0 {
            let v = mask.trailing_zeros() as usize;
            mask &= mask - 1;
            let port_vl = port.index() * vls + v;
            let holder = if idle_vls & (1 << v) != 0 { a.blocked[port.index()].holder[v] } else { NO_CLASS };
            let mut r = self.port_vls[port_vl].first_request;
            while !r.is_none() {
                let queue = &self.queues[r];
                if !queue.busy {
                    let victim = self.packets.items[queue.head as usize].class as usize;
                    if sending_vls & (1 << v) != 0 {
                        a.charge(Kind::Output, port_vl, victim, culprit as usize, sending_ps);
                    }
                    if idle_vls & (1 << v) != 0 {
                        let by = if holder == NO_CLASS { victim } else { holder as usize };
                        a.charge(Kind::Output, port_vl, victim, by, idle_ps);
                    }
                }
                r = queue.next_request;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Charges logged in batches sum to what adding each at once gives, across several batches,
    /// with charges too wide for the log (2^32 ps and up) mixed in, including before the end;
    /// and the sparse store (many classes) gives the same rows.
    #[test]
    fn logged_charges_sum_as_direct_ones() {
        for (ports, vls, classes) in [(3, 2, 2), (1000, 1, 70)] {
            let mut a = Attribution::new(ports, vls, classes);
            assert_eq!(matches!(a.per_port_vl, Charges::Sparse(_)), classes == 70);
            let mut expected = std::collections::BTreeMap::new();
            for i in 0..(2 * PENDING + 7) as u64 {
                let (port, vl) = (PortId((i % 3) as u32), (i % vls as u64) as u8);
                let (class, culprit) = ((i / 2 % 2) as u16, (i / 4 % 2) as u16);
                let ps = if i % 1000 == 999 { (1 << 32) + i } else { i * 7919 % 100_000 };
                a.behind((port, vl), class, culprit, ps);
                *expected.entry((port.0, vl, Kind::Buffer as u8, class, culprit)).or_insert(0) += ps;
            }
            let rows = a.rows();
            let got: std::collections::BTreeMap<_, _> = rows.iter().map(|r| ((r.0, r.1, r.2, r.3, r.4), r.5)).collect();
            expected.retain(|_, ps| *ps > 0);
            assert_eq!(got, expected);
            // Reading them again gives the same rows (the log was emptied into the slots once).
            assert_eq!(a.rows(), rows);
        }
    }
}
