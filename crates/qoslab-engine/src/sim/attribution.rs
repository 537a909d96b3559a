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
//! Off (the default), none of this runs: the engine checks one `Option` per filing, grant,
//! stall and transmission.

use super::prechecked::PrecheckedVec;
use crate::fabric::queue::Queue;
use crate::ids::{PortId, QueueId};
use crate::topology::NONE;
use crate::units::{Time, NEVER};

const NO_CLASS: u16 = u16::MAX;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Output = 0,
    Buffer = 1,
}

#[derive(Debug, Clone, Copy, Default)]
struct QueueNote {
    busy_until: Time,
    head_class: u16,
}

/// Dense (one slot per port, VL and key: one cache miss a charge) up to this many slots, sparse
/// (a short list per port and VL) beyond: many classes on a large fabric.
const DENSE_SLOTS: usize = 8 << 20;

enum Charges {
    Dense { keys: usize, slots: PrecheckedVec<u64> },
    Sparse(Vec<Vec<(u32, u64)>>),
}

pub(crate) struct Attribution {
    classes: usize,
    vls: usize,
    /// Per (port, VL, class): heads filed and not yet granted.
    waiting: PrecheckedVec<u32>,
    /// Per queue: its head's class and until when its previous packet is on the wire, together
    /// (one cache line holds four queues' notes).
    notes: PrecheckedVec<QueueNote>,
    /// Per port: since when it has been idle with credit-stalled requests (NEVER: it is not), and
    /// the VLs that were stalled then.
    blocked_since: PrecheckedVec<Time>,
    blocked_vls: PrecheckedVec<u16>,
    /// Per (port, VL): the class holding the downstream buffer when the port became blocked
    /// (the head of that buffer's queue), NO_CLASS if the space was only in flight back.
    holder: PrecheckedVec<u16>,
    /// Per (port, VL) and key = (kind * classes + victim) * classes + culprit: picoseconds. The
    /// fabric-wide matrices are summed from it at the end (one write a charge, not two).
    per_port_vl: Charges,
}

impl Attribution {
    pub fn new(ports: usize, vls: usize, queues: usize, classes: usize) -> Attribution {
        Attribution {
            classes,
            vls,
            waiting: PrecheckedVec::new(vec![0; ports * vls * classes]),
            notes: PrecheckedVec::new(vec![QueueNote::default(); queues]),
            blocked_since: PrecheckedVec::new(vec![NEVER; ports]),
            blocked_vls: PrecheckedVec::new(vec![0; ports]),
            holder: PrecheckedVec::new(vec![NO_CLASS; ports * vls]),
            per_port_vl: if ports * vls * 2 * classes * classes <= DENSE_SLOTS {
                Charges::Dense {
                    keys: 2 * classes * classes,
                    slots: PrecheckedVec::new(vec![0; ports * vls * 2 * classes * classes]),
                }
            } else {
                Charges::Sparse(vec![Vec::new(); ports * vls])
            },
        }
    }

    fn key(&self, kind: Kind, victim: usize, culprit: usize) -> usize {
        (kind as usize * self.classes + victim) * self.classes + culprit
    }

    fn charge(&mut self, kind: Kind, port_vl: usize, victim: usize, culprit: usize, ps: u64) {
        let key = self.key(kind, victim, culprit);
        match &mut self.per_port_vl {
            Charges::Dense { keys, slots } => slots[port_vl * *keys + key] += ps,
            Charges::Sparse(lists) => {
                let pairs = &mut lists[port_vl];
                match pairs.iter_mut().find(|e| e.0 == key as u32) {
                    Some(e) => e.1 += ps,
                    None => pairs.push((key as u32, ps)),
                }
            }
        }
    }

    /// Queue `queue`'s head (of `class`, eligible since `eligible`) reached the head at `now`,
    /// its request to be filed at (port, VL) `port_vl`; `busy`: its predecessor is still on the
    /// wire. `previous`: where that predecessor was filed. `window(a, b)`: the measured part.
    #[allow(clippy::too_many_arguments)]
    pub fn new_head(
        &mut self,
        queue: QueueId,
        class: u16,
        port_vl: usize,
        busy: bool,
        previous: usize,
        eligible: Time,
        now: Time,
        window: impl Fn(Time, Time) -> u64,
    ) {
        let q = queue.index();
        // Behind its predecessor from its arrival until that one's tail has left.
        let note = self.notes[q];
        let freed = if busy { note.busy_until } else { now };
        if eligible < freed {
            self.charge(Kind::Buffer, previous, class as usize, note.head_class as usize, window(eligible, freed));
        }
        self.notes[q].head_class = class;
        if !busy {
            self.waiting[port_vl * self.classes + class as usize] += 1;
        }
    }

    /// The predecessor's tail has left: queue `queue`'s head (filed at `port_vl`) now waits there.
    pub fn queue_freed(&mut self, queue: QueueId, port_vl: usize) {
        self.waiting[port_vl * self.classes + self.notes[queue.index()].head_class as usize] += 1;
    }

    /// `queue`'s head was granted at (port, VL) `port_vl`.
    #[inline]
    pub fn granted(&mut self, port_vl: usize, queue: QueueId) {
        self.waiting[port_vl * self.classes + self.notes[queue.index()].head_class as usize] -= 1;
    }

    /// `port` starts sending `queue`'s former head until `done`, for `ps` measured: every head
    /// still filed there (on the VLs in `requests`) waits for it.
    pub fn transmitting(&mut self, port: PortId, requests: u16, queue: QueueId, done: Time, ps: u64) {
        let culprit = self.notes[queue.index()].head_class as usize;
        self.notes[queue.index()].busy_until = done;
        if ps == 0 {
            return;
        }
        let mut mask = requests;
        while mask != 0 {
            let v = mask.trailing_zeros() as usize;
            mask &= mask - 1;
            let port_vl = port.index() * self.vls + v;
            for victim in 0..self.classes {
                let count = self.waiting[port_vl * self.classes + victim];
                if count > 0 {
                    self.charge(Kind::Output, port_vl, victim, culprit, ps * count as u64);
                }
            }
        }
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
        queues: &PrecheckedVec<Queue, QueueId>,
    ) {
        if self.blocked_since[port.index()] != NEVER {
            return;
        }
        self.blocked_since[port.index()] = now;
        self.blocked_vls[port.index()] = stalled;
        let mut mask = stalled;
        while mask != 0 {
            let v = mask.trailing_zeros() as usize;
            mask &= mask - 1;
            self.holder[port.index() * self.vls + v] = downstream
                .map(|first| QueueId(first.0 + v as u32))
                .filter(|&q| queues[q].head != NONE)
                .map_or(NO_CLASS, |q| self.notes[q.index()].head_class);
        }
    }

    /// Ends `port`'s idle-blocked interval, charging it (`window_ps(since)`: its part inside the
    /// measurement window).
    pub fn unblocked(&mut self, port: PortId, window_ps: impl FnOnce(Time) -> u64) {
        let since = self.blocked_since[port.index()];
        if since == NEVER {
            return;
        }
        self.blocked_since[port.index()] = NEVER;
        let ps = window_ps(since);
        if ps == 0 {
            return;
        }
        let mut mask = self.blocked_vls[port.index()];
        while mask != 0 {
            let v = mask.trailing_zeros() as usize;
            mask &= mask - 1;
            let port_vl = port.index() * self.vls + v;
            let holder = self.holder[port_vl];
            for victim in 0..self.classes {
                let count = self.waiting[port_vl * self.classes + victim];
                if count > 0 {
                    let culprit = if holder == NO_CLASS { victim } else { holder as usize };
                    self.charge(Kind::Output, port_vl, victim, culprit, ps * count as u64);
                }
            }
        }
    }

    pub fn blocked_ports(&self) -> impl Iterator<Item = PortId> + '_ {
        self.blocked_since.iter().enumerate().filter(|(_, &t)| t != NEVER).map(|(p, _)| PortId(p as u32))
    }

    /// victim x culprit picoseconds of one kind, over the whole fabric.
    pub fn matrix(&self, kind: Kind) -> Vec<Vec<u64>> {
        let n = self.classes;
        let mut m = vec![vec![0u64; n]; n];
        for (_, _, k, victim, culprit, ps) in self.rows() {
            if k == kind as u8 {
                m[victim as usize][culprit as usize] += ps;
            }
        }
        m
    }

    /// Every nonzero (port, VL, kind, victim, culprit, picoseconds), in port and VL order.
    pub fn rows(&self) -> Vec<(u32, u8, u8, u16, u16, u64)> {
        let n = self.classes;
        let row = |port_vl: usize, key: usize, ps: u64| {
            let (kind, victim, culprit) = (key / (n * n), key / n % n, key % n);
            ((port_vl / self.vls) as u32, (port_vl % self.vls) as u8, kind as u8, victim as u16, culprit as u16, ps)
        };
        match &self.per_port_vl {
            Charges::Dense { keys, slots } => {
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

// What the engine tells attribution, from the hot path (kept out of line: attribution is optional).

impl super::Simulation {
    /// Attribution: queue `q`'s new head reached the head (its request about to be filed at
    /// `out_port`, `out_vl`); the queue still holds where its predecessor was filed.
    #[inline(never)]
    pub(crate) fn attribute_head(&mut self, q: QueueId, out_port: PortId, out_vl: u8, eligible: Time, class: u16) {
        let (now, window, vls) = (self.now, self.window, self.vls as usize);
        let queue = &self.queues[q];
        let previous = queue.out_port.index() * vls + queue.out_vl as usize;
        let (busy, idx) = (queue.busy, out_port.index() * vls + out_vl as usize);
        let a = self.attribution.as_deref_mut().expect("attribution on");
        a.new_head(q, class, idx, busy, previous, eligible, now, |from, to| window.overlap(from, to));
    }

    /// Attribution: queue `q`'s predecessor has left; its head now waits at its output.
    #[inline(never)]
    pub(crate) fn attribute_freed(&mut self, q: QueueId) {
        let queue = &self.queues[q];
        let idx = self.port_vl(queue.out_port, queue.out_vl);
        self.attribution.as_deref_mut().expect("attribution on").queue_freed(q, idx);
    }

    /// Attribution (`run.interference`): `port` starts sending queue `q`'s former head until
    /// `done`; any credit-stalled idle time before is charged first.
    #[inline(never)]
    pub(crate) fn attribute_wait(&mut self, port: PortId, q: QueueId, now: Time, done: Time, was_blocked: bool) {
        let window = self.window;
        let requests = self.ports[port].request_mask;
        let a = self.attribution.as_deref_mut().expect("attribution on");
        if was_blocked {
            a.unblocked(port, |since| window.overlap(since, now));
        }
        a.transmitting(port, requests, q, done, window.overlap(now, done));
    }
}
