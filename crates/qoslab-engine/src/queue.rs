//! The event list: events pop in (time, insertion order); ties break by insertion order.
//!
//! A calendar queue. Almost every event lands within a microsecond or two of now (a packet's
//! serialization, a switch delay, a Poisson gap), so time is cut into slots of `SLOT_PS` and the
//! next `SLOTS` slots each get an unsorted bucket. Only the current slot is kept sorted; a bucket
//! is sorted once, when time reaches it (lazily: at the first pop or peek that needs it, so the
//! events pushed while the last one of a slot is handled find the wheel where they left it). Events beyond the horizon wait in a binary heap and move
//! into the wheel as the horizon passes them.
//!
//! Keys are integers, so the order is a single compare. In the far heap a u128 packs (time,
//! sequence, kind, id). A slot's events share their time above the slot width, so in the wheel
//! a u64 packs (time within the slot, order of arrival in the slot, kind, id): half the bytes to
//! push and sort, one-word compares. The order of arrival in a slot is the order of insertion:
//! far events move into a slot's bucket (in heap order) when the horizon reaches it, before any
//! event can be pushed there directly. So the order is exactly that of a plain heap.

use crate::units::Time;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// What happens at a port when its event fires.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    /// An output port finished putting a packet on its wire.
    TxEnd = 0,
    /// An idle output port should look again (a head became eligible, credits came back).
    Wake = 1,
    /// A traffic source creates its next message.
    Source = 2,
    /// An MPI rank's compute phase ends.
    RankResume = 3,
    /// An MPI message has arrived (shared memory, or the fabric's last byte).
    MpiArrival = 4,
    /// Congestion control: a BECN (CNP) reached its source; id = the CC flow (fabric/cc.rs).
    CcBecn = 5,
}

// Key layout, most significant first: time (56 bits, 20 hours of simulated time), sequence
// (40 bits), kind (3 bits, room for 8 kinds), id (29 bits).
const ID_BITS: u32 = 29;
const KIND_BITS: u32 = 3;
const SEQ_BITS: u32 = 40;
const ID_MASK: u64 = (1 << ID_BITS) - 1;
const KIND_SHIFT: u32 = ID_BITS;
const SEQ_SHIFT: u32 = ID_BITS + KIND_BITS;
const TIME_SHIFT: u32 = SEQ_SHIFT + SEQ_BITS;
const SEQ_MASK: u64 = (1 << SEQ_BITS) - 1;
/// Latest time an event may carry.
pub const MAX_EVENT_TIME: Time = (1 << (128 - TIME_SHIFT)) - 1;

/// Largest component id an event can carry.
pub const MAX_EVENT_ID: u32 = ID_MASK as u32;

/// Slot width: 2^9 ps (0.5 ns), a few events per slot even on the largest fabrics.
const SLOT_SHIFT: u32 = 9;
// A slot's key (u64), most significant first: time within the slot (9 bits), order of arrival
// in the slot (23 bits), kind (3 bits), id (29 bits).
const LOCAL_TIME_SHIFT: u32 = 64 - SLOT_SHIFT;
const ORDER_SHIFT: u32 = ID_BITS + KIND_BITS;
/// Events a slot holds at most (8 Mi, in 0.5 ns).
const MAX_SLOT_EVENTS: usize = 1 << (LOCAL_TIME_SHIFT - ORDER_SHIFT);
const SLOT_MASK: u64 = (1 << SLOT_SHIFT) - 1;
const LOCAL_KIND_ID_MASK: u64 = (1 << ORDER_SHIFT) - 1;
/// Slots in the wheel: 4096 slots of 0.5 ns cover the next ~2 µs.
const SLOTS: u64 = 1 << 12;
const SLOT_WORDS: usize = (SLOTS / 64) as usize;

pub struct EventQueue {
    /// Keys of the current slot, sorted ascending; `current[next..]` are still to pop.
    /// Ascending, because buckets fill roughly in time order, and a key pushed into the current
    /// slot is usually the latest: sorting and inserting then move little.
    current: Vec<u64>,
    next: usize,
    /// Unsorted keys of slots `current_slot + 1 .. current_slot + SLOTS`, at `slot % SLOTS`.
    wheel: Vec<Vec<u64>>,
    /// Bit `slot % SLOTS` set when that bucket is non-empty.
    occupied: [u64; SLOT_WORDS],
    in_wheel: usize,
    /// Keys of slots at or beyond `current_slot + SLOTS`.
    far: BinaryHeap<Reverse<u128>>,
    current_slot: u64,
    len: usize,
    seq: u64,
}

impl Default for EventQueue {
    fn default() -> Self {
        Self::new()
    }
}

#[inline]
fn slot_of(key: u128) -> u64 {
    ((key >> TIME_SHIFT) as u64) >> SLOT_SHIFT
}

/// A slot's key for an event at `time`, arriving `order`-th in its slot (`kind_id`: kind and id
/// packed as in the low bits of either key).
#[inline(always)]
fn local_key(time: Time, order: usize, kind_id: u64) -> u64 {
    debug_assert!(order < MAX_SLOT_EVENTS);
    (time & SLOT_MASK) << LOCAL_TIME_SHIFT | (order as u64) << ORDER_SHIFT | kind_id
}

/// Kind by its 3-bit code: a table load instead of a chain of compares (codes 6 and 7 are never
/// pushed).
const KINDS: [EventKind; 1 << KIND_BITS] = [
    EventKind::TxEnd,
    EventKind::Wake,
    EventKind::Source,
    EventKind::RankResume,
    EventKind::MpiArrival,
    EventKind::CcBecn,
    EventKind::CcBecn,
    EventKind::CcBecn,
];

// Each kind sits at its own code.
const _: () = {
    let mut code = 0;
    while code <= EventKind::CcBecn as usize {
        assert!(KINDS[code] as usize == code);
        code += 1;
    }
};

/// Kind and id sit in the same low bits of both keys.
#[inline]
fn kind_code(key: u64) -> usize {
    (key >> KIND_SHIFT) as usize & ((1 << KIND_BITS) - 1)
}

#[inline]
fn kind_of(key: u64) -> EventKind {
    KINDS[kind_code(key)]
}

/// More events in one 0.5 ns slot than its keys can order (8 Mi): no fabric comes near.
#[cold]
#[inline(never)]
fn slot_full() -> ! {
    panic!("more than {MAX_SLOT_EVENTS} events in one {} ps slot of the event list", 1 << SLOT_SHIFT)
}

impl EventQueue {
    pub fn new() -> EventQueue {
        EventQueue {
            current: Vec::with_capacity(64),
            next: 0,
            wheel: (0..SLOTS).map(|_| Vec::new()).collect(),
            occupied: [0; SLOT_WORDS],
            in_wheel: 0,
            far: BinaryHeap::new(),
            current_slot: 0,
            len: 0,
            seq: 0,
        }
    }

    /// Puts an event where it belongs: a wheel bucket, the sorted current slot or the far heap.
    /// Events are never earlier than the current slot (the run pushes nothing before now).
    #[inline(always)]
    pub fn push(&mut self, time: Time, kind: EventKind, id: u32) {
        debug_assert!(id <= MAX_EVENT_ID && time <= MAX_EVENT_TIME);
        self.len += 1;
        let kind_id = (kind as u64) << KIND_SHIFT | id as u64;
        let slot = time >> SLOT_SHIFT;
        if slot.wrapping_sub(self.current_slot + 1) < SLOTS - 1 {
            // The common case (a later slot within the wheel), inline; the others out of line.
            let b = (slot % SLOTS) as usize;
            let bucket = &mut self.wheel[b];
            if bucket.len() == MAX_SLOT_EVENTS {
                slot_full();
            }
            bucket.push(local_key(time, bucket.len(), kind_id));
            self.occupied[b / 64] |= 1 << (b % 64);
            self.in_wheel += 1;
        } else {
            self.file_current_or_far(time, kind_id, slot);
        }
    }

    #[inline(never)]
    fn file_current_or_far(&mut self, time: Time, kind_id: u64, slot: u64) {
        if slot <= self.current_slot {
            assert!(slot == self.current_slot, "an event at {time} ps, before the current slot");
            if self.current.len() == MAX_SLOT_EVENTS {
                slot_full();
            }
            // Later than every key of the slot with the same time (it arrives last), and
            // usually the latest of all (an event for now, pushed while handling another).
            let key = local_key(time, self.current.len(), kind_id);
            if self.current.last().is_some_and(|&k| k > key) {
                let at = self.next + self.current[self.next..].partition_point(|&k| k < key);
                self.current.insert(at, key);
            } else {
                self.current.push(key);
            }
        } else {
            let key = ((time as u128) << TIME_SHIFT) | (((self.seq & SEQ_MASK) as u128) << SEQ_SHIFT) | kind_id as u128;
            self.seq += 1;
            self.far.push(Reverse(key));
        }
    }

    #[inline]
    pub fn pop(&mut self) -> Option<(Time, EventKind, u32)> {
        let event = self.peek()?;
        self.pop_peeked();
        Some(event)
    }

    /// The next event, left in place (`pop_peeked` takes it): the run loop looks at its time
    /// before deciding to handle it, and this finds the key once for both.
    #[inline]
    pub fn peek(&mut self) -> Option<(Time, EventKind, u32)> {
        let key = *self.next_key()?;
        let time = self.current_slot << SLOT_SHIFT | key >> LOCAL_TIME_SHIFT;
        Some((time, kind_of(key), (key & ID_MASK) as u32))
    }

    /// Takes the event `peek` returned.
    #[inline]
    pub fn pop_peeked(&mut self) {
        debug_assert!(self.next < self.current.len());
        self.next += 1;
        self.len -= 1;
    }

    /// The earliest key, after moving to the next non-empty slot if the current one is done.
    #[inline]
    fn next_key(&mut self) -> Option<&u64> {
        if self.next == self.current.len() && self.len > 0 {
            self.advance();
        }
        self.current.get(self.next)
    }

    /// Moves to the next non-empty slot and makes its bucket the sorted current slot.
    fn advance(&mut self) {
        self.current.clear();
        self.next = 0;
        self.current_slot = if self.in_wheel > 0 {
            self.next_occupied_slot()
        } else {
            let Reverse(first) = *self.far.peek().expect("events left, but neither in the wheel nor far");
            slot_of(first)
        };
        // The horizon moved: far events it now covers join the wheel, before any event can be
        // pushed into their slots directly, and in their order.
        while let Some(&Reverse(k)) = self.far.peek() {
            if slot_of(k) >= self.current_slot + SLOTS {
                break;
            }
            self.far.pop();
            let b = (slot_of(k) % SLOTS) as usize;
            if self.wheel[b].len() == MAX_SLOT_EVENTS {
                slot_full();
            }
            let local = local_key((k >> TIME_SHIFT) as Time, self.wheel[b].len(), k as u64 & LOCAL_KIND_ID_MASK);
            self.wheel[b].push(local);
            self.occupied[b / 64] |= 1 << (b % 64);
            self.in_wheel += 1;
        }
        let b = (self.current_slot % SLOTS) as usize;
        std::mem::swap(&mut self.current, &mut self.wheel[b]);
        self.occupied[b / 64] &= !(1 << (b % 64));
        self.in_wheel -= self.current.len();
        self.current.sort_unstable();
    }

    /// First occupied slot after the current one (the wheel is non-empty). Buckets are scanned
    /// in slot order: from the one after the current slot, around the wheel.
    fn next_occupied_slot(&self) -> u64 {
        let start = ((self.current_slot + 1) % SLOTS) as usize;
        let first_word = start / 64;
        for i in 0..=SLOT_WORDS {
            let w = (first_word + i) % SLOT_WORDS;
            let mut word = self.occupied[w];
            if i == 0 {
                word &= !0u64 << (start % 64);
            } else if i == SLOT_WORDS {
                word &= !(!0u64 << (start % 64));
            }
            if word != 0 {
                let bucket = (w * 64) as u64 + word.trailing_zeros() as u64;
                return self.current_slot + 1 + (bucket + SLOTS - start as u64) % SLOTS;
            }
        }
        unreachable!("the wheel count says non-empty but no bucket is occupied")
    }

    /// The port of the event `ahead` places after the next one if it is a port event (TxEnd or
    /// Wake) already sorted into the current slot; a prefetch hint, which may change as events
    /// are pushed.
    #[inline(always)]
    pub fn upcoming_port(&self, ahead: usize) -> Option<u32> {
        let key = *self.current.get(self.next + ahead)?;
        // TxEnd and Wake are codes 0 and 1.
        (kind_code(key) <= EventKind::Wake as usize).then_some((key & ID_MASK) as u32)
    }

    /// The events after the next one that are already sorted (the rest of the current slot),
    /// for prefetch hints that look several places ahead.
    #[inline(always)]
    pub fn upcoming_events(&self) -> Upcoming<'_> {
        Upcoming(self.current.get(self.next..).unwrap_or(&[]))
    }

    #[inline]
    pub fn peek_time(&mut self) -> Option<Time> {
        self.peek().map(|e| e.0)
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// A view of the sorted events after the next one (see `EventQueue::upcoming_events`).
pub struct Upcoming<'a>(&'a [u64]);

impl Upcoming<'_> {
    /// Kind and id of the event `ahead` places after the next one.
    #[inline(always)]
    pub fn event(&self, ahead: usize) -> Option<(EventKind, u32)> {
        let key = *self.0.get(ahead)?;
        Some((kind_of(key), (key & ID_MASK) as u32))
    }

    /// Its port, if it is a port event (TxEnd or Wake, codes 0 and 1).
    #[inline(always)]
    pub fn port(&self, ahead: usize) -> Option<u32> {
        let key = *self.0.get(ahead)?;
        (kind_code(key) <= EventKind::Wake as usize).then_some((key & ID_MASK) as u32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    #[test]
    fn pops_in_time_order_and_ties_in_insertion_order() {
        let mut q = EventQueue::new();
        q.push(50, EventKind::Wake, 7);
        q.push(10, EventKind::TxEnd, 3);
        q.push(50, EventKind::Source, 1);
        q.push(10, EventKind::Wake, 9);
        assert_eq!(q.pop(), Some((10, EventKind::TxEnd, 3)));
        assert_eq!(q.pop(), Some((10, EventKind::Wake, 9)));
        assert_eq!(q.pop(), Some((50, EventKind::Wake, 7)));
        assert_eq!(q.pop(), Some((50, EventKind::Source, 1)));
        assert_eq!(q.pop(), None);
    }

    /// An event pushed beyond the horizon and one pushed for the same time once the horizon has
    /// reached it (so directly into its slot) leave in the order they were pushed, with the
    /// wheel's events between them in time order.
    #[test]
    fn far_and_near_events_at_one_time_keep_insertion_order() {
        let mut q = EventQueue::new();
        let t = 5_000_000; // beyond the ~2 µs horizon
        q.push(t, EventKind::Wake, 1);
        q.push(t, EventKind::TxEnd, 2);
        let mut now = 0;
        while now + 400_000 < t {
            now += 400_000;
            q.push(now, EventKind::Source, 9);
            assert_eq!(q.pop(), Some((now, EventKind::Source, 9)));
        }
        q.push(t, EventKind::Source, 3);
        q.push(t - 1, EventKind::Source, 4);
        assert_eq!(q.pop(), Some((t - 1, EventKind::Source, 4)));
        assert_eq!(q.pop(), Some((t, EventKind::Wake, 1)));
        // Pushed into the current slot while it is being popped: after the earlier pushes.
        q.push(t, EventKind::Wake, 5);
        assert_eq!(q.pop(), Some((t, EventKind::TxEnd, 2)));
        assert_eq!(q.pop(), Some((t, EventKind::Source, 3)));
        assert_eq!(q.pop(), Some((t, EventKind::Wake, 5)));
        assert_eq!(q.pop(), None);
    }

    /// Against a plain heap of (time, sequence): near, far, same-slot and same-time events,
    /// pushes behind the current slot, and the queue running empty.
    #[test]
    fn matches_a_binary_heap_exactly() {
        let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(5);
        let mut q = EventQueue::new();
        let mut reference = BinaryHeap::new();
        let mut now: Time = 0;
        let mut seq = 0u64;
        for step in 0..200_000u32 {
            let pushes = if step % 5000 == 0 { 0 } else { rng.gen_range(0..3) };
            for _ in 0..pushes {
                let delay = match rng.gen_range(0..10) {
                    0 => 0,
                    1 => rng.gen_range(0..1000),
                    2 => rng.gen_range(0..50_000_000),
                    _ => rng.gen_range(0..500_000),
                };
                let id = rng.gen_range(0..1000);
                q.push(now + delay, EventKind::Wake, id);
                reference.push(Reverse((now + delay, seq, id)));
                seq += 1;
            }
            assert_eq!(q.len(), reference.len());
            assert_eq!(q.peek_time(), reference.peek().map(|Reverse(e)| e.0));
            if let Some(Reverse((t, _, id))) = reference.pop() {
                assert_eq!(q.pop(), Some((t, EventKind::Wake, id)));
                now = t;
            }
        }
    }
}
